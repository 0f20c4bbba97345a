//! A standby of the cluster (scenario `standby`): what its published
//! status said during the run, how far behind the primary it was, and how
//! it compared with the primary at the end. Its lag must stay within
//! `maxLag` in every sample once it follows, both as its status publishes
//! it (`status.standby.lagMs`) and as measured here: how long before the
//! sample the primary was first seen (by a probe) past the revision the
//! standby's members answered with. Its state must never be `Diverged` or
//! `Stopped`; and at the end, at the primary's last revision, every member
//! of the standby must hold the primary's data (equal `HashKV`, or equal
//! keys read back when the two sides compacted differently).

use serde::Serialize;

use super::{Check, Violation, percentile};
use crate::history::{Ms, rfc3339};

/// One reading of the standby's published status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    /// When it was read.
    pub at: Ms,
    /// status.standby.state (`None`: no standby status yet, or none read).
    pub state: Option<String>,
    /// status.standby.via.
    pub via: Option<String>,
    /// status.standby.appliedRevision.
    pub applied: i64,
    /// status.standby.sourceRevision.
    pub source: i64,
    /// status.standby.lagRevisions.
    pub lag_revisions: i64,
    /// status.standby.lagMs.
    pub lag_ms: i64,
    /// status.standby.message.
    pub message: Option<String>,
    /// The highest revision the standby's members answered with (`None`:
    /// none answered).
    pub revision: Option<i64>,
}

/// How the data of the two sides was compared at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// `HashKV` at the revision, both sides with the same compact revision.
    HashKv,
    /// Every key read back at the revision (key, value, create and mod
    /// revision, version), the sides having compacted differently.
    ReadBack,
}

/// One standby member against the primary at the final revision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberCompare {
    /// The member's client URL.
    pub url: String,
    /// How it was compared.
    pub method: Option<Method>,
    /// Its `HashKV` at the revision (or the read-back's key count).
    pub value: Option<u64>,
    /// Equal to the primary's.
    pub equal: bool,
    /// What differs, or why it could not be compared.
    pub detail: String,
}

/// The comparison at the end.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Final {
    /// The primary's revision once it stopped changing (0: unknown).
    pub revision: i64,
    /// The standby's applied revision when the wait ended.
    pub applied: i64,
    /// How long the standby took to apply it, after the wait began.
    pub waited_ms: u64,
    /// The primary's `HashKV` at the revision.
    pub primary_hash: Option<u32>,
    /// Each standby member.
    pub members: Vec<MemberCompare>,
    /// Why the comparison could not be made, if it could not.
    pub problem: Option<String>,
}

impl Final {
    /// Every standby member compared and equal.
    pub fn equal(&self) -> bool {
        self.problem.is_none() && !self.members.is_empty() && self.members.iter().all(|m| m.equal)
    }
}

/// Lag figures over the samples once the standby followed, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Lag {
    /// Samples counted.
    pub samples: usize,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest (what `maxLag` bounds).
    pub max: u64,
    /// Largest `lagRevisions`.
    pub max_revisions: i64,
}

/// What the standby's samples show.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// The lag once it followed, as status published it (`None`: it never
    /// followed).
    pub lag: Option<Lag>,
    /// The lag once it followed, as measured against the primary's
    /// revisions (`None`: it never followed, or no member ever answered).
    pub measured: Option<Lag>,
    /// Samples per `via` (stream, store).
    pub via: Vec<(String, usize)>,
    /// Each stretch the published lag was over `maxLag`.
    pub over: Vec<Violation>,
    /// Each stretch the measured lag was over `maxLag`.
    pub over_measured: Vec<Violation>,
    /// Each stretch `Diverged` or `Stopped`, and a standby that never
    /// followed.
    pub states: Vec<Violation>,
}

impl Outcome {
    /// Every violation.
    pub fn violations(&self) -> impl Iterator<Item = &Violation> {
        self.over
            .iter()
            .chain(&self.over_measured)
            .chain(&self.states)
    }
}

/// States that must never be seen.
const BAD: [&str; 2] = ["Diverged", "Stopped"];

/// The primary's highest revision over time, from the probes: when, and
/// the highest revision any member answered a probe with up to then
/// (never going down).
pub fn primary_timeline(samples: &[crate::history::Sample]) -> Vec<(Ms, i64)> {
    let mut high = 0;
    samples
        .iter()
        .filter_map(|s| {
            high = high.max(s.views.iter().map(|v| v.revision).max()?);
            Some((s.at, high))
        })
        .collect()
}

/// The standby's lag at `s` measured against the primary's `timeline`:
/// how long before `s.at` the primary was first seen past the revision the
/// standby's members answered with (0 when it was not, yet), and by how
/// many revisions it was ahead then. To one probe interval: the primary
/// is seen moving only at its probes. `None` when no member answered.
pub fn measured_lag(s: &Sample, timeline: &[(Ms, i64)]) -> Option<(u64, i64)> {
    let rev = s.revision?;
    let past = timeline.partition_point(|(_, r)| *r <= rev);
    let ms = timeline
        .get(past)
        .map_or(0, |(at, _)| s.at.saturating_sub(*at));
    let seen = timeline.partition_point(|(at, _)| *at <= s.at);
    let ahead = seen
        .checked_sub(1)
        .and_then(|i| timeline.get(i))
        .map_or(0, |(_, r)| (r - rev).max(0));
    Some((ms, ahead))
}

/// Figures of lags (ms) and revisions behind.
fn figures(lags: &[u64], revisions: i64) -> Lag {
    Lag {
        samples: lags.len(),
        p50: percentile(lags, 0.5).unwrap_or(0),
        p99: percentile(lags, 0.99).unwrap_or(0),
        max: lags.iter().copied().max().unwrap_or(0),
        max_revisions: revisions,
    }
}

/// Checks the samples against `max_lag_ms`, the measured lag against the
/// primary's `timeline`; `end` dates a violation that belongs to no sample
/// (never followed).
pub fn check(samples: &[Sample], timeline: &[(Ms, i64)], max_lag_ms: u64, end: Ms) -> Outcome {
    let mut out = Outcome::default();
    let Some(first) = samples
        .iter()
        .position(|s| s.state.as_deref() == Some("Following"))
    else {
        out.states.push(Violation::new(
            end,
            Check::Standby,
            "the standby was never seen Following",
        ));
        return out;
    };
    let mut lags = Vec::new();
    let mut max_revisions = 0;
    let (mut measured, mut measured_revisions) = (Vec::new(), 0);
    let (mut over, mut over_measured, mut bad) = (false, false, None::<String>);
    for s in &samples[first..] {
        let Some(state) = s.state.as_deref() else {
            continue;
        };
        if let Some(v) = &s.via {
            match out.via.iter_mut().find(|(name, _)| name == v) {
                Some((_, n)) => *n += 1,
                None => out.via.push((v.clone(), 1)),
            }
        }
        if let Some((ms, ahead)) = measured_lag(s, timeline) {
            measured.push(ms);
            measured_revisions = measured_revisions.max(ahead);
            if ms > max_lag_ms && !over_measured {
                out.over_measured.push(Violation::new(
                    s.at,
                    Check::Standby,
                    format!(
                        "the standby was at revision {} while the primary was past it {ms} ms \
                         before ({ahead} revisions ahead), over standby.maxLag ({max_lag_ms} ms)",
                        s.revision.unwrap_or_default()
                    ),
                ));
            }
            over_measured = ms > max_lag_ms;
        }
        let lag = u64::try_from(s.lag_ms).unwrap_or(0);
        lags.push(lag);
        max_revisions = max_revisions.max(s.lag_revisions);
        if lag > max_lag_ms && !over {
            out.over.push(Violation::new(
                s.at,
                Check::Standby,
                format!(
                    "status.standby said the standby lagged {lag} ms ({} revisions, applied {} \
                     of {}), over standby.maxLag ({max_lag_ms} ms){}",
                    s.lag_revisions,
                    s.applied,
                    s.source,
                    said(s)
                ),
            ));
        }
        over = lag > max_lag_ms;
        if BAD.contains(&state) {
            if bad.as_deref() != Some(state) {
                out.states.push(Violation::new(
                    s.at,
                    Check::Standby,
                    format!(
                        "the standby was {state} at revision {} (since {}){}",
                        s.applied,
                        rfc3339(s.at),
                        said(s)
                    ),
                ));
            }
            bad = Some(state.to_string());
        } else {
            bad = None;
        }
    }
    out.lag = Some(figures(&lags, max_revisions));
    out.measured = (!measured.is_empty()).then(|| figures(&measured, measured_revisions));
    out
}

/// "; status says: ..." when the sample carries a message.
fn said(s: &Sample) -> String {
    s.message
        .as_deref()
        .map(|m| format!("; status says: {m}"))
        .unwrap_or_default()
}

/// The violations of the final comparison, dated `at`.
pub fn check_final(f: Option<&Final>, at: Ms) -> Vec<Violation> {
    let Some(f) = f else {
        return vec![Violation::new(
            at,
            Check::Standby,
            "the standby was not compared with the primary at the end",
        )];
    };
    let mut v = Vec::new();
    if let Some(p) = &f.problem {
        v.push(Violation::new(at, Check::Standby, p.clone()));
    }
    for m in f.members.iter().filter(|m| !m.equal) {
        v.push(Violation::new(
            at,
            Check::Standby,
            format!(
                "standby member {} differs from the primary at revision {}: {}",
                m.url, f.revision, m.detail
            ),
        ));
    }
    if f.problem.is_none() && f.members.is_empty() {
        v.push(Violation::new(
            at,
            Check::Standby,
            "no standby member answered the final comparison",
        ));
    }
    v
}

#[cfg(test)]
#[path = "standby_tests.rs"]
mod tests;
