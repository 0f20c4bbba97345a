use super::*;
use crate::select::Target;
use clap::CommandFactory;

#[test]
fn the_command_is_well_formed() {
    Args::command().debug_assert();
}

#[test]
fn every_flag_has_help_and_an_env_fallback() {
    let cmd = Args::command();
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if id == "help" || id == "version" {
            continue;
        }
        assert!(arg.get_help().is_some(), "--{id} has no help");
        let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
        assert!(
            env.as_deref()
                .is_some_and(|e| e.starts_with("CHAOS_MONKEY_")),
            "--{id} has no CHAOS_MONKEY_* fallback: {env:?}"
        );
    }
}

#[test]
fn durations() {
    assert_eq!(positive_duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(positive_duration("1m"), Ok(Duration::from_secs(60)));
    assert!(positive_duration("0s").is_err());
    assert!(positive_duration("-5s").is_err());
    assert!(positive_duration("soon").is_err());
    assert_eq!(duration("0s"), Ok(Duration::ZERO));
    let e = duration("-1s").expect_err("negative");
    assert!(e.contains("must not be negative"), "{e}");
    assert_eq!(seed("7"), Ok(7));
    assert!(seed("-1").is_err_and(|e| e.contains("from 0 to 18446744073709551615")));
}

#[test]
fn probabilities_and_counts() {
    assert_eq!(probability("0"), Ok(0.0));
    assert_eq!(probability("1"), Ok(1.0));
    assert!(probability("1.5").is_err());
    assert!(probability("-0.1").is_err());
    assert!(probability("NaN").is_err());
    assert_eq!(at_least_one("3"), Ok(3));
    assert!(at_least_one("0").is_err());
    assert!(at_least_one("-1").is_err());
}

#[test]
fn percentages_and_sizes() {
    assert_eq!(percent("30%"), Ok(30.0));
    assert_eq!(percent(" 2.5 "), Ok(2.5));
    assert_eq!(percent("100%"), Ok(100.0));
    for bad in ["0", "0%", "-5%", "101%", "NaN", "lots", "%"] {
        assert!(percent(bad).is_err(), "{bad}");
    }
    assert_eq!(size("64MiB"), Ok(64 << 20));
    assert_eq!(size("4GiB"), Ok(4 << 30));
    assert_eq!(size("500MB"), Ok(500_000_000));
    assert_eq!(size("1048576"), Ok(1 << 20));
    for bad in [
        "",
        "1KiB",
        "-1GiB",
        "5TB",
        "GiB",
        "99999999999999GiB",
        "1.5GiB",
    ] {
        assert!(size(bad).is_err(), "{bad}");
    }
}

#[test]
fn fault_names_match_the_fault_log_and_the_flags() {
    for f in FaultKind::value_variants() {
        let flag = f.to_possible_value().expect("value");
        assert_eq!(flag.get_name(), f.as_str());
        let yaml = serde_json::to_string(f).expect("json");
        assert_eq!(yaml, format!("\"{}\"", f.as_str()));
    }
    let a = Args::try_parse_from(["chaos-monkey", "--fault", "blackhole-until-snapshot"])
        .expect("parses");
    assert_eq!(a.chaos.fault, FaultKind::BlackholeUntilSnapshot);
}

#[test]
fn defaults_and_repeats() {
    let a =
        Args::try_parse_from(["chaos-monkey", "--cluster", "a", "--cluster", "b"]).expect("parses");
    assert_eq!(a.clusters, ["a", "b"]);
    assert_eq!(a.chaos.kill_interval, Duration::from_secs(30));
    assert_eq!(a.chaos.target, Target::Random);
    assert_eq!(a.chaos.fault, FaultKind::Kill);
    assert!(!a.chaos.dry_run);
    assert!(a.ignored().is_empty());
    let k = Args::try_parse_from(["chaos-monkey", "--namespace", "x"]).expect("parses");
    assert_eq!(k.ignored(), ["--namespace"]);
    let e = Args::try_parse_from(["chaos-monkey", "--kill-interval", "-5s"])
        .expect_err("negative interval");
    assert!(e.to_string().contains("--kill-interval"), "{e}");
}

#[test]
fn help_ends_with_examples_and_the_definition_is_sound() {
    use clap::CommandFactory;
    Args::command().debug_assert();
    let missing = etcd_operator::cli::docs::missing_examples(&Args::command());
    assert!(missing.is_empty(), "--help does not end with an example");
}

#[test]
fn durations_past_a_year_are_refused_naming_the_flag() {
    let e = Args::try_parse_from(["chaos-monkey", "--kill-interval", "100y"]).expect_err("refused");
    assert!(
        e.to_string().contains("--kill-interval") && e.to_string().contains("a year"),
        "{e}"
    );
    assert!(Args::try_parse_from(["chaos-monkey", "--kill-interval", "365d"]).is_ok());
}

#[test]
fn bash_completes_flags_and_their_values() {
    let got = |words: &[&str]| {
        etcd_operator::cli::docs::bash_complete(Args::command(), words)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    assert_eq!(got(&["chaos-monkey", "--plat"]), ["--platform"]);
    assert_eq!(got(&["chaos-monkey", "--platform", ""]), ["local", "kube"]);
}
