//! The run loop's network faults (healed after --fault-for, on a signal,
//! one per cluster at a time, --split sides), clock-skew and slow-disk, and
//! disk faults, against the in-memory platform.

use std::time::Duration;

use etcd_operator::faults::Fault;

use super::{Fake, config, go};
use crate::cli::FaultKind;
use crate::faultlog::FaultLog;
use crate::monkey::{Stop, run};
use crate::select::Target;

#[tokio::test(start_paused = true)]
async fn a_partition_is_healed_after_fault_for_and_logged_with_its_end() {
    let fake = Fake::new(&[("a", 3)]);
    let mut cfg = config();
    cfg.fault = FaultKind::Partition;
    cfg.target = Target::Leader;
    cfg.max_faults = Some(2);
    cfg.interval = Duration::from_secs(5);
    cfg.faults.fault_for = Duration::from_secs(12);
    let (r, log) = go(&fake, &cfg).await;
    let s = r.expect("run");
    assert!(s.left_unhealed.is_empty());
    let kinds: Vec<Fault> = log.records().iter().map(|r| r.fault).collect();
    // The cluster takes no second partition while the first is in force:
    // the ticks at 10s and 15s skip it, the one after the heal (17s) hits.
    assert_eq!(
        kinds,
        [Fault::Partition, Fault::Heal, Fault::Partition, Fault::Heal]
    );
    // Ticks at 5s (partition), 10s and 15s (skipped: in force), 20s.
    assert_eq!(s.ticks, 4);
    assert_eq!(
        fake.calls(),
        [
            "Partition a/a-1",
            "Heal Partition a/a-1",
            "Partition a/a-1",
            "Heal Partition a/a-1"
        ]
    );
    assert_eq!(log.faults(), 2, "heals do not count as faults");
}

#[tokio::test(start_paused = true)]
async fn a_signal_heals_what_is_in_force() {
    let fake = Fake::new(&[("a", 3)]);
    let mut cfg = config();
    cfg.fault = FaultKind::Loss;
    cfg.faults.fault_for = Duration::from_secs(3600);
    cfg.interval = Duration::from_secs(1);
    let mut log = FaultLog::in_memory();
    let stop = tokio::time::sleep(Duration::from_secs(5));
    let s = run(&fake, &cfg, &mut log, stop).await.expect("run");
    assert_eq!(s.stop, Stop::Signal);
    let kinds: Vec<Fault> = log.records().iter().map(|r| r.fault).collect();
    assert_eq!(kinds, [Fault::Loss, Fault::Heal]);
    assert!(fake.calls().last().expect("calls").starts_with("Heal Loss"));
}

#[tokio::test(start_paused = true)]
async fn a_split_puts_the_victims_side_in_one_fault() {
    let fake = Fake::new(&[("a", 5)]);
    let mut cfg = config();
    cfg.fault = FaultKind::Partition;
    cfg.target = Target::Leader;
    cfg.max_faults = Some(1);
    cfg.faults.split = Some(crate::cli::Split::Majority);
    let (r, log) = go(&fake, &cfg).await;
    r.expect("run");
    let starts: Vec<&str> = log
        .records()
        .iter()
        .filter(|r| r.fault == Fault::Partition)
        .map(|r| r.member.as_str())
        .collect();
    assert_eq!(starts.len(), 3, "5 members, majority side of 3: {starts:?}");
    assert!(starts.contains(&"a-1"), "the leader is on its side");
    let again = Fake::new(&[("a", 5)]);
    let (_, log2) = go(&again, &cfg).await;
    let replay: Vec<String> = log2.records().iter().map(|r| r.member.clone()).collect();
    let first: Vec<String> = log.records().iter().map(|r| r.member.clone()).collect();
    assert_eq!(replay, first, "the same seed draws the same side");
}

#[tokio::test(start_paused = true)]
async fn damage_faults_go_to_the_platform_once_per_victim() {
    let fake = Fake::new(&[("a", 3)]);
    let mut cfg = config();
    cfg.fault = FaultKind::Corrupt;
    cfg.target = Target::Follower;
    cfg.max_faults = Some(1);
    let (r, log) = go(&fake, &cfg).await;
    r.expect("run");
    assert_eq!(log.records().len(), 1);
    assert_eq!(log.records()[0].fault, Fault::Corrupt);
    assert_eq!(fake.calls().len(), 1);
    assert!(fake.calls()[0].starts_with("Corrupt a/"));
}

#[tokio::test(start_paused = true)]
async fn clock_skew_and_slow_disk_last_on_their_victims_and_are_healed() {
    for fault in [FaultKind::ClockSkew, FaultKind::SlowDisk] {
        let fake = Fake::new(&[("a", 5)]);
        let mut cfg = config();
        cfg.fault = fault;
        cfg.target = Target::Minority;
        cfg.max_faults = Some(2);
        cfg.interval = Duration::from_secs(5);
        cfg.faults.fault_for = Duration::from_secs(7);
        let (r, log) = go(&fake, &cfg).await;
        let s = r.expect("run");
        assert!(s.left_unhealed.is_empty());
        let kinds: Vec<Fault> = log.records().iter().map(|r| r.fault).collect();
        let f = super::super::fault_of(fault);
        // Two victims (a minority of 5) in one fault, healed together; the
        // budget of 2 is spent by that one tick.
        assert_eq!(kinds, [f, f, Fault::Heal, Fault::Heal], "{fault:?}");
        let calls = fake.calls();
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert!(calls[0].starts_with(&format!("{f:?} a/")), "{calls:?}");
        assert_eq!(calls[0].matches(',').count(), 1, "two victims: {calls:?}");
        assert_eq!(calls[1], format!("Heal {}", calls[0]));
    }
}
