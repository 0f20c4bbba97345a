use std::path::Path;

use super::*;

const SMOKE: &str = r#"
name: smoke
duration: 90s
cluster: {name: smoke, size: 3, version: "3.4.23", backup: {interval: 10s, maxBackups: 3}}
load: {writers: 4, readers: 2, rate: 200, keys: 1000, valueSize: 64}
chaos: {killInterval: 10s, target: random, fault: kill, seed: 1}
bounds: {recoveryP99: 5s, recoveryMax: 15s, availability: 0.95, maxBackupAge: 25s, lostWrites: 0}
"#;

fn problems(text: &str) -> Vec<String> {
    let s = parse(Path::new("t.yaml"), text).expect("parses");
    validate(&s).expect_err("should be rejected")
}

fn parse_error(text: &str) -> String {
    parse(Path::new("t.yaml"), text)
        .expect_err("should not parse")
        .to_string()
}

#[test]
fn the_design_example_parses_and_validates() {
    let s = parse(Path::new("t.yaml"), SMOKE).expect("parses");
    validate(&s).expect("valid");
    assert_eq!(s.duration.get(), Duration::from_secs(90));
    assert_eq!(s.cluster.members(), 3);
    assert_eq!(s.load.writers, 4);
    let c = s.chaos.as_ref().expect("chaos");
    assert_eq!(c.target, Target::Random);
    assert_eq!(c.kill_interval, Duration::from_secs(10));
    assert_eq!(s.bounds.max_backup_age, Some(Dur(Duration::from_secs(25))));
    assert_eq!(s.probe, Probe::default());
    assert!(s.operator_healing);
}

#[test]
fn unknown_fields_are_named_with_their_line() {
    let e = parse_error(&SMOKE.replace("valueSize: 64", "valueSize: 64, burst: 3"));
    assert!(e.starts_with("t.yaml: "), "{e}");
    assert!(e.contains("burst"), "{e}");
    assert!(e.contains("line 5"), "{e}");
    let e = parse_error(&format!("{SMOKE}extra: 1\n"));
    assert!(e.contains("extra"), "{e}");
}

#[test]
fn bad_values_name_the_field_and_what_is_allowed() {
    let e = parse_error(&SMOKE.replace("target: random", "target: everyone"));
    assert!(e.contains("everyone") && e.contains("leader"), "{e}");
    let e = parse_error(&SMOKE.replace("duration: 90s", "duration: 90"));
    assert!(e.contains("has no unit"), "{e}");
    let e = parse_error(&SMOKE.replace("duration: 90s", "duration: -5s"));
    assert!(e.contains("negative"), "{e}");
    let e = parse_error(&SMOKE.replace("duration: 90s", "duration: soon"));
    assert!(e.contains("not a duration"), "{e}");
}

#[test]
fn a_size_past_every_number_says_the_spec_range() {
    let e = parse_error(&SMOKE.replace("size: 3", "size: 99999999999999999999"));
    assert!(
        e.contains(
            "cluster.size: 99999999999999999999 is out of range: a whole number from 1 to 9"
        ),
        "{e}"
    );
    let e = parse_error(&format!(
        "{SMOKE}changes: [{{after: 10s, size: 99999999999999999999}}]\n"
    ));
    assert!(
        e.contains("changes[0].size") && e.contains("from 1 to 9"),
        "{e}"
    );
}

#[test]
fn impossible_bounds_are_rejected() {
    let p = problems(&SMOKE.replace("availability: 0.95", "availability: 1.5"));
    assert!(
        p.iter().any(|m| m.starts_with("bounds.availability:")),
        "{p:?}"
    );
    let p = problems(&SMOKE.replace("recoveryP99: 5s", "recoveryP99: 20s"));
    assert!(
        p.iter()
            .any(|m| m.starts_with("bounds.recoveryP99: must not exceed")),
        "{p:?}"
    );
    let p = problems(&SMOKE.replace("duration: 90s", "duration: 0s"));
    assert_eq!(
        p,
        ["duration: must be more than 0s"],
        "its own message only"
    );
    let p = problems(&SMOKE.replace("maxBackupAge: 25s", "maxBackupAge: 5s"));
    assert!(
        p.iter()
            .any(|m| m.starts_with("bounds.maxBackupAge: must be more than")),
        "{p:?}"
    );
}

#[test]
fn min_faults_above_what_the_run_can_inject_is_rejected() {
    // 90 s, a tick every 10 s from 5 s on: ticks at 15 s, 25 s, ... 85 s.
    let base = SMOKE.replace("seed: 1}", "seed: 1, startAfter: 5s}");
    let with = |extra: &str| base.replace("lostWrites: 0", &format!("lostWrites: 0, {extra}"));
    let ok = parse(Path::new("t.yaml"), &with("minFaults: 8")).expect("parses");
    validate(&ok).expect("8 faults fit");
    let p = problems(&with("minFaults: 9"));
    assert!(
        p.iter()
            .any(|m| m.starts_with("bounds.minFaults: must be at most 8,")
                && m.contains("chaos.startAfter (5s)")
                && m.ends_with("got 9")),
        "{p:?}"
    );
    // A tick due when the run ends does not happen: 30 s every 10 s is 2.
    let short = with("minFaults: 3").replace("duration: 90s", "duration: 30s");
    let p = problems(&short.replace(", startAfter: 5s", ""));
    assert!(
        p.iter()
            .any(|m| m.starts_with("bounds.minFaults: must be at most 2,")),
        "{p:?}"
    );
    // maxFaults caps it; a majority tick may count once per member hit.
    let p = problems(&with("minFaults: 3").replace("seed: 1,", "seed: 1, maxFaults: 2,"));
    assert!(
        p.iter()
            .any(|m| m.starts_with("bounds.minFaults: must be at most 2,")
                && m.contains("chaos.maxFaults (2)")),
        "{p:?}"
    );
    let majority =
        with("minFaults: 16").replace("target: random", "target: majority, allowQuorumLoss: true");
    let s = parse(Path::new("t.yaml"), &majority).expect("parses");
    validate(&s).expect("8 ticks of 2 members");
}

#[test]
fn the_probe_interval_is_100_to_250ms() {
    for (interval, ok) in [
        ("99ms", false),
        ("100ms", true),
        ("250ms", true),
        ("251ms", false),
        ("1s", false),
    ] {
        let text = format!("{SMOKE}probe: {{interval: {interval}}}\n");
        let s = parse(Path::new("t.yaml"), &text).expect("parses");
        match validate(&s) {
            Ok(()) => assert!(ok, "{interval} accepted"),
            Err(p) => {
                assert!(!ok, "{interval} rejected: {p:?}");
                assert!(
                    p.iter().any(|m| m
                        .starts_with("probe.interval: must be between 100ms and 250ms")
                        && m.ends_with(&format!("got {interval}"))),
                    "{p:?}"
                );
            }
        }
    }
}

#[test]
fn a_backup_bound_needs_backups() {
    let text = SMOKE.replace(", backup: {interval: 10s, maxBackups: 3}", "");
    let p = problems(&text);
    assert!(
        p.iter()
            .any(|m| m.starts_with("bounds.maxBackupAge: needs cluster.backup")),
        "{p:?}"
    );
}

#[test]
fn a_store_keeps_the_clusters_backups_and_sets_their_place() {
    let with_store = format!("{SMOKE}store: s3\n");
    let s = parse(Path::new("t.yaml"), &with_store).expect("parses");
    validate(&s).expect("valid");
    assert_eq!(s.store, Some(StoreServer::S3));
    let none = with_store.replace(", backup: {interval: 10s, maxBackups: 3}", "");
    let p = problems(&none);
    assert!(
        p.iter()
            .any(|m| m.starts_with("store: keeps the cluster's backups")),
        "{p:?}"
    );
    let placed = with_store.replace("maxBackups: 3}", "maxBackups: 3, location: {path: /b}}");
    let p = problems(&placed);
    assert!(
        p.iter().any(|m| m.contains("drop cluster.backup.location")),
        "{p:?}"
    );
    let paused = with_store.replace(
        "chaos: {killInterval: 10s, target: random, fault: kill, seed: 1}",
        "chaos: {killInterval: 10s, target: store, fault: pause, pauseFor: 5s, seed: 1}",
    );
    let s = parse(Path::new("t.yaml"), &paused).expect("parses");
    validate(&s).expect("a store paused");
    let p = problems(&paused.replace("store: s3\n", ""));
    assert!(p.iter().any(|m| m.contains("set store: s3")), "{p:?}");
    let p = problems(&paused.replace("fault: pause, pauseFor: 5s", "fault: kill"));
    assert!(
        p.iter()
            .any(|m| m.contains("target store takes fault: pause")),
        "{p:?}"
    );
    let e = parse_error(&format!("{SMOKE}store: gcs\n"));
    assert!(e.contains("store") && e.contains("s3"), "{e}");
}

#[test]
fn cluster_fields_use_the_operators_checks() {
    let p = problems(&SMOKE.replace("size: 3", "size: 12"));
    assert!(
        p.iter()
            .any(|m| m.starts_with("cluster.size: must be between 1 and 9")),
        "{p:?}"
    );
    let p = problems(&SMOKE.replace("name: smoke, size", "name: Smoke_1, size"));
    assert!(p.iter().any(|m| m.starts_with("cluster.name:")), "{p:?}");
    let p = problems(&SMOKE.replace("version: \"3.4.23\"", "version: \"three\""));
    assert!(p.iter().any(|m| m.starts_with("cluster.version:")), "{p:?}");
    let p = problems(&SMOKE.replace("size: 3,", "size: 3, paused: true,"));
    assert!(
        p.iter().any(|m| m.contains("operatorHealing: false")),
        "{p:?}"
    );
}

#[test]
fn chaos_options_are_checked() {
    let p = problems(&SMOKE.replace("target: random", "target: majority"));
    assert!(p.iter().any(|m| m.contains("allowQuorumLoss")), "{p:?}");
    // A value the monkey's flag would refuse is refused by the same
    // parser as the file is read, naming the field and its line.
    let e = parse_error(&SMOKE.replace("seed: 1", "seed: 1, probability: 2"));
    assert!(
        e.contains("line 6") && e.contains("chaos.probability: expected a probability from 0 to 1"),
        "{e}"
    );
    let p = problems(&SMOKE.replace("seed: 1", "seed: 1, maxKill: 4"));
    assert!(p.iter().any(|m| m.starts_with("chaos.maxKill:")), "{p:?}");
    let p = problems(&SMOKE.replace("seed: 1", "seed: 1, pauseFor: 5s"));
    assert!(p.iter().any(|m| m.starts_with("chaos.pauseFor:")), "{p:?}");
    // Every option of another fault, each named as its field.
    let p = problems(&SMOKE.replace(
        "seed: 1",
        "seed: 1, latencyJitter: 5ms, fillMax: 8MiB, diskIops: 5",
    ));
    for want in [
        "chaos.latencyJitter: applies only with fault: delay",
        "chaos.fillMax: applies only with fault: disk-full",
        "chaos.diskIops: applies only with fault: slow-disk",
    ] {
        assert!(p.iter().any(|m| m == want), "{want}: {p:?}");
    }
}

#[test]
fn changes_are_checked_in_order_against_the_operators_rules() {
    let ok = format!(
        "{SMOKE}changes:\n  - {{after: 30s, size: 5}}\n  - {{after: 60s, version: \"3.5.1\"}}\n"
    );
    let s = parse(Path::new("t.yaml"), &ok).expect("parses");
    validate(&s).expect("valid");
    assert_eq!(s.cluster.changed(&s.changes[0]).spec.size, 5);
    let p = problems(&format!(
        "{SMOKE}changes:\n  - {{after: 100s, size: 12}}\n  - {{after: 10s}}\n"
    ));
    assert!(
        p.iter()
            .any(|m| m.starts_with("changes[0].after: must be after 0s and before")),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|m| m.starts_with("changes[0].size: must be between 1 and 9")),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|m| m.starts_with("changes[1].after: changes must be in time order")),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|m| m.starts_with("changes[1]: needs size or version")),
        "{p:?}"
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let text = SMOKE
        .replace("availability: 0.95", "availability: 0")
        .replace("recoveryMax: 15s", "recoveryMax: 0s");
    let p = problems(&text);
    assert!(p.len() >= 3, "{p:?}");
}

#[test]
fn the_manifest_round_trips_through_the_operators_parser() {
    let s = parse(Path::new("t.yaml"), SMOKE).expect("parses");
    let m = s.cluster.manifest(false);
    let back = etcd_operator::manifest::parse(&m).expect("operator reads it");
    assert_eq!(back[0].spec, s.cluster.spec);
    let paused = etcd_operator::manifest::parse(&s.cluster.manifest(true)).expect("reads");
    assert!(paused[0].spec.paused);
}

#[test]
fn the_shipped_scenarios_are_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("scenarios folder") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let s = load(&path).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                path.file_stem().and_then(|f| f.to_str()),
                Some(s.name.as_str()),
                "a scenario's file is named after it"
            );
            n += 1;
        }
    }
    assert!(n >= 6, "found {n} scenarios in {}", dir.display());
}

/// The operator's strictness and messages: a quoted number is refused with
/// its field, and a type error names its field.
#[test]
fn types_are_as_strict_as_the_operators() {
    let e = parse_error(&SMOKE.replace("size: 3", "size: \"3\""));
    assert!(e.contains("cluster.size: must be a number"), "{e}");
    let e = parse_error(&SMOKE.replace("size: 3", "size: 0x3"));
    assert!(
        e.contains("cluster.size: write the number in decimal"),
        "{e}"
    );
    let e = parse_error(&SMOKE.replace("writers: 4", "writers: -1"));
    assert!(e.contains("load.writers"), "{e}");
    assert!(!e.contains("invalid u32"), "{e}");
    let e = parse_error(&SMOKE.replace("seed: 1}", "seed: 1, dryRun: \"yes\"}"));
    assert!(e.contains("chaos.dryRun: must be true or false"), "{e}");
}

#[test]
fn max_loss_window_needs_data_loss_since_backup() {
    let since = SMOKE.replace(
        "lostWrites: 0",
        "lostWrites: 0, dataLoss: sinceBackup, maxLossWindow: 2s",
    );
    let s = parse(Path::new("t.yaml"), &since).expect("parses");
    validate(&s).expect("valid");
    assert_eq!(s.bounds.max_loss_window, Some(Dur(Duration::from_secs(2))));
    let p = problems(&SMOKE.replace("lostWrites: 0", "lostWrites: 0, maxLossWindow: 2s"));
    assert!(
        p.iter()
            .any(|e| e.contains("bounds.maxLossWindow") && e.contains("dataLoss: sinceBackup")),
        "{p:?}"
    );
}

#[test]
fn hash_divergence_max_needs_the_corrupt_fault_and_a_length() {
    let corrupt = SMOKE
        .replace("fault: kill", "fault: corrupt, corrupt: db")
        .replace("lostWrites: 0", "lostWrites: 0, hashDivergenceMax: 20s");
    let s = parse(Path::new("t.yaml"), &corrupt).expect("parses");
    validate(&s).expect("valid");
    assert_eq!(
        s.bounds.hash_divergence_max,
        Some(Dur(Duration::from_secs(20)))
    );
    let p = problems(&SMOKE.replace("lostWrites: 0", "lostWrites: 0, hashDivergenceMax: 20s"));
    assert!(
        p.iter()
            .any(|e| e.contains("bounds.hashDivergenceMax") && e.contains("fault: corrupt")),
        "{p:?}"
    );
    let p = problems(&corrupt.replace("hashDivergenceMax: 20s", "hashDivergenceMax: 0s"));
    assert!(
        p.iter()
            .any(|e| e.contains("bounds.hashDivergenceMax") && e.contains("more than 0s")),
        "{p:?}"
    );
}

#[test]
fn restore_checks_need_the_operators_checks_and_a_reachable_min() {
    let with = |check: &str, bound: &str| {
        SMOKE
            .replace(
                "backup: {interval: 10s, maxBackups: 3}",
                &format!("backup: {{interval: 10s, maxBackups: 3{check}}}"),
            )
            .replace("lostWrites: 0", &format!("lostWrites: 0{bound}"))
    };
    // 90 s with a check every 20 s: at most 5 checks (one more than 90/20);
    // backups every 10 s would each be checked at once: at most 10.
    let ok = with(
        ", restoreCheck: {interval: 20s}",
        ", restoreChecks: {min: 10}",
    );
    let s = parse(Path::new("t.yaml"), &ok).expect("parses");
    validate(&s).expect("valid");
    assert_eq!(s.bounds.restore_checks, Some(RestoreChecks { min: 10 }));
    let spec = s.cluster.spec.clone();
    assert_eq!(
        spec.backup
            .and_then(|b| b.restore_check)
            .map(|c| c.interval),
        Some("20s".to_string()),
        "passed through to the EtcdCluster spec"
    );

    let p = problems(&with("", ", restoreChecks: {min: 3}"));
    assert!(
        p.iter().any(
            |e| e.starts_with("bounds.restoreChecks: needs cluster.backup.restoreCheck")
                && e.contains("interval")
        ),
        "{p:?}"
    );
    let p = problems(&with(
        ", restoreCheck: {interval: 20s}",
        ", restoreChecks: {min: 0}",
    ));
    assert!(
        p.iter()
            .any(|e| e.starts_with("bounds.restoreChecks.min: must be at least 1")),
        "{p:?}"
    );
    let p = problems(&with(
        ", restoreCheck: {interval: 20s}",
        ", restoreChecks: {min: 11}",
    ));
    assert!(
        p.iter().any(
            |e| e.starts_with("bounds.restoreChecks.min: must be at most 10")
                && e.contains("cluster.backup.restoreCheck.interval (20s)")
                && e.contains("got 11")
        ),
        "{p:?}"
    );
    // Checks more often than backups: one per check interval, 90/5 + 1.
    let p = problems(&with(
        ", restoreCheck: {interval: 5s}",
        ", restoreChecks: {min: 20}",
    ));
    assert!(
        p.iter()
            .any(|e| e.starts_with("bounds.restoreChecks.min: must be at most 19")),
        "{p:?}"
    );
    // A bad interval is the operator's problem to name, once.
    let p = problems(&with(
        ", restoreCheck: {interval: soon}",
        ", restoreChecks: {min: 1}",
    ));
    assert!(
        p.iter().any(|e| e.contains("restoreCheck.interval")),
        "{p:?}"
    );
    assert!(
        !p.iter().any(|e| e.starts_with("bounds.restoreChecks")),
        "{p:?}"
    );
    let e = parse_error(&with(
        ", restoreCheck: {interval: 20s}",
        ", restoreChecks: {min: 1, max: 2}",
    ));
    assert!(e.contains("max"), "{e}");
}

#[test]
fn a_shortened_runs_fault_floor_rounds_up_and_never_to_zero() {
    assert_eq!(
        super::scaled_floor(3, 5.0 / 60.0),
        1,
        "3 of an hour in 5 minutes"
    );
    assert_eq!(super::scaled_floor(100, 5.0 / 60.0), 9);
    assert_eq!(super::scaled_floor(0, 0.5), 0, "no floor stays none");
    assert_eq!(super::scaled_floor(7, 1.0), 7);
}
