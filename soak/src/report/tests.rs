//! The report end to end on a crafted run: the verdict, each bound, and
//! every file written (summary, Markdown, HTML, junit, plots, CSV).

use std::path::Path;

use etcd_operator::faults::{Fault, Role};

use etcd_operator::faults::FaultRecord;

use super::*;
use crate::data::PlatformKind;
use crate::history::Checkpoint;
use crate::history::rfc3339;
use crate::invariants::health::tests::healthy;
use crate::invariants::lost;
use crate::load::ledger::{Ledger, WriteId};
use crate::scenario::Scenario;

fn scenario() -> Scenario {
    crate::scenario::parse(
        Path::new("t.yaml"),
        "name: t\nduration: 10s\ncluster: {name: t, size: 3, version: \"3.4.23\"}\n\
         chaos: {killInterval: 5s}\n\
         bounds: {recoveryP99: 2s, recoveryMax: 5s, availability: 0.9, minFaults: 1}\n",
    )
    .expect("parses")
}

/// Ten seconds of healthy probes, one kill at 2 s healed at 2.5 s, a
/// final checkpoint and a clean read-back.
fn good_run() -> RunData {
    let mut d = RunData::new(scenario(), PlatformKind::Local, None);
    d.started = 0;
    d.run_end = 10_000;
    d.samples = (0..100)
        .map(|i| {
            let mut s = healthy(i * 100, 3, 2);
            if (2_000..2_500).contains(&s.at) {
                s.views.pop();
            }
            s
        })
        .collect();
    d.faults = vec![FaultRecord {
        time: rfc3339(2_000),
        unix_ms: 2_000,
        fault: Fault::Kill,
        cluster: "t".into(),
        member: "m3".into(),
        role: Role::Leader,
        outcome: "injected".into(),
    }];
    d.checkpoints = vec![Checkpoint {
        at: 9_900,
        revision: 5,
        hashes: vec![("a".into(), Ok((1, 0))), ("b".into(), Ok((1, 0)))],
        final_check: true,
    }];
    d.lost = Some(lost::Outcome {
        keys: 10,
        ..lost::Outcome::default()
    });
    d.linearizability = Some(crate::lin::Report {
        keys: 10,
        ..crate::lin::Report::default()
    });
    d.watch = Some(crate::watch::check::Report::default());
    d
}

#[test]
fn a_good_run_passes_with_its_recovery_measured() {
    let (s, derived) = evaluate(&good_run());
    assert!(s.pass, "{:#?}", s.violations);
    assert_eq!(s.recovery.p99_ms, Some(500));
    assert_eq!(derived.recoveries.len(), 1);
    assert!(s.bounds.iter().all(|r| r.pass));
}

#[test]
fn each_broken_bound_fails_the_run_and_is_listed() {
    let mut d = good_run();
    let mut l = Ledger::new();
    l.ack(1, WriteId { writer: 0, seq: 1 }, 3, 100);
    d.lost = Some(lost::check(&l, |_| None, None, &[], 9_999));
    let (s, _) = evaluate(&d);
    assert!(!s.pass);
    assert_eq!(s.lost_writes, Some(1));
    assert_eq!(s.violation_counts.get("lost-writes"), Some(&1));

    let mut d = good_run();
    for x in d.samples.iter_mut().skip(10).take(20) {
        x.write_ok = false;
    }
    let (s, _) = evaluate(&d);
    assert!(
        s.violation_counts.contains_key("availability"),
        "{:?}",
        s.violation_counts
    );

    let mut d = good_run();
    d.faults.clear();
    let (s, _) = evaluate(&d);
    assert!(s.violation_counts.contains_key("faults"));

    let mut d = good_run();
    d.interrupted = true;
    assert!(!evaluate(&d).0.pass);
}

#[test]
fn the_loss_window_is_reported_and_bounded() {
    let mut d = good_run();
    d.scenario.bounds.data_loss = crate::scenario::DataLoss::SinceBackup;
    d.lost = Some(lost::Outcome {
        keys: 10,
        rolled_back: 4,
        loss_window: Some(2_500),
        ..lost::Outcome::default()
    });
    let (s, _) = evaluate(&d);
    let row = s
        .bounds
        .iter()
        .find(|r| r.check == "loss window")
        .expect("row");
    assert_eq!(
        (row.bound.as_str(), row.measured.as_str(), row.pass),
        (
            "reported",
            "the oldest rolled-back write acknowledged 2.500s before the loss (4 writes rolled back)",
            true
        )
    );
    d.scenario.bounds.max_loss_window =
        Some(crate::scenario::Dur(std::time::Duration::from_secs(2)));
    let (s, _) = evaluate(&d);
    assert!(!s.pass);
    assert_eq!(s.violation_counts.get("lost-writes"), Some(&1));
    d.scenario.bounds.max_loss_window =
        Some(crate::scenario::Dur(std::time::Duration::from_secs(3)));
    assert!(evaluate(&d).0.pass);
    // No data loss accepted: no such row.
    assert!(
        !evaluate(&good_run())
            .0
            .bounds
            .iter()
            .any(|r| r.check == "loss window")
    );
}

#[test]
fn restore_checks_are_counted_and_must_all_verify() {
    use crate::history::RestoreCheckSeen;
    let mut d = good_run();
    d.scenario.bounds.restore_checks = Some(crate::scenario::RestoreChecks { min: 2 });
    let check = |backup: &str, time: &str, result: &str| RestoreCheckSeen {
        backup: backup.into(),
        time: time.into(),
        result: result.into(),
        message: "backup hash 0xaa, live hash 0xbb".into(),
    };
    for (i, s) in d.samples.iter_mut().enumerate() {
        let c = match i {
            0..20 => None,
            20..50 => Some(check("b1", "t1", "verified")),
            _ => Some(check("b2", "t2", "verified")),
        };
        if let Some(p) = s.published.as_mut() {
            p.restore_check = c;
        } else {
            s.published = Some(crate::history::Published {
                restore_check: c,
                ..Default::default()
            });
        }
    }
    let row = |d: &RunData| {
        let (s, _) = evaluate(d);
        let r = s
            .bounds
            .iter()
            .find(|r| r.check == "restore checks")
            .expect("row")
            .clone();
        (r, s)
    };
    let (r, s) = row(&d);
    assert_eq!(
        (r.bound.as_str(), r.measured.as_str(), r.pass),
        (">= 2, all verified", "2 ran, 2 verified", true)
    );
    assert!(s.pass, "{:?}", s.violations);
    // A mismatch fails the row and names the backup and the hashes.
    if let Some(p) = d.samples[99].published.as_mut() {
        p.restore_check = Some(check("b3", "t3", "mismatch"));
    }
    let (r, s) = row(&d);
    assert_eq!(
        (r.measured.as_str(), r.pass),
        ("3 ran, 2 verified (1 mismatch)", false)
    );
    let v = s
        .violations
        .iter()
        .find(|v| v.check == crate::invariants::Check::RestoreCheck)
        .expect("violation");
    assert!(
        v.message.contains("b3") && v.message.contains("0xbb"),
        "{}",
        v.message
    );
    // Too few checks fail it too.
    d.scenario.bounds.restore_checks = Some(crate::scenario::RestoreChecks { min: 5 });
    assert!(!row(&d).0.pass);
    // Without the bound there is no row.
    assert!(
        !evaluate(&good_run())
            .0
            .bounds
            .iter()
            .any(|r| r.check == "restore checks")
    );
}

#[test]
fn the_files_are_written_and_the_table_can_be_cut_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = write(dir.path(), &good_run()).expect("written");
    assert!(s.pass);
    let md = std::fs::read_to_string(dir.path().join("report.md")).expect("report");
    let table = summary_table(&md).expect("table");
    assert!(
        table.starts_with("| check | bound | measured | result |"),
        "{table}"
    );
    assert!(table.contains("| recovery p99 | <= 2s | 0.500s"), "{table}");
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("summary.json")).expect("json"),
    )
    .expect("valid");
    assert_eq!(json["pass"], true);
    let junit = std::fs::read_to_string(dir.path().join("junit.xml")).expect("junit");
    assert_eq!(
        junit.matches("<testcase ").count(),
        s.bounds.len(),
        "one test case per bound: {junit}"
    );
    assert!(
        junit.contains("name=\"recovery p99\"") && junit.contains("failures=\"0\""),
        "{junit}"
    );
    let html = std::fs::read_to_string(dir.path().join("report.html")).expect("html");
    assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>\n"));
    assert_eq!(html.matches("<svg").count(), 4, "the four plots inline");
    assert!(
        !html.contains("src=\"") && !html.contains("href=\""),
        "self-contained"
    );
    for f in [
        "throughput.svg",
        "latency.svg",
        "availability.svg",
        "recovery.svg",
        "seconds.csv",
    ] {
        assert!(dir.path().join(f).is_file(), "{f}");
    }
    let events = std::fs::read_to_string(dir.path().join("events.csv")).expect("events");
    assert!(
        events
            .lines()
            .any(|l| l.contains(",recovered,kill,m3,leader,injected,500,")),
        "{events}"
    );
}

#[test]
fn the_recovery_histogram_counts_unrecovered_faults_up_to_the_end() {
    let mut d = good_run();
    // A second kill at 8 s that never heals (probes end at 9.9 s).
    for s in d.samples.iter_mut().filter(|s| s.at >= 8_000) {
        s.views.pop();
    }
    d.faults.push(FaultRecord {
        time: rfc3339(8_000),
        unix_ms: 8_000,
        fault: Fault::Kill,
        cluster: "t".into(),
        member: "m2".into(),
        role: Role::Follower,
        outcome: "injected".into(),
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let s = write(dir.path(), &d).expect("written");
    assert_eq!(s.recovery.max_ms, Some(1_900));
    let hgrm = std::fs::read_to_string(dir.path().join("recovery-latency.hgrm")).expect("hgrm");
    assert!(hgrm.contains("Total count    =            2"), "{hgrm}");
    assert!(hgrm.contains("#[Max     =     1900.000"), "{hgrm}");
}

#[test]
fn linearizability_and_watch_violations_fail_their_bounds_and_junit_cases() {
    let mut d = good_run();
    let finding = crate::lin::Finding {
        kind: crate::lin::FindingKind::NotLinearizable,
        key: "soak/k000001".into(),
        at: 3_000_000,
        message: "soak/k000001: no order of its 3 operations explains their results".into(),
        ops: Vec::new(),
        timeline: "  +0.000s ..   +0.010s  w0  |[==]| #1 put w0#1 -> ok rev 5\n".into(),
    };
    d.linearizability = Some(crate::lin::Report {
        keys: 10,
        violations: 1,
        findings: vec![finding],
        ..crate::lin::Report::default()
    });
    let (s, _) = evaluate(&d);
    assert!(!s.pass);
    assert_eq!(s.violation_counts.get("linearizability"), Some(&1));
    let row = s
        .bounds
        .iter()
        .find(|r| r.check == "linearizable")
        .expect("row");
    assert!(
        !row.pass && row.measured.starts_with("1 violations"),
        "{row:?}"
    );
    let junit = super::junit::render(&s);
    assert!(
        junit.contains(
            "<failure type=\"bound\" message=\"bound 0 violations; measured 1 violations"
        ) && junit.contains("no order of its 3 operations"),
        "{junit}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), &d).expect("written");
    let md = std::fs::read_to_string(dir.path().join("report.md")).expect("md");
    assert!(
        md.contains("```text\n  +0.000s"),
        "the timeline is in the report: {md}"
    );

    // Unknown is not a pass.
    let mut d = good_run();
    d.linearizability = Some(crate::lin::Report {
        keys: 10,
        unknown_keys: vec!["soak/k000002".into()],
        ..crate::lin::Report::default()
    });
    let (s, _) = evaluate(&d);
    assert!(!s.pass);
    assert!(
        s.violations
            .iter()
            .any(|v| v.message.starts_with("unknown: the search did not finish")),
        "{:?}",
        s.violations
    );

    // A watch problem.
    let mut d = good_run();
    d.watch = Some(crate::watch::check::Report {
        violations: 1,
        problems: vec![crate::watch::check::Problem {
            at: 4_000_000,
            watcher: "watch0".into(),
            message: "revisions 7..9 are missing".into(),
        }],
        ..crate::watch::check::Report::default()
    });
    let (s, _) = evaluate(&d);
    assert_eq!(s.violation_counts.get("watch"), Some(&1));
    assert!(
        s.bounds
            .iter()
            .any(|r| r.check == "watch guarantees" && !r.pass)
    );
}

#[test]
fn a_failed_run_reports_its_error_as_a_run_violation() {
    let mut d = good_run();
    d.errors
        .push("the run failed: cannot start chaos-monkey: permission denied".into());
    let dir = tempfile::tempdir().expect("tempdir");
    let s = write(dir.path(), &d).expect("written");
    assert!(!s.pass);
    assert_eq!(s.violation_counts.get("run"), Some(&1));
    let md = std::fs::read_to_string(dir.path().join("report.md")).expect("report");
    assert!(
        md.contains("**Run error**: the run failed: cannot start chaos-monkey"),
        "{md}"
    );
}

#[test]
fn a_corrupted_members_hash_is_excused_within_hash_divergence_max_only() {
    let run = |differ_at: &[u64]| {
        let mut d = good_run();
        d.scenario = crate::scenario::parse(
            Path::new("t.yaml"),
            "name: t\nduration: 10s\ncluster: {name: t, size: 3, version: \"3.4.23\"}\n\
             chaos: {killInterval: 5s, fault: corrupt, corrupt: db}\n\
             bounds: {recoveryP99: 2s, recoveryMax: 5s, availability: 0.9, minFaults: 1, \
             hashDivergenceMax: 3s}\n",
        )
        .expect("parses");
        d.faults[0].fault = Fault::Corrupt;
        d.faults[0].member = "m2".into();
        for &at in differ_at {
            let cp = Checkpoint {
                at,
                revision: 5,
                hashes: (1..=3)
                    .map(|id| {
                        let h = if id == 2 { 7 } else { 1 };
                        (format!("http://127.0.0.{id}:2379"), Ok((h, 0)))
                    })
                    .collect(),
                final_check: false,
            };
            d.live_violations
                .extend(crate::invariants::hash::compare(&cp));
            d.checkpoints.push(cp);
        }
        evaluate(&d).0
    };
    // 2 s after the corrupt fault: excused, and said so.
    let s = run(&[4_000]);
    assert!(s.pass, "{:#?}", s.violations);
    let row = s.bounds.iter().find(|r| r.check == "KV hashes equal");
    assert!(
        row.is_some_and(|r| r.measured.contains("1 differing within 3s")),
        "{row:?}"
    );
    // Still differing 4 s after it: never replaced, a violation.
    let s = run(&[4_000, 6_000]);
    assert!(!s.pass);
    assert_eq!(s.violation_counts.get("kv-hash"), Some(&1));
}
