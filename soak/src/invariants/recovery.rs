//! Recovery time per fault, membership against the spec, and availability.
//!
//! A fault's recovery time runs from its time in the fault log to the first
//! probe at or after it that finds the cluster healthy ([`health::assess`]).
//! Records of one injection (several members hit at once) are one fault. A
//! pause is measured from its resume, a network fault (partition, delay,
//! loss, blackhole-until-snapshot) from its heal: the cluster is not
//! expected to be whole while the fault lasts.
//! On Kubernetes a member kill counts from its effect instead ([`Start`]).
//! Resolution: one probe interval.

use std::time::Duration;

use etcd_operator::faults::{Fault, FaultRecord, Role};
use serde::Serialize;

use super::health::{Health, assess};
pub use super::start::Start;
use super::{Check, Violation, percentile};
use crate::history::{Ms, Phase, Sample, rfc3339};

/// Records this close together, of the same fault, are one injection.
const SAME_INJECTION_MS: u64 = 100;

/// One injection: one or more members hit at once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FaultEvent {
    /// When (unix ms, from the fault log).
    pub at: Ms,
    /// The fault log's name: kill, destroy, pause, resume, partition, heal...
    pub fault: String,
    /// Members hit.
    pub members: Vec<String>,
    /// Their roles.
    pub roles: Vec<String>,
    /// injected, dry-run or failed: ...
    pub outcome: String,
    /// A fault of the operator, not of members.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub operator: bool,
}

impl FaultEvent {
    /// Whether its recovery is measured.
    pub fn measured(&self) -> bool {
        self.outcome == "injected" && !Fault::from_name(&self.fault).is_some_and(Fault::lasting)
    }

    /// Whether it is an injected fault (a resume lifts one; a spec change is
    /// none either).
    pub fn injected(&self) -> bool {
        self.outcome == "injected"
            && !Fault::from_name(&self.fault).is_some_and(Fault::is_end)
            && !matches!(self.fault.as_str(), "resize" | "upgrade")
    }

    /// A spec change made by the runner, measured like a fault.
    pub fn change(at: Ms, what: &str, detail: String) -> Self {
        FaultEvent {
            at,
            fault: what.into(),
            members: vec![detail],
            roles: Vec::new(),
            outcome: "injected".into(),
            operator: false,
        }
    }

    /// "kill of a-1 (leader)".
    pub fn describe(&self) -> String {
        if self.roles.is_empty() {
            return format!("{} {}", self.fault, self.members.join(", "));
        }
        let who: Vec<String> = self
            .members
            .iter()
            .zip(&self.roles)
            .map(|(m, r)| format!("{m} ({r})"))
            .collect();
        format!("{} of {}", self.fault, who.join(", "))
    }
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Leader => "leader",
        Role::Follower => "follower",
        Role::Learner => "learner",
        Role::Unknown => "unknown",
    }
}

/// Groups fault-log records into injections, in time order.
pub fn group(records: &[FaultRecord]) -> Vec<FaultEvent> {
    let mut sorted: Vec<&FaultRecord> = records.iter().collect();
    sorted.sort_by_key(|r| r.unix_ms);
    let mut out: Vec<FaultEvent> = Vec::new();
    for r in sorted {
        let fault = r.fault.as_str();
        if let Some(last) = out.last_mut()
            && last.fault == fault
            && last.outcome == r.outcome
            && last.operator == r.cluster.is_empty()
            && r.unix_ms.saturating_sub(last.at) <= SAME_INJECTION_MS
        {
            last.members.push(r.member.clone());
            last.roles.push(role_name(r.role).into());
            continue;
        }
        out.push(FaultEvent {
            at: r.unix_ms,
            fault: fault.into(),
            members: vec![r.member.clone()],
            roles: vec![role_name(r.role).into()],
            outcome: r.outcome.clone(),
            // The monkey logs the operator with no cluster.
            operator: r.cluster.is_empty(),
        });
    }
    out
}

/// A fault and when the cluster was healthy again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Recovery {
    /// The fault.
    pub event: FaultEvent,
    /// First healthy probe at or after its start; `None`: never (before
    /// the end).
    pub recovered_at: Option<Ms>,
    /// When counted from its effect ([`Start::Effect`]): the first probe
    /// that saw it; `None` when counted from the fault log.
    pub effect_at: Option<Ms>,
    /// Counted from its effect, but no probe saw one before the next fault
    /// or the end: not a recovery time at all.
    pub no_effect: bool,
}

impl Recovery {
    /// A recovery counted from the fault log.
    pub fn logged(event: FaultEvent, recovered_at: Option<Ms>) -> Self {
        Recovery {
            event,
            recovered_at,
            effect_at: None,
            no_effect: false,
        }
    }

    /// When its recovery time starts.
    pub fn start(&self) -> Ms {
        self.effect_at.unwrap_or(self.event.at)
    }

    /// Recovery time in ms, if it recovered.
    pub fn millis(&self) -> Option<u64> {
        self.recovered_at.map(|r| r.saturating_sub(self.start()))
    }

    /// Recovery time in ms, a fault that never recovered counting up to
    /// `end` (when probing stopped): how p99, max and the recovery
    /// histogram count it.
    pub fn millis_until(&self, end: Ms) -> u64 {
        self.millis()
            .unwrap_or_else(|| end.saturating_sub(self.start()))
    }
}

/// The recovery of every measured fault, each counted as `start` says.
pub fn recoveries(events: &[FaultEvent], samples: &[Sample], start: Start) -> Vec<Recovery> {
    let healthy: Vec<bool> = samples.iter().map(|s| assess(s).ok()).collect();
    let measured: Vec<&FaultEvent> = events.iter().filter(|e| e.measured()).collect();
    let first_healthy = |from: usize| {
        (from..samples.len())
            .find(|&i| healthy[i])
            .map(|i| samples[i].at)
    };
    measured
        .iter()
        .enumerate()
        .map(|(n, e)| {
            let from = samples.partition_point(|s| s.at < e.at);
            if !start.from_effect(&e.fault, e.operator) {
                return Recovery::logged((*e).clone(), first_healthy(from));
            }
            // The effect must show before the next measured fault.
            let until = measured.get(n + 1).map_or(Ms::MAX, |next| next.at);
            let seen = (from..samples.len())
                .take_while(|&i| samples[i].at < until)
                .find(|&i| !healthy[i]);
            match seen {
                Some(i) => Recovery {
                    event: (*e).clone(),
                    recovered_at: first_healthy(i),
                    effect_at: Some(samples[i].at),
                    no_effect: false,
                },
                None => Recovery {
                    event: (*e).clone(),
                    recovered_at: None,
                    effect_at: None,
                    no_effect: true,
                },
            }
        })
        .collect()
}

/// A stretch of probes that found the cluster unhealthy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Span {
    /// First unhealthy probe.
    pub from: Ms,
    /// First healthy probe after it (`None`: still unhealthy at the end).
    pub to: Option<Ms>,
    /// Why the first probe of the stretch was unhealthy.
    pub reason: String,
}

/// Every unhealthy stretch.
pub fn unhealthy_spans(samples: &[Sample]) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::new();
    let mut open = false;
    for s in samples {
        match assess(s) {
            Health::Healthy => {
                if open && let Some(last) = out.last_mut() {
                    last.to = Some(s.at);
                }
                open = false;
            }
            Health::Unhealthy(reason) => {
                if !open {
                    out.push(Span {
                        from: s.at,
                        to: None,
                        reason,
                    });
                }
                open = true;
            }
        }
    }
    out
}

/// Fraction of the run phase covered by probes whose quorum write and
/// quorum read both succeeded; each probe covers the time until the next
/// one.
pub fn availability(samples: &[Sample]) -> Option<f64> {
    let run: Vec<&Sample> = samples.iter().filter(|s| s.phase == Phase::Run).collect();
    if run.len() < 2 {
        return None;
    }
    let (mut ok, mut total) = (0u64, 0u64);
    for w in run.windows(2) {
        let dt = w[1].at.saturating_sub(w[0].at);
        total += dt;
        if w[0].write_ok && w[0].read_ok {
            ok += dt;
        }
    }
    (total > 0).then(|| ok as f64 / total as f64)
}

/// Recovery figures of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Measured faults.
    pub faults: usize,
    /// Of which recovered.
    pub recovered: usize,
    /// p50, p99 and max in ms (unrecovered faults count to the end).
    pub p50_ms: Option<u64>,
    /// p99.
    pub p99_ms: Option<u64>,
    /// Max.
    pub max_ms: Option<u64>,
    /// Faults counted from their effect that no probe saw take effect
    /// (not in the figures above).
    pub no_effect: usize,
    /// How recovery was measured ([`Start::describe`]).
    pub measured_from: String,
}

/// Checks recoveries and membership against the bounds; `end` is when
/// probing stopped.
pub fn check(
    recs: &[Recovery],
    spans: &[Span],
    p99_bound: Duration,
    max_bound: Duration,
    end: Ms,
) -> (Stats, Vec<Violation>) {
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let (p99_b, max_b) = (ms(p99_bound), ms(max_bound));
    let mut v = Vec::new();
    let mut times = Vec::new();
    let no_effect = recs.iter().filter(|r| r.no_effect).count();
    let recs: Vec<&Recovery> = recs.iter().filter(|r| !r.no_effect).collect();
    for r in recs.iter().copied() {
        let t = r.millis_until(end);
        times.push(t);
        match r.millis() {
            None => v.push(Violation::new(
                r.event.at,
                Check::Recovery,
                format!(
                    "{} at {}: not recovered by the end of the run ({} later)",
                    r.event.describe(),
                    rfc3339(r.event.at),
                    fmt_ms(t)
                ),
            )),
            Some(t) if t > max_b => v.push(Violation::new(
                r.event.at,
                Check::Recovery,
                format!(
                    "{} at {}: recovered after {}, more than recoveryMax {}",
                    r.event.describe(),
                    rfc3339(r.event.at),
                    fmt_ms(t),
                    fmt_ms(max_b)
                ),
            )),
            Some(_) => {}
        }
    }
    let stats = Stats {
        faults: recs.len(),
        recovered: recs.iter().filter(|r| r.recovered_at.is_some()).count(),
        p50_ms: percentile(&times, 0.5),
        p99_ms: percentile(&times, 0.99),
        max_ms: times.iter().copied().max(),
        no_effect,
        measured_from: String::new(),
    };
    if let Some(p99) = stats.p99_ms
        && p99 > p99_b
    {
        v.push(Violation::new(
            end,
            Check::RecoveryP99,
            format!(
                "p99 recovery time {} is more than recoveryP99 {}",
                fmt_ms(p99),
                fmt_ms(p99_b)
            ),
        ));
    }
    for s in spans {
        let len = s.to.unwrap_or(end).saturating_sub(s.from);
        if len > max_b {
            v.push(Violation::new(
                s.from,
                Check::Membership,
                format!(
                    "the cluster was not healthy for {}{} from {} (more than recoveryMax {}): {}",
                    fmt_ms(len),
                    if s.to.is_none() {
                        " (until the end)"
                    } else {
                        ""
                    },
                    rfc3339(s.from),
                    fmt_ms(max_b),
                    s.reason
                ),
            ));
        }
    }
    (stats, v)
}

/// "1.234s".
pub fn fmt_ms(ms: u64) -> String {
    format!("{:.3}s", ms as f64 / 1000.0)
}

#[cfg(test)]
#[path = "recovery_tests.rs"]
mod tests;
