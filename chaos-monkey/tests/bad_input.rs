//! Bad input: a clear message naming the flag, exit code 2, nothing touched.
//! Also `--help` and the environment fallbacks.

mod common;

use common::{Done, FakeState, run, run_with_env};
use etcd_operator::platform::local::process;

fn state() -> (FakeState, Vec<process::ProcessId>) {
    let mut s = FakeState::new();
    let ids = s.add_cluster("demo", 3);
    (s, ids)
}

/// Runs the monkey to its end on `s`, ticking every 20 ms, its fault log
/// at `log`.
fn run_logging_to(s: &FakeState, log: &str) -> Done {
    run(&[
        "--state-dir",
        s.state_arg(),
        "--kill-interval",
        "20ms",
        "--fault-log",
        log,
    ])
}

fn assert_bad(args: &[&str], env: &[(&str, &str)], want: &[&str]) {
    let (s, ids) = state();
    let mut all = vec!["--state-dir", s.state_arg()];
    all.extend_from_slice(args);
    // Should a bad value slip through, the run is short and bounded; flags
    // given take precedence over these.
    let mut vars = vec![
        ("CHAOS_MONKEY_KILL_INTERVAL", "20ms"),
        ("CHAOS_MONKEY_MAX_FAULTS", "1"),
        ("CHAOS_MONKEY_DRY_RUN", "true"),
    ];
    vars.extend_from_slice(env);
    let done = run_with_env(&all, &vars);
    assert_eq!(done.code(), Some(2), "{args:?} {env:?}: {}", done.stderr);
    for w in want {
        assert!(
            done.stderr.contains(w),
            "{args:?} {env:?}: no {w:?} in:\n{}",
            done.stderr
        );
    }
    assert!(
        ids.iter().all(process::alive),
        "{args:?}: nothing is touched"
    );
}

#[test]
fn bad_intervals() {
    assert_bad(
        &["--kill-interval", "0s"],
        &[],
        &["--kill-interval", "greater than zero"],
    );
    assert_bad(
        &["--kill-interval", "-5s"],
        &[],
        &["--kill-interval", "positive"],
    );
    assert_bad(
        &["--kill-interval=-5s"],
        &[],
        &["--kill-interval", "positive"],
    );
    assert_bad(
        &["--kill-interval", "soon"],
        &[],
        &["--kill-interval", "30s, 500ms or 1m"],
    );
    assert_bad(&["--pause-for", "0ms"], &[], &["--pause-for"]);
    assert_bad(&["--jitter", "-1s"], &[], &["--jitter"]);
    assert_bad(&["--duration", "0s"], &[], &["--duration"]);
    assert_bad(&["--min-age", "old"], &[], &["--min-age"]);
    // Past a year (100y was accepted): refused naming the flag and the
    // bound, from the command line or the environment.
    assert_bad(
        &["--kill-interval", "100y"],
        &[],
        &["--kill-interval", "longer than a year (365d)"],
    );
    assert_bad(
        &[],
        &[("CHAOS_MONKEY_KILL_INTERVAL", "2562048h")],
        &["--kill-interval", "longer than a year"],
    );
}

#[test]
fn bad_numbers() {
    assert_bad(
        &["--probability", "1.5"],
        &[],
        &["--probability", "from 0 to 1"],
    );
    assert_bad(
        &["--probability", "-0.1"],
        &[],
        &["--probability", "from 0 to 1"],
    );
    assert_bad(&["--max-kill", "0"], &[], &["--max-kill", "at least 1"]);
    assert_bad(
        &["--max-faults", "-2"],
        &[],
        &["--max-faults", "at least 1"],
    );
    assert_bad(&["--seed", "x"], &[], &["--seed"]);
}

#[test]
fn bad_choices() {
    assert_bad(
        &["--target", "majority"],
        &[],
        &["--target majority", "--allow-quorum-loss"],
    );
    assert_bad(&["--target", "everyone"], &[], &["--target", "random"]);
    assert_bad(&["--fault", "nuke"], &[], &["--fault", "kill"]);
    assert_bad(
        &["--platform", "kube", "--fault", "pause"],
        &[],
        &["--fault pause", "local"],
    );
    assert_bad(
        &["--target", "operator", "--fault", "destroy"],
        &[],
        &["--target operator"],
    );
    assert_bad(
        &["--cluster", "Bad_Name"],
        &[],
        &["--cluster", "not a valid cluster name"],
    );
}

#[test]
fn unknown_cluster_and_empty_selection() {
    assert_bad(
        &["--cluster", "nope"],
        &[],
        &["--cluster", "nope", "there are: demo"],
    );
    assert_bad(
        &["--cluster", "demo", "--cluster", "nope"],
        &[],
        &["no such cluster nope"],
    );
    let empty = FakeState::new();
    let done = run(&["--state-dir", empty.state_arg(), "--kill-interval", "20ms"]);
    done.assert_exit(2, "empty selection");
    let missing = run(&["--state-dir", "/nonexistent/state", "--cluster", "demo"]);
    assert_eq!(missing.code(), Some(2), "{}", missing.stderr);
    assert!(
        missing
            .stderr
            .contains("--state-dir /nonexistent/state: no such folder"),
        "{}",
        missing.stderr
    );
}

/// The remaining bad command lines of the report: negative numbers name
/// the flag and the allowed range, --pause-for needs --fault pause, and a
/// fault log must be a regular file (a FIFO would block); the OS error is
/// said once.
#[test]
fn negative_values_pause_for_and_special_fault_logs() {
    assert_bad(
        &["--seed", "-1"],
        &[],
        &["--seed", "from 0 to 18446744073709551615"],
    );
    assert_bad(
        &["--min-age", "-1s"],
        &[],
        &["--min-age", "must not be negative"],
    );
    assert_bad(
        &["--jitter=-1s"],
        &[],
        &["--jitter", "must not be negative"],
    );
    assert_bad(
        &["--pause-for", "2s"],
        &[],
        &["--pause-for applies to --fault pause only"],
    );
    assert_bad(
        &["--fault", "destroy"],
        &[("CHAOS_MONKEY_PAUSE_FOR", "2s")],
        &["--pause-for", "destroy"],
    );
    let (s, ids) = state();
    let fifo = s.dir.path().join("faults.fifo");
    etcd_operator::testing::files::mkfifo(&fifo);
    for log in [
        fifo.display().to_string(),
        s.dir.path().display().to_string(),
    ] {
        let done = run_logging_to(&s, &log);
        done.assert_exit(1, "not a regular file");
    }
    let done = run_logging_to(&s, "/nonexistent/dir/f.jsonl");
    assert_eq!(
        done.stderr.matches("No such file or directory").count(),
        1,
        "{}",
        done.stderr
    );
    assert!(ids.iter().all(process::alive));
}

#[test]
fn environment_fallbacks_are_checked_too() {
    assert_bad(
        &[],
        &[("CHAOS_MONKEY_PROBABILITY", "2")],
        &["--probability"],
    );
    assert_bad(
        &[],
        &[("CHAOS_MONKEY_TARGET", "majority")],
        &["--allow-quorum-loss"],
    );
    assert_bad(&[], &[("CHAOS_MONKEY_CLUSTER", "demo,nope")], &["nope"]);
    // A good value from the environment is used: a dry run bounded by it.
    let (s, ids) = state();
    let done = run_with_env(
        &["--kill-interval", "20ms"],
        &[
            ("CHAOS_MONKEY_STATE_DIR", s.state_arg()),
            ("CHAOS_MONKEY_DRY_RUN", "true"),
            ("CHAOS_MONKEY_MAX_FAULTS", "2"),
            ("CHAOS_MONKEY_SEED", "5"),
        ],
    );
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    assert!(
        done.stderr.contains("seed 5") && done.stderr.contains("2 dry-run"),
        "{}",
        done.stderr
    );
    assert!(ids.iter().all(process::alive));
}

#[test]
fn an_unwritable_fault_log_is_a_runtime_failure() {
    let (s, ids) = state();
    let done = run_logging_to(&s, "/nonexistent/dir/f.jsonl");
    done.assert_exit(1, "/nonexistent/dir/f.jsonl");
    assert!(ids.iter().all(process::alive));
}

#[test]
fn help_lists_every_flag_with_its_variable() {
    let out = std::process::Command::new(common::monkey_bin())
        .arg("--help")
        .output()
        .expect("run --help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--platform",
        "--state-dir",
        "--kubeconfig",
        "--namespace",
        "--selector",
        "--cluster",
        "--target",
        "--allow-quorum-loss",
        "--fault",
        "--kill-interval",
        "--pause-for",
        "--max-kill",
        "--probability",
        "--min-age",
        "--jitter",
        "--seed",
        "--dry-run",
        "--duration",
        "--max-faults",
        "--fault-log",
        "--log-format",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help:\n{help}");
        let var = format!(
            "CHAOS_MONKEY_{}",
            flag.trim_start_matches("--")
                .replace('-', "_")
                .to_uppercase()
        );
        assert!(help.contains(&var), "{var} missing from --help:\n{help}");
    }
}

#[test]
fn kube_connection_problems_are_runtime_failures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.yaml");
    let done = run(&[
        "--platform",
        "kube",
        "--kubeconfig",
        missing.to_str().expect("path"),
    ]);
    done.assert_exit(1, "--kubeconfig");

    // An API server that is not there (nothing listens on loopback port 1).
    let kubeconfig = dir.path().join("kubeconfig.yaml");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\n\
         clusters: [{name: c, cluster: {server: \"http://127.0.0.1:1\"}}]\n\
         users: [{name: u, user: {}}]\n\
         contexts: [{name: x, context: {cluster: c, user: u, namespace: chaos}}]\n\
         current-context: x\n",
    )
    .expect("kubeconfig");
    let done = run(&[
        "--platform",
        "kube",
        "--kubeconfig",
        kubeconfig.to_str().expect("path"),
        "--kill-interval",
        "20ms",
    ]);
    done.assert_exit(1, "cannot list pods in chaos");
}
