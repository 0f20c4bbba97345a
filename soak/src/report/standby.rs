//! The summary rows of a run's standby (scenario `standby`): its lag
//! against `standby.maxLag` (the max over the samples, as measured against
//! the primary's revisions and as `status.standby.lagMs` published it),
//! its state, its data against the primary's at the end and the faults its
//! own monkey injected (after a loss of the primary, up to the loss, and
//! the promotion's rows instead of the comparison: [`super::promotion`]);
//! the same figures for summary.json, and `standby.csv`.

use serde::Serialize;

use super::{Row, RunData};
use crate::data::StandbyRun;
use crate::invariants::Violation;
use crate::invariants::recovery::{self, fmt_ms};
use crate::invariants::standby::{self, Final, Lag};

/// What summary.json says of the standby.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Its cluster.
    pub name: String,
    /// `standby.maxLag`, ms.
    pub max_lag_ms: u64,
    /// The lag once it followed, measured against the primary's revisions
    /// (`None`: it never did, or no member answered).
    pub measured_lag_ms: Option<Lag>,
    /// The lag once it followed, as status.standby.lagMs published it.
    pub lag_ms: Option<Lag>,
    /// Samples per `via` (stream, store).
    pub via: Vec<(String, usize)>,
    /// Faults its own monkey injected.
    pub faults_injected: usize,
    /// The comparison at the end.
    #[serde(rename = "final")]
    pub final_check: Option<Final>,
    /// The primary's loss and the promotion (`standby.losePrimaryAt`),
    /// with what it kept and lost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub promotion: Option<crate::invariants::promotion::Promotion>,
}

/// The rows and violations of the standby, and its summary.
pub(super) fn rows(d: &RunData, rows: &mut Vec<Row>, v: &mut Vec<Violation>) -> Option<Summary> {
    let sb = d.scenario.standby.as_ref()?;
    let Some(run) = &d.standby else {
        if !d.interrupted {
            v.push(Violation::new(
                d.run_end,
                crate::invariants::Check::Standby,
                "the standby was never created (see the run's errors)",
            ));
        }
        return None;
    };
    let bound = u64::try_from(sb.max_lag.get().as_millis()).unwrap_or(u64::MAX);
    let timeline = standby::primary_timeline(&d.samples);
    // After the primary's loss there is nothing to lag behind, and the
    // standby stops following on purpose: its samples count up to the loss.
    let lost = d.promotion.as_ref().map(|p| p.lost_at);
    let upto = lost.map_or(run.samples.len(), |at| {
        run.samples.partition_point(|s| s.at < at)
    });
    let o = standby::check(&run.samples[..upto], &timeline, bound, d.run_end);
    let via = o
        .via
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let figures = |l: &Lag, extra: &str| {
        format!(
            "max {}, p99 {}, p50 {} over {} samples{extra}; most revisions behind {}",
            fmt_ms(l.max),
            fmt_ms(l.p99),
            fmt_ms(l.p50),
            l.samples,
            l.max_revisions
        )
    };
    rows.push(Row {
        check: "standby lag (measured, max)".into(),
        bound: format!("<= {}", sb.max_lag),
        measured: o.measured.as_ref().map_or_else(
            || "never measured (never following, or no member answered)".into(),
            |l| figures(l, " (to one probe interval)"),
        ),
        pass: o.over_measured.is_empty() && o.measured.is_some(),
    });
    rows.push(Row {
        check: "standby lag (status.standby.lagMs, max)".into(),
        bound: format!("<= {}", sb.max_lag),
        measured: o.lag.as_ref().map_or_else(
            || "never following".into(),
            |l| figures(l, &format!(" (via: {via})")),
        ),
        pass: o.over.is_empty() && o.lag.is_some(),
    });
    rows.push(Row {
        check: "standby state".into(),
        bound: "never Diverged or Stopped".into(),
        measured: format!(
            "{} stretches Diverged, Stopped or never Following",
            o.states.len()
        ),
        pass: o.states.is_empty(),
    });
    v.extend(o.violations().cloned());
    let promotion = super::promotion::rows(d, rows, v);
    if !d.interrupted && sb.lose_primary_at.is_none() {
        rows.push(final_row(run.final_check.as_ref()));
        v.extend(standby::check_final(run.final_check.as_ref(), d.run_end));
    }
    let faults = recovery::group(&run.faults)
        .iter()
        .filter(|e| e.injected())
        .count();
    if sb.chaos_on(d.scenario.chaos.is_some()) {
        let floor = usize::from(d.scenario.bounds.min_faults > 0);
        let ok = faults >= floor;
        if !ok {
            v.push(Violation::new(
                d.run_end,
                crate::invariants::Check::Faults,
                "the monkey on the standby injected no fault",
            ));
        }
        rows.push(Row {
            check: "standby faults injected".into(),
            bound: format!(">= {floor}"),
            measured: format!("{faults} ({} fault-log records)", run.faults.len()),
            pass: ok,
        });
    }
    Some(Summary {
        name: run.name.clone(),
        max_lag_ms: bound,
        measured_lag_ms: o.measured,
        lag_ms: o.lag,
        via: o.via,
        faults_injected: faults,
        final_check: run.final_check.clone(),
        promotion,
    })
}

fn final_row(f: Option<&Final>) -> Row {
    let measured = match f {
        None => "not compared".into(),
        Some(f) => {
            let equal = f.members.iter().filter(|m| m.equal).count();
            let how = f
                .members
                .first()
                .map(|m| m.detail.clone())
                .unwrap_or_default();
            match &f.problem {
                Some(p) => p.clone(),
                None => format!(
                    "revision {} applied {} after the primary stopped; {equal} of {} members \
                     equal ({how})",
                    f.revision,
                    fmt_ms(f.waited_ms),
                    f.members.len()
                ),
            }
        }
    };
    Row {
        check: "standby = primary at the end".into(),
        bound: "HashKV equal at the primary's final revision".into(),
        measured,
        pass: f.is_some_and(Final::equal),
    }
}

/// standby.csv: one row per sample of the standby: its status, the
/// revision its members answered with and the lag measured from it
/// against the primary's `timeline`.
pub(super) fn csv(run: &StandbyRun, timeline: &[(crate::history::Ms, i64)]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record([
        "at_ms",
        "state",
        "via",
        "applied_revision",
        "source_revision",
        "lag_revisions",
        "lag_ms",
        "message",
        "revision",
        "measured_lag_ms",
        "measured_lag_revisions",
    ]);
    for s in &run.samples {
        let (ms, revs) = standby::measured_lag(s, timeline)
            .map_or((String::new(), String::new()), |(m, r)| {
                (m.to_string(), r.to_string())
            });
        let _ = w.write_record([
            s.at.to_string(),
            s.state.clone().unwrap_or_default(),
            s.via.clone().unwrap_or_default(),
            s.applied.to_string(),
            s.source.to_string(),
            s.lag_revisions.to_string(),
            s.lag_ms.to_string(),
            s.message.clone().unwrap_or_default(),
            s.revision.map(|r| r.to_string()).unwrap_or_default(),
            ms,
            revs,
        ]);
    }
    w.into_inner()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "standby_tests.rs"]
mod tests;
