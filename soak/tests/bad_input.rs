//! Bad input is refused with a clear error (exit 2) before anything starts.

mod common;

use std::process::Output;

use common::soak_cmd;

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = soak_cmd();
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run soak")
}

fn scenario(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.yaml");
    std::fs::write(&path, text).expect("write");
    (dir, path.display().to_string())
}

const GOOD: &str = "name: t\nduration: 10s\ncluster: {name: t, size: 3, version: \"3.4.23\"}\n\
                    chaos: {killInterval: 5s}\nbounds: {recoveryP99: 5s, recoveryMax: 10s, availability: 0.9}\n";

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn unknown_fields_are_refused_with_file_and_line() {
    let (_d, path) = scenario(&GOOD.replace("duration: 10s", "duration: 10s\nwarmup: 5s"));
    let o = run(&["run", &path], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("s.yaml") && e.contains("warmup") && e.contains("line 3"),
        "{e}"
    );
}

/// Numbers and durations past any sane run were accepted (`writers:
/// 100000000`, `duration: 2562048h`, chaos starting after the run ends).
#[test]
fn huge_numbers_and_durations_are_refused_naming_the_field() {
    for (from, to, field) in [
        ("duration: 10s", "duration: 2562048h", "duration"),
        (
            "chaos: {killInterval: 5s}",
            "chaos: {killInterval: 5s, startAfter: 20s}",
            "chaos.startAfter",
        ),
        (
            "chaos: {killInterval: 5s}",
            "chaos: {killInterval: 5s}\nload: {writers: 100000000}",
            "load.writers",
        ),
        ("duration: 10s", "duration: 10s\nsettle: 2562048h", "settle"),
        (
            "chaos: {killInterval: 5s}",
            "chaos: {killInterval: 200h}",
            "chaos.killInterval: must be at most 168h",
        ),
        // Past what the monkey's own flag takes: refused as the file is read.
        (
            "chaos: {killInterval: 5s}",
            "chaos: {killInterval: 100y}",
            "chaos.killInterval: 100y is longer than a year",
        ),
        (
            "recoveryMax: 10s",
            "recoveryMax: 2562048h",
            "bounds.recoveryMax: must be at most 168h",
        ),
    ] {
        let (_d, path) = scenario(&GOOD.replace(from, to));
        let o = run(&["check", &path], &[]);
        assert_ne!(o.status.code(), Some(0), "{to}: {}", stderr(&o));
        let out = format!("{}{}", stderr(&o), String::from_utf8_lossy(&o.stdout));
        assert!(out.contains(field), "{to}: {out}");
    }
}

#[test]
fn impossible_bounds_are_refused_naming_the_field() {
    let (_d, path) = scenario(&GOOD.replace("availability: 0.9", "availability: 2"));
    let o = run(&["run", &path], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bounds.availability"), "{}", stderr(&o));
}

#[test]
fn a_missing_operator_binary_is_refused_before_anything_starts() {
    let (d, path) = scenario(GOOD);
    let out = d.path().join("out");
    let o = run(
        &["run", &path, "--out", &out.display().to_string()],
        &[("SOAK_OPERATOR_BIN", "/nonexistent/etcd-operator")],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("/nonexistent/etcd-operator") && e.contains("cargo build --workspace"),
        "{e}"
    );
    assert!(!out.exists(), "nothing was started or written");
    let o = run(
        &["run", &path],
        &[("SOAK_CHAOS_BIN", "/nonexistent/chaos-monkey")],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--chaos-bin"), "{}", stderr(&o));
}

#[test]
fn pause_faults_are_refused_on_kube() {
    let text = GOOD.replace(
        "chaos: {killInterval: 5s}",
        "chaos: {killInterval: 5s, fault: pause}",
    );
    let (_d, path) = scenario(&text);
    let o = run(&["run", &path, "--platform", "kube"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("pause is not supported on kube"),
        "{}",
        stderr(&o)
    );
    let text = GOOD.replace(
        "chaos: {killInterval: 5s}",
        "chaos: {killInterval: 5s, fault: disk-full}",
    );
    let (_d, path) = scenario(&text);
    let o = run(&["run", &path, "--platform", "kube"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("disk-full is not supported on kube"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn options_of_another_fault_are_refused_naming_the_field() {
    let text = GOOD.replace(
        "chaos: {killInterval: 5s}",
        "chaos: {killInterval: 5s, fault: kill, faultFor: 5s, loss: 30}",
    );
    let (_d, path) = scenario(&text);
    let o = run(&["run", &path], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("chaos.faultFor: applies only with fault: partition"),
        "{e}"
    );
    assert!(
        e.contains("chaos.loss: applies only with fault: loss"),
        "{e}"
    );
    // A value out of the flag's range is refused by the monkey's own
    // parser, as the file is read.
    let text = GOOD.replace(
        "chaos: {killInterval: 5s}",
        "chaos: {killInterval: 5s, fault: loss, loss: 130}",
    );
    let (_d, path) = scenario(&text);
    let o = run(&["run", &path], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("chaos.loss: expected a percentage above 0 and at most 100"),
        "{e}"
    );
}

/// Backups, their age bound and restores are taken on Kubernetes (the
/// operator runs them as Jobs there): the scenario passes the platform
/// checks, and the run stops later, at reaching the cluster (there is no
/// kubeconfig here), with exit 2 and the partial report of such a run.
#[test]
fn backups_pass_the_kube_checks() {
    let text = GOOD
        .replace(
            "version: \"3.4.23\"}",
            "version: \"3.4.23\", backup: {interval: 10s, maxBackups: 3}}",
        )
        .replace(
            "availability: 0.9}",
            "availability: 0.9, maxBackupAge: 30s}",
        );
    let (d, path) = scenario(&text);
    let out = d.path().join("out");
    let o = run(
        &[
            "run",
            &path,
            "--platform",
            "kube",
            "--out",
            &out.display().to_string(),
        ],
        &[
            ("KUBECONFIG", "/nonexistent/kubeconfig"),
            ("HOME", "/nonexistent"),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        !e.contains("cluster.backup") && !e.contains("bounds.maxBackupAge"),
        "{e}"
    );
    assert!(e.contains("no kubeconfig found"), "{e}");
}

#[test]
fn a_missing_etcd_binary_is_refused_before_the_output_folder_is_touched() {
    let (d, path) = scenario(GOOD);
    let out = d.path().join("out");
    std::fs::create_dir_all(out.join("logs")).expect("mkdir");
    std::fs::write(out.join("faults.jsonl"), "{}\n").expect("write");
    // No etcd on PATH either (Debian's etcd-server is 3.4.23).
    let o = run(
        &["run", &path, "--out", &out.display().to_string()],
        &[
            ("SOAK_ETCD_BINARIES", "/nonexistent/etcd-binaries"),
            ("PATH", "/nonexistent/bin"),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("s.yaml: cluster.version: no etcd 3.4.23 binary in /nonexistent/etcd-binaries"),
        "{e}"
    );
    assert!(out.join("logs").is_dir(), "the logs folder was removed");
    assert!(
        out.join("faults.jsonl").is_file(),
        "the fault log was removed"
    );
}

#[test]
fn check_validates_the_shipped_scenarios() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let files: Vec<String> = std::fs::read_dir(&dir)
        .expect("scenarios")
        .flatten()
        .map(|e| e.path().display().to_string())
        .filter(|p| p.ends_with(".yaml"))
        .collect();
    let mut args = vec!["check"];
    args.extend(files.iter().map(String::as_str));
    let o = run(&args, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn every_flag_has_help_and_an_env_fallback() {
    let o = run(&["run", "--help"], &[]);
    let help = String::from_utf8_lossy(&o.stdout);
    for flag in [
        "--platform",
        "--duration",
        "--out",
        "--seed",
        "--operator-bin",
        "--chaos-bin",
        "--etcd-binaries",
        "--work-dir",
        "--kubeconfig",
        "--namespace",
        "--no-progress",
    ] {
        assert!(help.contains(flag), "{flag} not in --help:\n{help}");
    }
    let envs = help.matches("[env: SOAK_").count();
    assert!(envs >= 12, "{envs} env fallbacks:\n{help}");
}

#[test]
fn compare_and_lincheck_refuse_what_they_cannot_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nothing");
    let m = missing.display().to_string();
    let o = run(&["compare", &m, &m], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("summary.json"), "{}", stderr(&o));
    let bad = dir.path().join("history.jsonl");
    std::fs::write(&bad, "{\"id\":0}\n").expect("write");
    let o = run(&["lincheck", &bad.display().to_string()], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("history.jsonl:1: not an operation record"),
        "{}",
        stderr(&o)
    );
}
