//! Recovery time per fault, membership against the spec, and availability.
//!
//! A fault's recovery time runs from its time in the fault log to the first
//! probe at or after it that finds the cluster healthy ([`health::assess`]).
//! Records of one injection (several members hit at once) are one fault. A
//! pause is measured from its resume, a network fault (partition, delay,
//! loss, blackhole-until-snapshot) from its heal: the cluster is not
//! expected to be whole while the fault lasts.
//! Resolution: one probe interval.

use std::time::Duration;

use etcd_operator::faults::{Fault, FaultRecord, Role};
use serde::Serialize;

use super::health::{Health, assess};
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
        });
    }
    out
}

/// A fault and when the cluster was healthy again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Recovery {
    /// The fault.
    pub event: FaultEvent,
    /// First healthy probe at or after it; `None`: never (before the end).
    pub recovered_at: Option<Ms>,
}

impl Recovery {
    /// Recovery time in ms, if it recovered.
    pub fn millis(&self) -> Option<u64> {
        self.recovered_at.map(|r| r.saturating_sub(self.event.at))
    }

    /// Recovery time in ms, a fault that never recovered counting up to
    /// `end` (when probing stopped): how p99, max and the recovery
    /// histogram count it.
    pub fn millis_until(&self, end: Ms) -> u64 {
        self.millis()
            .unwrap_or_else(|| end.saturating_sub(self.event.at))
    }
}

/// The recovery of every measured fault.
pub fn recoveries(events: &[FaultEvent], samples: &[Sample]) -> Vec<Recovery> {
    let healthy: Vec<bool> = samples.iter().map(|s| assess(s).ok()).collect();
    events
        .iter()
        .filter(|e| e.measured())
        .map(|e| {
            let from = samples.partition_point(|s| s.at < e.at);
            let recovered_at = (from..samples.len())
                .find(|&i| healthy[i])
                .map(|i| samples[i].at);
            Recovery {
                event: e.clone(),
                recovered_at,
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
    for r in recs {
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
mod tests {
    use super::*;
    use crate::invariants::health::tests::healthy;

    fn rec(ms: u64, fault: Fault, member: &str, outcome: &str) -> FaultRecord {
        FaultRecord {
            time: rfc3339(ms),
            unix_ms: ms,
            fault,
            cluster: "c".into(),
            member: member.into(),
            role: Role::Follower,
            outcome: outcome.into(),
        }
    }

    /// Healthy every 100 ms except from `down.0` to `down.1`.
    fn history(end: u64, down: (u64, u64)) -> Vec<Sample> {
        (0..end / 100)
            .map(|i| {
                let at = i * 100;
                let mut s = healthy(at, 3, 2);
                if at >= down.0 && at < down.1 {
                    s.views.pop();
                }
                s
            })
            .collect()
    }

    #[test]
    fn recovery_is_measured_to_the_first_healthy_probe() {
        let samples = history(10_000, (2_000, 2_700));
        let events = group(&[
            rec(1_990, Fault::Kill, "m3", "injected"),
            rec(5_000, Fault::Kill, "m2", "dry-run"),
        ]);
        let r = recoveries(&events, &samples);
        assert_eq!(r.len(), 1, "dry runs are not measured");
        assert_eq!(r[0].millis(), Some(710));
        let spans = unhealthy_spans(&samples);
        assert_eq!(spans.len(), 1);
        assert_eq!((spans[0].from, spans[0].to), (2_000, Some(2_700)));
        let (stats, v) = check(
            &r,
            &spans,
            Duration::from_secs(1),
            Duration::from_secs(2),
            10_000,
        );
        assert!(v.is_empty(), "{v:?}");
        assert_eq!(stats.p99_ms, Some(710));
    }

    #[test]
    fn a_fault_that_never_heals_is_caught() {
        let samples = history(30_000, (2_000, u64::MAX));
        let events = group(&[rec(1_990, Fault::Kill, "m3", "injected")]);
        let r = recoveries(&events, &samples);
        assert_eq!(r[0].recovered_at, None);
        let spans = unhealthy_spans(&samples);
        let (_, v) = check(
            &r,
            &spans,
            Duration::from_secs(5),
            Duration::from_secs(15),
            30_000,
        );
        let checks: Vec<Check> = v.iter().map(|v| v.check).collect();
        assert!(checks.contains(&Check::Recovery), "{v:?}");
        assert!(checks.contains(&Check::RecoveryP99), "{v:?}");
        assert!(checks.contains(&Check::Membership), "{v:?}");
        assert!(v[0].message.contains("not recovered"), "{}", v[0].message);
    }

    #[test]
    fn one_injection_of_several_members_is_one_fault_and_pauses_count_from_resume() {
        let events = group(&[
            rec(1_000, Fault::Kill, "m1", "injected"),
            rec(1_020, Fault::Kill, "m2", "injected"),
            rec(3_000, Fault::Pause, "m3", "injected"),
            rec(8_000, Fault::Resume, "m3", "injected"),
        ]);
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].members, vec!["m1", "m2"]);
        assert!(!events[1].measured() && events[2].measured());
        assert!(
            events[1].injected() && !events[2].injected(),
            "a resume is no fault"
        );
    }

    #[test]
    fn availability_is_time_weighted_over_the_run() {
        let mut samples = history(10_000, (0, 0));
        for s in samples.iter_mut().skip(20).take(10) {
            s.write_ok = false;
        }
        let a = availability(&samples).expect("some");
        assert!((a - 89.0 / 99.0).abs() < 1e-9, "{a}");
        for s in samples.iter_mut().skip(50) {
            s.phase = Phase::Settle;
            s.write_ok = false;
        }
        let a = availability(&samples).expect("some");
        assert!((a - 39.0 / 49.0).abs() < 1e-9, "settle does not count: {a}");
    }

    #[test]
    fn a_failed_quorum_read_counts_like_a_failed_write() {
        // Writes succeed throughout; reads fail from 2 s to 3 s.
        let mut samples = history(10_000, (0, 0));
        for s in samples
            .iter_mut()
            .filter(|s| (2_000..3_000).contains(&s.at))
        {
            s.read_ok = false;
        }
        let a = availability(&samples).expect("some");
        assert!((a - 89.0 / 99.0).abs() < 1e-9, "{a}");
        let spans = unhealthy_spans(&samples);
        assert_eq!(spans.len(), 1, "{spans:?}");
        assert_eq!((spans[0].from, spans[0].to), (2_000, Some(3_000)));
        assert_eq!(spans[0].reason, "a quorum read failed");
        let events = group(&[rec(1_990, Fault::Kill, "m3", "injected")]);
        let r = recoveries(&events, &samples);
        assert_eq!(r[0].recovered_at, Some(3_000), "recovered once reads work");
    }

    #[test]
    fn unrecovered_faults_count_up_to_the_end() {
        let samples = history(30_000, (2_000, u64::MAX));
        let events = group(&[rec(1_990, Fault::Kill, "m3", "injected")]);
        let r = recoveries(&events, &samples);
        assert_eq!(r[0].millis_until(29_900), 27_910);
        let (stats, _) = check(
            &r,
            &[],
            Duration::from_secs(5),
            Duration::from_secs(15),
            29_900,
        );
        assert_eq!(stats.max_ms, Some(27_910));
    }
}
