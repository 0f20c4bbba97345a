use clap::Parser;

use super::*;

fn parse(args: &[&str]) -> Result<Config, Error> {
    let mut all = vec!["chaos-monkey", "--state-dir", "/"];
    all.extend_from_slice(args);
    Config::from_args(Args::try_parse_from(all).expect("flags parse"))
}

#[test]
fn majority_needs_consent() {
    assert_eq!(parse(&["--target", "majority"]), Err(Error::QuorumLoss));
    let c = parse(&["--target", "majority", "--allow-quorum-loss"]).expect("allowed");
    assert_eq!(c.target, Target::Majority);
}

#[test]
fn platform_and_fault_combinations() {
    assert_eq!(
        parse(&["--platform", "kube", "--fault", "pause"]),
        Err(Error::PauseOnKube)
    );
    assert_eq!(
        parse(&["--target", "operator", "--fault", "destroy"]),
        Err(Error::DestroyOperator)
    );
    assert!(parse(&["--target", "operator", "--fault", "pause"]).is_ok());
}

#[test]
fn cluster_names_are_checked_sorted_and_deduplicated() {
    assert!(matches!(
        parse(&["--cluster", "../etc"]),
        Err(Error::BadClusterName(_))
    ));
    let c = parse(&["--cluster", "b", "--cluster", "a", "--cluster", "b"]).expect("ok");
    assert_eq!(c.clusters, ["a", "b"]);
}

#[test]
fn options_of_other_faults_are_refused_naming_the_flag() {
    let e = parse(&["--fault", "kill", "--fault-for", "5s"]).expect_err("refused");
    assert!(
        e.to_string()
            .starts_with("--fault-for applies to --fault partition"),
        "{e}"
    );
    let e = parse(&["--fault", "partition", "--latency", "5ms"]).expect_err("refused");
    assert_eq!(
        e,
        Error::OptionForOtherFault("--latency", "delay", "partition")
    );
    assert!(parse(&["--fault", "delay", "--loss", "5%"]).is_err());
    assert!(parse(&["--fault", "loss", "--corrupt", "wal"]).is_err());
    assert!(parse(&["--fault", "corrupt", "--fill-max", "64MiB"]).is_err());
    assert!(parse(&["--fault", "kill", "--split", "minority"]).is_err());
    assert_eq!(
        parse(&[
            "--fault",
            "partition",
            "--split",
            "minority",
            "--target",
            "minority"
        ]),
        Err(Error::SplitTarget("minority"))
    );
    let c = parse(&[
        "--fault",
        "delay",
        "--latency",
        "300ms",
        "--latency-jitter",
        "20ms",
        "--fault-for",
        "3s",
    ])
    .expect("ok");
    assert_eq!(c.faults.latency, Duration::from_millis(300));
    assert_eq!(c.faults.latency_jitter, Duration::from_millis(20));
    assert_eq!(c.faults.fault_for, Duration::from_secs(3));
    let c = parse(&[
        "--fault",
        "partition",
        "--split",
        "majority",
        "--target",
        "leader",
    ])
    .expect("ok");
    assert_eq!(c.faults.split, Some(crate::cli::Split::Majority));
    assert_eq!(
        parse(&["--fault", "loss"]).expect("ok").faults.loss_percent,
        30.0
    );
}

#[test]
fn a_store_is_paused_at_a_loopback_address_only() {
    let store = ["--target", "store", "--fault", "pause"];
    assert!(matches!(parse(&store), Err(Error::Store(m)) if m.contains("missing")));
    let at = |addr: &str, fault: &str| {
        parse(&["--target", "store", "--fault", fault, "--store-addr", addr])
    };
    let c = at("127.0.0.1:9000", "pause").expect("a store at loopback");
    assert_eq!(
        c.store_addr,
        Some("127.0.0.1:9000".parse().expect("an address"))
    );
    assert!(
        c.describe().contains("the object store"),
        "{}",
        c.describe()
    );
    assert!(matches!(at("10.0.0.1:9000", "pause"), Err(Error::Store(m)) if m.contains("loopback")));
    assert!(matches!(at("127.0.0.1:9000", "kill"), Err(Error::Store(m)) if m.contains("pause")));
    let stray = parse(&["--store-addr", "127.0.0.1:9000"]);
    assert!(matches!(stray, Err(Error::Store(m)) if m.contains("--target store only")));
    let stray = parse(&["--store-wildcard"]);
    assert!(matches!(stray, Err(Error::Store(m)) if m.contains("--store-wildcard is for")));
    let at = c.store_at().expect("a store");
    assert!(!at.wildcard, "only an exact listener unless asked");
    let c = parse(&[
        "--target",
        "store",
        "--fault",
        "pause",
        "--store-addr",
        "127.0.0.1:9000",
        "--store-wildcard",
    ])
    .expect("a store that may listen on every address");
    assert!(c.store_at().is_some_and(|a| a.wildcard));
}

#[test]
fn clock_skew_kube_and_operator_refusals() {
    let c = parse(&[
        "--fault",
        "clock-skew",
        "--skew",
        "-45s",
        "--fault-for",
        "3s",
    ])
    .expect("local clock-skew is taken");
    assert_eq!(c.faults.skew.nanos(), -45_000_000_000);
    assert_eq!(c.faults.fault_for, Duration::from_secs(3));
    assert_eq!(
        parse(&["--fault", "clock-skew"])
            .expect("ok")
            .faults
            .skew
            .nanos(),
        30_000_000_000
    );
    assert_eq!(
        parse(&["--fault", "slow-disk", "--disk-iops", "5"])
            .expect("ok")
            .faults
            .disk_iops,
        5
    );
    assert_eq!(
        parse(&["--fault", "kill", "--skew", "5s"]),
        Err(Error::OptionForOtherFault("--skew", "clock-skew", "kill"))
    );
    assert_eq!(
        parse(&["--fault", "clock-skew", "--disk-iops", "5"]),
        Err(Error::OptionForOtherFault(
            "--disk-iops",
            "slow-disk",
            "clock-skew"
        ))
    );
    let e = parse(&["--platform", "kube", "--fault", "clock-skew"]).expect_err("refused");
    assert!(e.to_string().contains("vDSO"), "{e}");
    for f in [
        "slow-disk",
        "delay",
        "loss",
        "blackhole-until-snapshot",
        "corrupt",
        "disk-full",
    ] {
        let e = parse(&["--platform", "kube", "--fault", f]).expect_err("refused");
        assert!(e.to_string().contains("not supported on kube"), "{f}: {e}");
    }
    assert!(parse(&["--platform", "kube", "--fault", "partition"]).is_ok());
    assert_eq!(
        parse(&["--target", "operator", "--fault", "partition"]),
        Err(Error::MemberFaultOnOperator("partition"))
    );
}

#[test]
fn pause_for_needs_the_pause_fault() {
    assert_eq!(
        parse(&["--pause-for", "2s"]),
        Err(Error::OptionForOtherFault("--pause-for", "pause", "kill"))
    );
    let c = parse(&["--fault", "pause", "--pause-for", "2s"]).expect("ok");
    assert_eq!(c.pause_for, Duration::from_secs(2));
    let c = parse(&["--fault", "pause"]).expect("ok");
    assert_eq!(c.pause_for, DEFAULT_PAUSE_FOR);
}

#[test]
fn a_missing_state_folder_says_so() {
    let e = Config::from_args(
        Args::try_parse_from(["chaos-monkey", "--state-dir", "/nonexistent/state"])
            .expect("flags parse"),
    )
    .expect_err("missing");
    assert!(e.to_string().contains("no such folder"), "{e}");
    let kube = Args::try_parse_from([
        "chaos-monkey",
        "--platform",
        "kube",
        "--state-dir",
        "/nonexistent/state",
    ])
    .expect("flags parse");
    assert!(Config::from_args(kube).is_ok(), "kube does not use it");
}

#[test]
fn seed_and_caps() {
    let c = parse(&["--seed", "42", "--max-kill", "2"]).expect("ok");
    assert_eq!((c.seed, c.max_kill), (42, 2));
    assert_eq!(parse(&[]).expect("ok").max_kill, usize::MAX);
}

#[test]
fn start_after_must_leave_the_run_a_first_interval() {
    let e = parse(&["--start-after", "5m", "--duration", "5m"]).expect_err("refused");
    assert_eq!(e, Error::StartAfterDuration("5m".into(), "5m".into()));
    assert!(
        e.to_string()
            .contains("--start-after 5m is not shorter than --duration 5m")
    );
    let c = parse(&["--start-after", "1m", "--duration", "5m"]).expect("fits");
    assert_eq!(c.start_after, Duration::from_secs(60));
    assert!(
        c.describe().contains("after the first 1m"),
        "{}",
        c.describe()
    );
    // Without --duration the run lasts until stopped.
    assert!(parse(&["--start-after", "1h"]).is_ok());
}
