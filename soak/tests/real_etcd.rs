//! The soak runner end to end on the real local platform: real etcd
//! processes, the operator and the chaos monkey.

mod common;

use common::{Soak, data};

#[test]
fn a_short_soak_passes_and_writes_every_report_file() {
    let mut soak = Soak::start(&data("quick.yaml"), &[]);
    let status = soak.wait();
    let summary = soak.summary();
    assert_eq!(status.code(), Some(0), "{}\n{summary:#}", soak.log());
    assert_eq!(summary["pass"], true);
    assert!(
        summary["faultsInjected"].as_u64().is_some_and(|n| n >= 2),
        "{summary:#}"
    );
    assert_eq!(summary["lostWrites"], 0);
    for f in [
        "summary.json",
        "report.md",
        "events.csv",
        "probes.csv",
        "checkpoints.csv",
        "recovery-latency.hgrm",
        "write-latency.hgrm",
        "read-latency.hgrm",
        "recovery.svg",
        "throughput.svg",
        "latency.svg",
        "availability.svg",
        "seconds.csv",
        "history.jsonl",
        "report.html",
        "junit.xml",
        "faults.jsonl",
        "logs/operator.log",
        "logs/chaos-monkey.log",
    ] {
        assert!(soak.out().join(f).is_file(), "{f} missing");
    }
    let report = std::fs::read_to_string(soak.out().join("report.md")).expect("report");
    assert!(report.contains("— PASS"), "{report}");
    assert!(
        soak.log().contains("| recovery p99 |"),
        "the summary table is printed"
    );
    // The history was recorded and checked, the watches too, and both are
    // bounds (test cases in junit.xml).
    let lin = &summary["linearizability"];
    assert!(
        lin["counts"]["ops"].as_u64().is_some_and(|n| n > 100),
        "{summary:#}"
    );
    assert_eq!(lin["violations"], 0, "{summary:#}");
    let watch = &summary["watch"];
    assert_eq!(watch["violations"], 0, "{summary:#}");
    assert!(
        watch["watchers"]
            .as_array()
            .is_some_and(|w| w.len() == 2 && w.iter().all(|x| x["events"].as_u64() > Some(100))),
        "{summary:#}"
    );
    let history = std::fs::read_to_string(soak.out().join("history.jsonl")).expect("history");
    for op in [
        "\"op\":\"put\"",
        "\"op\":\"get\"",
        "\"op\":\"cas\"",
        "\"op\":\"delete\"",
    ] {
        assert!(history.contains(op), "no {op} in the history");
    }
    let junit = std::fs::read_to_string(soak.out().join("junit.xml")).expect("junit");
    for case in [
        "name=\"linearizable\"",
        "name=\"watch guarantees\"",
        "name=\"recovery p99\"",
    ] {
        assert!(junit.contains(case), "{junit}");
    }
    assert!(junit.contains("failures=\"0\""), "{junit}");
    let html = std::fs::read_to_string(soak.out().join("report.html")).expect("html");
    assert!(
        html.contains("<svg") && html.contains("PASS"),
        "one page with the plots"
    );
    // soak compare reads the two reports (here: the run with itself).
    let out = common::soak_cmd()
        .arg("compare")
        .arg(soak.out())
        .arg(soak.out().join("summary.json"))
        .output()
        .expect("compare");
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("| linearizable | 0 violations |"), "{text}");
    // soak lincheck checks the history on its own.
    let out = common::soak_cmd()
        .arg("lincheck")
        .arg(soak.out().join("history.jsonl"))
        .output()
        .expect("lincheck");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        etcd_operator::platform::local::running_members(&soak.state()).is_empty(),
        "the runner left members running"
    );
}

#[test]
fn chaos_without_healing_fails_with_recovery_violations() {
    let mut soak = Soak::start(&data("unhealed.yaml"), &[]);
    let status = soak.wait();
    let summary = soak.summary();
    assert_eq!(status.code(), Some(1), "{}\n{summary:#}", soak.log());
    assert_eq!(summary["pass"], false);
    let counts = &summary["violationCounts"];
    assert!(
        counts["recovery"].as_u64().is_some_and(|n| n >= 1),
        "{summary:#}"
    );
    assert!(
        counts["membership"].as_u64().is_some_and(|n| n >= 1),
        "{summary:#}"
    );
    let violations = summary["violations"].as_array().expect("list");
    assert!(
        violations.iter().any(|v| v["check"] == "recovery"
            && v["message"]
                .as_str()
                .is_some_and(|m| m.contains("not recovered"))),
        "{summary:#}"
    );
    assert!(etcd_operator::platform::local::running_members(&soak.state()).is_empty());
}

#[test]
fn a_client_acknowledging_unsent_writes_fails_the_history_checks() {
    // The deliberately broken setup: the cluster is fine, the client lies
    // (one put in 20 acknowledged without being sent). The linearizability
    // check must catch it, and so must the lost-write and watch checks.
    let mut soak = Soak::start(&data("sabotage.yaml"), &["--sabotage", "ack-unsent-writes"]);
    let status = soak.wait();
    let summary = soak.summary();
    assert_eq!(status.code(), Some(1), "{}\n{summary:#}", soak.log());
    let counts = &summary["violationCounts"];
    assert!(
        counts["linearizability"].as_u64().is_some_and(|n| n >= 1),
        "{summary:#}"
    );
    assert!(
        counts["watch"].as_u64().is_some_and(|n| n >= 1),
        "{summary:#}"
    );
    let findings = summary["linearizability"]["findings"]
        .as_array()
        .expect("findings");
    assert!(
        findings.iter().any(|f| f["kind"] == "not-linearizable"
            && f["timeline"].as_str().is_some_and(|t| t.contains("put"))
            && f["ops"].as_array().is_some_and(|o| o.len() <= 10)),
        "a smallest failing sub-history with its timeline: {summary:#}"
    );
    let junit = std::fs::read_to_string(soak.out().join("junit.xml")).expect("junit");
    assert!(
        junit.contains("<failure type=\"bound\" message=\"bound 0 violations; measured"),
        "{junit}"
    );
    let out = common::soak_cmd()
        .arg("lincheck")
        .arg(soak.out().join("history.jsonl"))
        .output()
        .expect("lincheck");
    assert_eq!(out.status.code(), Some(1));
    assert!(etcd_operator::platform::local::running_members(&soak.state()).is_empty());
}

#[test]
fn ctrl_c_tears_everything_down_and_still_reports() {
    let mut soak = Soak::start(&data("long.yaml"), &[]);
    soak.wait_log("running for");
    let pid = rustix::process::Pid::from_raw(soak.pid()).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::INT).expect("SIGINT");
    let status = soak.wait();
    assert_eq!(status.code(), Some(130), "{}", soak.log());
    let summary = soak.summary();
    assert_eq!(summary["interrupted"], true);
    assert_eq!(summary["pass"], false);
    assert!(
        etcd_operator::platform::local::running_members(&soak.state()).is_empty(),
        "members left running after Ctrl-C"
    );
    let lock = std::fs::read_to_string(soak.state().join("operator.lock")).unwrap_or_default();
    if let Some(op) = lock
        .trim()
        .strip_prefix("pid ")
        .and_then(|p| p.parse::<i32>().ok())
    {
        assert!(
            !std::path::Path::new(&format!("/proc/{op}")).exists()
                || std::fs::read_to_string(format!("/proc/{op}/stat"))
                    .is_ok_and(|s| s.contains(") Z")),
            "the operator (pid {op}) still runs"
        );
    }
}

#[test]
fn a_failed_test_leaves_no_process_even_when_soak_itself_died() {
    let soak = Soak::start(&data("long.yaml"), &[]);
    soak.wait_log("chaos-monkey started");
    let state = soak.state();
    let operator = etcd_operator::platform::local::running_operator(&state).expect("operator");
    let members: Vec<_> = etcd_operator::platform::local::running_members(&state)
        .into_iter()
        .map(|(_, _, id)| id)
        .collect();
    assert!(!members.is_empty(), "{}", soak.log());
    let monkey: Vec<_> = common::using(&state)
        .into_iter()
        .filter(|id| {
            std::fs::read(format!("/proc/{}/cmdline", id.pid))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("chaos-monkey"))
        })
        .collect();
    assert_eq!(monkey.len(), 1, "{}", soak.log());
    // soak dies without tearing down (as on a SIGKILL or a crash); the
    // operator, the monkey and the members live on in their own groups.
    let pid = rustix::process::Pid::from_raw(soak.pid()).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).expect("SIGKILL");
    drop(soak);
    for id in std::iter::once(&operator).chain(&monkey).chain(&members) {
        assert!(common::gone(id), "process {} still runs", id.pid);
    }
    let left = common::using(&state);
    assert!(left.is_empty(), "still running: {left:?}");
}

#[test]
fn a_run_that_errors_still_writes_a_partial_report_and_keeps_its_exit_code() {
    // A chaos-monkey "binary" that exists but cannot be executed: the run
    // gets as far as starting chaos, then fails.
    let bin = tempfile::tempdir().expect("tempdir");
    let chaos = bin.path().join("chaos-monkey");
    std::fs::write(&chaos, "not a program\n").expect("write");
    let chaos = chaos.display().to_string();
    let mut soak = Soak::start(&data("quick.yaml"), &["--chaos-bin", &chaos]);
    let status = soak.wait();
    assert_eq!(status.code(), Some(3), "{}", soak.log());
    let summary = soak.summary();
    assert_eq!(summary["pass"], false);
    let violations = summary["violations"].as_array().expect("list");
    assert!(
        violations.iter().any(|v| v["check"] == "run"
            && v["message"]
                .as_str()
                .is_some_and(|m| m.contains("the run failed") && m.contains("cannot start"))),
        "{summary:#}"
    );
    assert!(
        !summary["bounds"].as_array().expect("rows").is_empty(),
        "{summary:#}"
    );
    let report = std::fs::read_to_string(soak.out().join("report.md")).expect("report");
    assert!(report.contains("**Run error**: the run failed"), "{report}");
    assert!(soak.out().join("probes.csv").is_file());
    assert!(
        etcd_operator::platform::local::running_members(&soak.state()).is_empty(),
        "the runner left members running"
    );
}
