//! Judging a run against its scenario's bounds: the summary table, every
//! violation in time order, and what the report files are made of.

use std::collections::BTreeMap;

use serde::Serialize;

use super::RunData;
pub use super::checked::Percentiles;
use crate::history::rfc3339;
use crate::invariants::recovery::{self, FaultEvent, Recovery, Span, Stats, fmt_ms};
use crate::invariants::{Check, Violation, backup, chain, hash, restore_check};

/// One row of the summary table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The check.
    pub check: String,
    /// What must hold.
    pub bound: String,
    /// What was measured.
    pub measured: String,
    /// Whether it held.
    pub pass: bool,
}

/// The verdict.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Scenario name.
    pub scenario: String,
    /// local or kube.
    pub platform: String,
    /// Every bound held and nothing was violated.
    pub pass: bool,
    /// Stopped early.
    pub interrupted: bool,
    /// Load start (RFC 3339).
    pub started: String,
    /// Seconds of load.
    pub run_seconds: f64,
    /// The table.
    pub bounds: Vec<Row>,
    /// Recovery figures.
    pub recovery: Stats,
    /// Availability (fraction).
    pub availability: Option<f64>,
    /// Faults injected.
    pub faults_injected: usize,
    /// Client operations.
    pub writes_ok: u64,
    /// Failed writes.
    pub writes_failed: u64,
    /// Reads answered.
    pub reads_ok: u64,
    /// Failed reads.
    pub reads_failed: u64,
    /// Client failures by category.
    pub errors_by_category: BTreeMap<String, u64>,
    /// Acknowledged writes lost.
    pub lost_writes: Option<usize>,
    /// Writes rolled back by a restore (accepted).
    pub rolled_back: Option<usize>,
    /// The top of each latency histogram (ms): recovery, write, read.
    pub latency_ms: BTreeMap<String, Percentiles>,
    /// Operations in history.jsonl.
    pub history_ops: u64,
    /// The linearizability check: counts, keys, unknown keys, findings
    /// (each with its smallest failing sub-history and timeline).
    pub linearizability: Option<crate::lin::Report>,
    /// The watch checks: per watcher, and every broken guarantee.
    pub watch: Option<crate::watch::check::Report>,
    /// The standby (scenario `standby`): lag, faults, the final comparison.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standby: Option<super::standby::Summary>,
    /// Violations per check.
    pub violation_counts: BTreeMap<String, usize>,
    /// Every violation, in time order.
    pub violations: Vec<Violation>,
    /// Runner notes.
    pub notes: Vec<String>,
}

/// What evaluation derives beyond the summary.
#[derive(Debug)]
pub struct Derived {
    /// Fault injections.
    pub events: Vec<FaultEvent>,
    /// Their recoveries.
    pub recoveries: Vec<Recovery>,
    /// Unhealthy stretches.
    pub spans: Vec<Span>,
    /// When probing stopped: faults not recovered count up to here.
    pub end: crate::history::Ms,
}

impl Derived {
    /// Every measured fault's recovery time in ms, unrecovered ones up to
    /// [`Derived::end`] (as p99 and max count them).
    pub fn recovery_times(&self) -> Vec<u64> {
        self.recoveries
            .iter()
            .filter(|r| !r.no_effect)
            .map(|r| r.millis_until(self.end))
            .collect()
    }
}

pub(super) fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// ", 2 showed no effect" (faults no probe saw take effect), or nothing.
fn no_effect(n: usize) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(", {n} more showed no effect any probe saw")
    }
}

fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// Judges a run against its scenario's bounds.
pub fn evaluate(d: &RunData) -> (Summary, Derived) {
    let s = &d.scenario;
    let b = &s.bounds;
    let end = d.samples.last().map(|x| x.at).unwrap_or(d.run_end);
    let mut events = recovery::group(&d.faults);
    events.extend(d.changes.iter().cloned());
    events.sort_by_key(|e| e.at);
    // A pod delete takes effect after the API call; a local kill before
    // it is logged.
    let start = match d.platform {
        crate::data::PlatformKind::Local => recovery::Start::Logged,
        crate::data::PlatformKind::Kube => recovery::Start::Effect,
    };
    let recs = recovery::recoveries(&events, &d.samples, start);
    let spans = recovery::unhealthy_spans(&d.samples);
    let (mut stats, mut v) = recovery::check(
        &recs,
        &spans,
        b.recovery_p99.get(),
        b.recovery_max.get(),
        end,
    );
    stats.measured_from = start.describe().into();
    let mut rows = Vec::new();
    let count = |v: &[Violation], c: Check| v.iter().filter(|x| x.check == c).count();
    // Differing KV hashes that a recent `corrupt` fault explains
    // (bounds.hashDivergenceMax) are counted apart, not as violations.
    let excused = b
        .hash_divergence_max
        .map(|w| hash::excused(&d.checkpoints, &d.samples, &d.faults, ms(w.get())))
        .unwrap_or_default();
    let live_violations: Vec<Violation> = d
        .live_violations
        .iter()
        .filter(|x| !(x.check == Check::KvHash && excused.contains(&x.at)))
        .cloned()
        .collect();

    let n = stats.faults;
    rows.push(Row {
        check: "recovery p99".into(),
        bound: format!("<= {}", b.recovery_p99),
        measured: match stats.p99_ms {
            Some(p) => format!(
                "{} ({n} faults, {} recovered{})",
                fmt_ms(p),
                stats.recovered,
                no_effect(stats.no_effect)
            ),
            None if stats.no_effect > 0 => {
                format!("no fault measured{}", no_effect(stats.no_effect))
            }
            None => "no faults measured".into(),
        },
        pass: count(&v, Check::RecoveryP99) == 0,
    });
    rows.push(Row {
        check: "recovery max".into(),
        bound: format!("<= {}", b.recovery_max),
        measured: stats.max_ms.map(fmt_ms).unwrap_or_else(|| "-".into()),
        pass: count(&v, Check::Recovery) == 0,
    });
    let longest = spans
        .iter()
        .map(|x| x.to.unwrap_or(end).saturating_sub(x.from))
        .max()
        .unwrap_or(0);
    rows.push(Row {
        check: "membership = spec".into(),
        bound: format!("back within {}", b.recovery_max),
        measured: format!("longest unhealthy stretch {}", fmt_ms(longest)),
        pass: count(&v, Check::Membership) == 0,
    });
    let availability = recovery::availability(&d.samples);
    let avail_ok = availability.is_some_and(|a| a >= b.availability);
    if !avail_ok {
        v.push(Violation::new(
            d.run_end,
            Check::Availability,
            format!(
                "availability {} is below the bound {}",
                availability.map(pct).unwrap_or_else(|| "unknown".into()),
                pct(b.availability)
            ),
        ));
    }
    rows.push(Row {
        check: "availability".into(),
        bound: format!(">= {}", pct(b.availability)),
        measured: availability.map(pct).unwrap_or_else(|| "no probes".into()),
        pass: avail_ok,
    });
    // The primary's backups are judged while it lives (up to its loss).
    let primary = d.promotion.as_ref().map_or(&d.samples[..], |p| {
        &d.samples[..d.samples.partition_point(|s| s.at < p.lost_at)]
    });
    if let Some(bound) = b.max_backup_age {
        let o = backup::check(primary, d.started, bound.get());
        rows.push(Row {
            check: "backup age".into(),
            bound: format!("<= {bound}"),
            measured: format!("max {} ({} backups seen)", fmt_ms(o.max_age_ms), o.backups),
            pass: o.violations.is_empty(),
        });
        v.extend(o.violations);
    }
    if let Some(bound) = b.max_chain_age {
        let o = chain::check(primary, d.started, bound.get());
        rows.push(Row {
            check: "backup chain age".into(),
            bound: format!("<= {bound}"),
            measured: format!("max {}", fmt_ms(o.max_age_ms)),
            pass: o.violations.is_empty(),
        });
        v.extend(o.violations);
    }
    if let Some(c) = &d.store_chains {
        rows.push(Row {
            check: "chains in the store".into(),
            bound: "no hole".into(),
            measured: c.measured(),
            pass: c.problems.is_empty(),
        });
        v.extend(
            c.problems
                .iter()
                .map(|p| Violation::new(d.run_end, Check::ChainAge, p.clone())),
        );
    }
    if let Some(rc) = b.restore_checks {
        let o = restore_check::check(&d.samples, rc.min, d.run_end);
        let others = o.others();
        rows.push(Row {
            check: "restore checks".into(),
            bound: format!(">= {}, all verified", rc.min),
            measured: format!(
                "{} ran, {} verified{}",
                o.checks,
                o.verified,
                if others.is_empty() {
                    String::new()
                } else {
                    format!(" ({others})")
                }
            ),
            pass: o.violations.is_empty(),
        });
        v.extend(o.violations);
    }
    let (lost_n, rolled) = match &d.lost {
        Some(o) => {
            let ok = u64::try_from(o.lost).unwrap_or(u64::MAX) <= b.lost_writes;
            let extra = if o.rolled_back > 0 {
                format!(", {} rolled back by a restore (accepted)", o.rolled_back)
            } else {
                String::new()
            };
            rows.push(Row {
                check: "lost writes".into(),
                bound: format!("<= {}", b.lost_writes),
                measured: format!(
                    "{} of {} keys ({} writes acknowledged){extra}",
                    o.lost, o.keys, d.ledger_acked
                ),
                pass: ok,
            });
            if !ok {
                v.extend(o.violations.iter().cloned());
            }
            if b.data_loss == crate::scenario::DataLoss::SinceBackup {
                let (row, over) = loss_window(o, b.max_loss_window, d.run_end);
                rows.push(row);
                v.extend(over);
            }
            (Some(o.lost), Some(o.rolled_back))
        }
        None => {
            rows.push(Row {
                check: "lost writes".into(),
                bound: format!("<= {}", b.lost_writes),
                measured: "not checked (no final read-back)".into(),
                pass: false,
            });
            (None, None)
        }
    };
    v.extend(live_violations.iter().cloned());
    let restores = crate::history::restores(&d.samples).len();
    let rollbacks = usize::try_from(d.load.rollbacks).unwrap_or(usize::MAX);
    if rollbacks > restores {
        v.push(Violation::new(
            d.run_end,
            Check::Revision,
            format!(
                "revisions went back {rollbacks} times, but the operator reported only \
                 {restores} rebuilds from a backup"
            ),
        ));
    }
    let live = |c: Check, name: &str, bound: &str, extra: String| Row {
        check: name.into(),
        bound: bound.into(),
        measured: format!("{} violations{extra}", count(&live_violations, c)),
        pass: count(&live_violations, c) == 0,
    };
    rows.push(live(
        Check::LeaderPerTerm,
        "one leader per term",
        "0 violations",
        format!(" ({} terms seen)", d.leader_terms),
    ));
    let mut row = live(
        Check::Revision,
        "revision never goes back",
        "0 violations",
        if rollbacks > 0 {
            format!(" ({rollbacks} rollbacks accepted, {restores} restores reported)")
        } else {
            String::new()
        },
    );
    row.pass = row.pass && rollbacks <= restores;
    rows.push(row);
    rows.push(live(
        Check::StaleRead,
        "no stale reads",
        "0 violations",
        format!(" ({} reads)", d.load.reads_ok),
    ));
    let finals = d.checkpoints.iter().filter(|c| c.final_check).count();
    rows.push(live(
        Check::KvHash,
        "KV hashes equal",
        "0 violations",
        format!(
            " ({} checkpoints, {finals} final{})",
            d.checkpoints.len(),
            match b.hash_divergence_max {
                Some(w) => format!(
                    "; {} differing within {w} of a corrupt fault, excused",
                    excused.len()
                ),
                None => String::new(),
            }
        ),
    ));
    if finals == 0 && !d.interrupted {
        v.push(Violation::new(
            d.run_end,
            Check::KvHash,
            "no final KV hash checkpoint was taken",
        ));
        if let Some(r) = rows.last_mut() {
            r.pass = false;
        }
    }
    let injected = events.iter().filter(|e| e.injected()).count();
    if b.min_faults > 0 || s.chaos.is_some() {
        let ok = u64::try_from(injected).unwrap_or(u64::MAX) >= b.min_faults;
        if !ok {
            v.push(Violation::new(
                d.run_end,
                Check::Faults,
                format!(
                    "{injected} faults injected, fewer than bounds.minFaults {}",
                    b.min_faults
                ),
            ));
        }
        rows.push(Row {
            check: "faults injected".into(),
            bound: format!(">= {}", b.min_faults),
            measured: format!("{injected} ({} fault-log records)", d.faults.len()),
            pass: ok,
        });
    }
    super::checked::rows(d, &mut rows, &mut v);
    let standby = super::standby::rows(d, &mut rows, &mut v);
    for e in &d.errors {
        v.push(Violation::new(d.run_end, Check::Run, e.clone()));
    }
    if d.interrupted {
        v.push(Violation::new(
            d.run_end,
            Check::Run,
            "the run was interrupted (Ctrl-C or SIGTERM)",
        ));
    }
    v.sort_by_key(|x| (x.at, x.check));
    let mut counts = BTreeMap::new();
    for x in &v {
        *counts.entry(x.check.as_str().to_string()).or_insert(0) += 1;
    }
    let pass = v.is_empty() && rows.iter().all(|r| r.pass);
    let mut latency_ms = BTreeMap::new();
    let recovery_hist = super::hist::of(
        &recs
            .iter()
            .filter(|r| !r.no_effect)
            .map(|r| r.millis_until(end))
            .collect::<Vec<u64>>(),
    );
    for (name, h, scale) in [
        ("recovery", &recovery_hist, 1.0),
        ("write", &d.load.write_us, 1000.0),
        ("read", &d.load.read_us, 1000.0),
    ] {
        if let Some(p) = Percentiles::of(h, scale) {
            latency_ms.insert(name.to_string(), p);
        }
    }
    let summary = Summary {
        scenario: s.name.clone(),
        platform: format!("{:?}", d.platform).to_lowercase(),
        pass,
        interrupted: d.interrupted,
        started: rfc3339(d.started),
        run_seconds: d.run_end.saturating_sub(d.started) as f64 / 1000.0,
        bounds: rows,
        recovery: stats,
        availability,
        faults_injected: injected,
        writes_ok: d.load.writes_ok,
        writes_failed: d.load.writes_failed,
        reads_ok: d.load.reads_ok,
        reads_failed: d.load.reads_failed,
        errors_by_category: d.load.errors.clone(),
        lost_writes: lost_n,
        rolled_back: rolled,
        latency_ms,
        history_ops: d.history_ops,
        linearizability: d.linearizability.clone(),
        watch: d.watch.clone(),
        standby,
        violation_counts: counts,
        violations: v,
        notes: d
            .notes
            .iter()
            .map(|(at, n)| format!("{}: {n}", rfc3339(*at)))
            .collect(),
    };
    (
        summary,
        Derived {
            events,
            recoveries: recs,
            spans,
            end,
        },
    )
}

/// The loss window row (and its violation when over the bound): how long
/// before the loss (the fault a rebuild repaired) the oldest write it
/// rolled back was acknowledged.
fn loss_window(
    o: &crate::invariants::lost::Outcome,
    bound: Option<crate::scenario::Dur>,
    at: crate::history::Ms,
) -> (Row, Option<Violation>) {
    let measured = match o.loss_window {
        Some(w) => format!(
            "the oldest rolled-back write acknowledged {} before the loss ({} writes rolled back)",
            fmt_ms(w),
            o.rolled_back
        ),
        None if o.rolled_back > 0 => format!("unknown ({} writes rolled back)", o.rolled_back),
        None => "no write rolled back".into(),
    };
    let limit = bound.map(|b| u64::try_from(b.get().as_millis()).unwrap_or(u64::MAX));
    let over = match (o.loss_window, limit) {
        (Some(w), Some(l)) => w > l,
        _ => false,
    };
    let row = Row {
        check: "loss window".into(),
        bound: bound.map_or_else(|| "reported".into(), |b| format!("<= {b}")),
        measured: measured.clone(),
        pass: !over,
    };
    let violation = over.then(|| {
        Violation::new(
            at,
            Check::LostWrites,
            format!(
                "the loss window is over bounds.maxLossWindow ({}): {measured}",
                bound.map(|b| b.to_string()).unwrap_or_default()
            ),
        )
    });
    (row, violation)
}
