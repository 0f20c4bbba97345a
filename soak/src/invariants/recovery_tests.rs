//! Tests of recovery times, unhealthy stretches and availability.

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
    let r = recoveries(&events, &samples, Start::Logged);
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
    let r = recoveries(&events, &samples, Start::Logged);
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
    let r = recoveries(&events, &samples, Start::Logged);
    assert_eq!(r[0].recovered_at, Some(3_000), "recovered once reads work");
}

#[test]
fn unrecovered_faults_count_up_to_the_end() {
    let samples = history(30_000, (2_000, u64::MAX));
    let events = group(&[rec(1_990, Fault::Kill, "m3", "injected")]);
    let r = recoveries(&events, &samples, Start::Logged);
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

/// A kill logged at 1 000 ms that takes effect 400 ms later (a pod
/// delete), recovered at 2 500 ms; probes every 200 ms.
#[test]
fn on_kubernetes_a_kill_counts_from_the_probe_that_saw_it() {
    let samples: Vec<Sample> = (0..50)
        .map(|i| {
            let at = i * 200;
            let mut s = healthy(at, 3, 2);
            if (1_400..2_500).contains(&at) {
                s.views.pop();
            }
            s
        })
        .collect();
    let events = group(&[rec(1_000, Fault::Kill, "m3", "injected")]);
    let logged = recoveries(&events, &samples, Start::Logged);
    assert_eq!(
        logged[0].millis(),
        Some(0),
        "the probe after the log is healthy"
    );
    let effect = recoveries(&events, &samples, Start::Effect);
    assert_eq!(effect[0].effect_at, Some(1_400));
    assert_eq!(effect[0].recovered_at, Some(2_600));
    assert_eq!(effect[0].millis(), Some(1_200));
}

#[test]
fn a_kill_no_probe_saw_is_said_not_counted_as_fast() {
    let samples = history(10_000, (0, 0));
    let mut op = rec(3_000, Fault::Kill, "etcd-operator", "injected");
    op.cluster = String::new();
    let events = group(&[rec(1_000, Fault::Kill, "m3", "injected"), op]);
    let r = recoveries(&events, &samples, Start::Effect);
    assert!(r[0].no_effect && r[0].millis().is_none(), "{:?}", r[0]);
    // The operator's kill leaves the cluster healthy: counted from the log.
    assert!(r[1].event.operator && !r[1].no_effect);
    assert_eq!(r[1].millis(), Some(0));
    let (stats, v) = check(
        &r,
        &[],
        Duration::from_secs(1),
        Duration::from_secs(2),
        10_000,
    );
    assert!(v.is_empty(), "no effect is no violation: {v:?}");
    assert_eq!((stats.faults, stats.no_effect), (1, 1));
}
