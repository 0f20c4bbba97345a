//! The `standby` section: parsed strictly, and each impossible or
//! unsupported combination refused naming its field and the fix.

use std::path::Path;
use std::time::Duration;

use crate::scenario::{Dur, parse, validate};

const PRIMARY: &str = r#"
name: sb
duration: 60s
cluster: {name: sb, size: 3, version: "3.4.23", backup: {interval: 1m, maxBackups: 2, continuous: {segmentInterval: 1s}}}
chaos: {killInterval: 30s, target: random, fault: kill, seed: 1}
bounds: {recoveryP99: 5s, recoveryMax: 15s, availability: 0.9, minFaults: 1}
"#;

fn with(standby: &str) -> String {
    format!("{PRIMARY}standby: {standby}\n")
}

fn problems(text: &str) -> Vec<String> {
    let s = parse(Path::new("t.yaml"), text).expect("parses");
    validate(&s).expect_err("should be rejected")
}

fn has(p: &[String], prefix: &str) -> bool {
    p.iter().any(|m| m.starts_with(prefix))
}

#[test]
fn a_standby_parses_with_its_defaults() {
    let s = parse(Path::new("t.yaml"), &with("{maxLag: 10s}")).expect("parses");
    validate(&s).expect("valid");
    let sb = s.standby.as_ref().expect("standby");
    assert_eq!((sb.size, sb.stream), (1, false));
    assert_eq!(sb.max_lag, Dur(Duration::from_secs(10)));
    assert_eq!(sb.catch_up, Dur(Duration::from_secs(60)));
    assert!(sb.chaos_on(true) && !sb.chaos_on(false));
    assert_eq!(super::Standby::name("sb"), "sb-standby");
    let s = parse(
        Path::new("t.yaml"),
        &with("{size: 3, stream: true, maxLag: 2s, catchUp: 30s, chaos: false}"),
    )
    .expect("parses");
    validate(&s).expect("valid");
    let sb = s.standby.as_ref().expect("standby");
    assert!(sb.stream && !sb.chaos_on(true));
    assert_eq!(sb.members(), 3);
}

#[test]
fn unknown_fields_and_wrong_types_are_refused_by_name() {
    let parse_error = |text: &str| {
        parse(Path::new("t.yaml"), text)
            .expect_err("should not parse")
            .to_string()
    };
    let e = parse_error(&with("{maxLag: 10s, lagMax: 3s}"));
    assert!(e.contains("lagMax") && e.contains("line 7"), "{e}");
    let e = parse_error(&with("{stream: true}"));
    assert!(e.contains("maxLag"), "{e}");
    let e = parse_error(&with("{maxLag: 10s, size: \"1\"}"));
    assert!(e.contains("standby.size"), "{e}");
    let e = parse_error(&with("{maxLag: 10s, stream: \"yes\"}"));
    assert!(e.contains("standby.stream"), "{e}");
    let e = parse_error(&with("{maxLag: 10}"));
    assert!(e.contains("has no unit"), "{e}");
}

#[test]
fn impossible_values_name_the_field_and_the_fix() {
    let p = problems(&with("{maxLag: 0s, catchUp: 0s, size: 10}"));
    assert!(has(&p, "standby.maxLag: must be more than 0s"), "{p:?}");
    assert!(has(&p, "standby.catchUp: must be more than 0s"), "{p:?}");
    assert!(has(&p, "standby.size: must be between 1 and 9"), "{p:?}");
    let p = problems(&with("{maxLag: 200h}"));
    assert!(has(&p, "standby.maxLag: must be at most 168h"), "{p:?}");
    let p = problems(&with("{maxLag: 1s, size: 0}"));
    assert!(has(&p, "standby.size"), "{p:?}");
}

#[test]
fn a_standby_needs_continuous_backups_and_a_history_that_never_goes_back() {
    let no_chain = with("{maxLag: 10s}").replace(", continuous: {segmentInterval: 1s}", "");
    let p = problems(&no_chain);
    assert!(
        has(
            &p,
            "standby: follows the cluster's continuous backups: set cluster.backup.continuous"
        ),
        "{p:?}"
    );
    let p = problems(&no_chain.replace(", backup: {interval: 1m, maxBackups: 2}", ""));
    assert!(has(&p, "standby: "), "{p:?}");
    let since =
        with("{maxLag: 10s}").replace("minFaults: 1}", "minFaults: 1, dataLoss: sinceBackup}");
    assert!(has(&problems(&since), "bounds.dataLoss: "), "{since}");
    let paused = format!("{}operatorHealing: false\n", with("{maxLag: 10s}"));
    assert!(has(&problems(&paused), "operatorHealing: "));
    let tls = with("{maxLag: 10s, stream: true}").replace(
        "segmentInterval: 1s}}",
        "segmentInterval: 1s}}, tls: {client: {mode: Auto}}",
    );
    assert!(has(&problems(&tls), "standby.stream: "), "{tls}");
    let s = parse(
        Path::new("t.yaml"),
        &tls.replace("stream: true", "stream: false"),
    )
    .expect("parses");
    validate(&s).expect("a TLS primary followed from the store");
    // 35 characters are a good cluster name; with -standby, 43 are not.
    let long =
        with("{maxLag: 10s}").replace("name: sb, size", &format!("name: {}, size", "a".repeat(35)));
    let mut s = parse(Path::new("t.yaml"), &long).expect("parses");
    let p = validate(&s).expect_err("the standby's name is too long");
    assert!(has(&p, "cluster.name: the standby is named"), "{p:?}");
    s.standby = None;
    validate(&s).expect("the cluster's own name is fine");
}

#[test]
fn the_standby_monkey_kills_random_members_or_leaders_only() {
    let pause = with("{maxLag: 10s}").replace("fault: kill", "fault: pause, pauseFor: 2s");
    let p = problems(&pause);
    assert!(
        has(&p, "chaos.fault: pause cannot hit the standby"),
        "{p:?}"
    );
    let s = parse(
        Path::new("t.yaml"),
        &pause.replace("{maxLag: 10s}", "{maxLag: 10s, chaos: false}"),
    )
    .expect("parses");
    validate(&s).expect("the standby left alone");
    let p = problems(&with("{maxLag: 10s}").replace("target: random", "target: follower"));
    assert!(
        has(&p, "chaos.target: follower cannot aim at the standby"),
        "{p:?}"
    );
    let s = parse(
        Path::new("t.yaml"),
        &with("{maxLag: 10s}").replace("target: random", "target: leader"),
    )
    .expect("parses");
    validate(&s).expect("leader");
    let p = problems(&with("{maxLag: 10s}").replace("seed: 1}", "seed: 1, maxKill: 2}"));
    assert!(
        has(&p, "chaos.maxKill: must be at most standby.size (1)"),
        "{p:?}"
    );
    let no_chaos = with("{maxLag: 10s, chaos: true}")
        .replace(
            "chaos: {killInterval: 30s, target: random, fault: kill, seed: 1}\n",
            "",
        )
        .replace("minFaults: 1", "minFaults: 0");
    let p = problems(&no_chaos);
    assert!(
        has(&p, "standby.chaos: true needs a chaos section"),
        "{p:?}"
    );
    let s = parse(Path::new("t.yaml"), &no_chaos.replace(", chaos: true", "")).expect("parses");
    validate(&s).expect("a standby without chaos");
}

/// A standby streaming live, the primary lost at `at`, the promotion
/// bounded by `bound`.
fn losing(at: &str, bound: &str) -> String {
    with(&format!(
        "{{maxLag: 10s, stream: true, losePrimaryAt: {at}}}"
    ))
    .replace(
        "minFaults: 1}",
        &format!("minFaults: 1, lostOnPromotion: {bound}}}"),
    )
}

#[test]
fn the_primary_is_lost_inside_the_run_with_a_bound_on_what_the_promotion_loses() {
    let s = parse(Path::new("t.yaml"), &losing("30s", "0")).expect("parses");
    validate(&s).expect("valid");
    let sb = s.standby.as_ref().expect("standby");
    assert_eq!(sb.lose_primary_at, Some(Dur(Duration::from_secs(30))));
    assert_eq!(
        s.bounds.lost_on_promotion,
        Some(super::LostOnPromotion::Writes(0))
    );
    let s = parse(Path::new("t.yaml"), &losing("30s", "lastSegment")).expect("parses");
    validate(&s).expect("valid");
    assert_eq!(
        s.bounds.lost_on_promotion,
        Some(super::LostOnPromotion::LastSegment)
    );
    assert_eq!(
        super::LostOnPromotion::LastSegment.to_string(),
        "lastSegment"
    );

    let p = problems(&losing("0s", "0"));
    assert!(
        has(&p, "standby.losePrimaryAt: must be more than 0s"),
        "{p:?}"
    );
    let p = problems(&losing("60s", "0"));
    assert!(
        has(
            &p,
            "standby.losePrimaryAt: must be before the end of the run (duration 1m)"
        ),
        "{p:?}"
    );
    let unbounded = losing("30s", "0").replace(", lostOnPromotion: 0", "");
    let p = problems(&unbounded);
    assert!(
        has(
            &p,
            "bounds.lostOnPromotion: must be set when standby.losePrimaryAt is"
        ),
        "{p:?}"
    );
    let not_lost = losing("30s", "0").replace(", losePrimaryAt: 30s", "");
    let p = problems(&not_lost);
    assert!(
        has(
            &p,
            "bounds.lostOnPromotion: applies only when the primary is lost"
        ),
        "{p:?}"
    );
    let changed = format!("{}changes: [{{after: 40s, size: 5}}]\n", losing("30s", "0"));
    let p = problems(&changed);
    assert!(
        has(&p, "changes: a change after 40s comes at or after"),
        "{p:?}"
    );
    let p = problems(&losing("200h", "0"));
    assert!(
        has(&p, "standby.losePrimaryAt: must be at most 168h"),
        "{p:?}"
    );
}

#[test]
fn a_bound_on_the_promotion_is_a_bare_number_or_last_segment() {
    let parse_error = |text: &str| {
        parse(Path::new("t.yaml"), text)
            .expect_err("should not parse")
            .to_string()
    };
    for bad in ["\"0\"", "-1", "lastsegment", "1.5"] {
        let e = parse_error(&losing("30s", bad));
        assert!(
            e.contains("line 6") && (e.contains("lastSegment") || e.contains("lostOnPromotion")),
            "{bad}: {e}"
        );
    }
    let e = parse_error(&losing("30", "0"));
    assert!(e.contains("has no unit"), "{e}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Any loss time parses, and is accepted exactly when it falls inside
    /// the 60 s run; any bound that is a whole number parses back to it.
    #[test]
    fn any_loss_time_is_accepted_inside_the_run_only(ms in 0u64..120_000, n in 0u64..1_000_000) {
        let text = losing(&format!("{ms}ms"), &n.to_string());
        let s = parse(Path::new("t.yaml"), &text).expect("parses");
        proptest::prop_assert_eq!(
            s.bounds.lost_on_promotion,
            Some(super::LostOnPromotion::Writes(n))
        );
        let ok = validate(&s).is_ok();
        proptest::prop_assert_eq!(ok, ms > 0 && ms < 60_000, "{} ms", ms);
    }

    /// Whatever text stands in for the bound, parsing never panics, and
    /// what parses is a number or lastSegment.
    #[test]
    fn any_bound_text_parses_or_is_refused(t in "[a-zA-Z0-9\". -]{0,12}") {
        if let Ok(s) = parse(Path::new("t.yaml"), &losing("30s", &t)) {
            proptest::prop_assert!(s.bounds.lost_on_promotion.is_some() || t.trim().is_empty() || t.trim() == "null" || t.trim() == "~");
        }
    }
}
