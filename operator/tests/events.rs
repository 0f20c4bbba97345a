//! Events on the local platform, against real etcd: a scale-up tells its
//! story in the cluster's event log, which `etcd-operator status NAME`
//! shows as `kubectl describe` shows Events (the same words as on
//! Kubernetes): the scale-up begun, each member added and promoted, the
//! scale-up ended; then a rolling upgrade begun, each member upgraded, the
//! upgrade ended.

use etcd_operator::platform::NoticeType;
use etcd_operator::platform::local::events::{ClusterEvent, load};
use etcd_operator::testing::{Env, manifest, workspace_binary};

/// `etcd-operator status NAME` as a user runs it.
fn status_text(env: &Env, cluster: &str) -> String {
    let out = std::process::Command::new(workspace_binary("etcd-operator"))
        .args(["status", cluster, "--state-dir"])
        .arg(&env.state)
        .output()
        .expect("run etcd-operator status");
    assert!(out.status.success(), "status {cluster}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether `want` appears in `events` in this order (others between).
fn in_order(events: &[ClusterEvent], want: &[&str]) -> bool {
    let mut want = want.iter().peekable();
    for e in events {
        if want.peek().is_some_and(|w| **w == e.reason) {
            want.next();
        }
    }
    want.peek().is_none()
}

#[test]
fn a_scale_up_and_an_upgrade_show_begun_and_ended_in_the_event_log() {
    let mut env = Env::new();
    env.write_manifest("demo.yaml", &manifest("demo", 3, "3.4.23"));
    env.start_operator();
    env.wait_running("demo", 3);
    env.write_manifest("demo.yaml", &manifest("demo", 5, "3.4.23"));
    let story = [
        "ScalingUp",
        "MemberAdded",
        "MemberPromoted",
        "MemberAdded",
        "MemberPromoted",
        "ScaledUp",
    ];
    let path = env.layout().events_path("demo");
    let events = env.wait_for("the scale-up's events", || {
        let events = load(&path);
        in_order(&events, &story).then_some(events)
    });
    let c = env.wait_running("demo", 5);
    let degraded = c
        .status
        .as_ref()
        .and_then(|s| s.condition("Degraded"))
        .expect("a Degraded condition");
    assert_eq!(degraded.status, "False", "{degraded:?}");

    let said = |reason: &str| {
        events
            .iter()
            .filter(|e| e.reason == reason)
            .map(|e| (e.type_, e.message.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        said("ScalingUp"),
        [(
            NoticeType::Normal,
            "scaling up from 3 to 5 members".to_string()
        )]
    );
    let ended = said("ScaledUp");
    assert_eq!(ended.len(), 1, "{events:#?}");
    assert!(
        ended[0]
            .1
            .starts_with("scaled up from 3 to 5 members: 5 of 5 members ready"),
        "{ended:?}"
    );
    for (kind, message) in said("MemberAdded") {
        assert_eq!(kind, NoticeType::Normal);
        assert!(message.ends_with("added as a learner"), "{message}");
    }

    // `status NAME` shows them, oldest first, as kubectl describe does.
    let text = status_text(&env, "demo");
    let table = text
        .split("events (oldest first):")
        .nth(1)
        .unwrap_or_else(|| panic!("no events in\n{text}"));
    let at = |needle: &str| {
        table
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} not in\n{text}"))
    };
    assert!(at("ScalingUp") < at("MemberPromoted"), "{text}");
    assert!(at("MemberPromoted") < at("ScaledUp"), "{text}");
    assert!(at("scaling up from 3 to 5 members") > 0, "{text}");

    // A rolling upgrade tells its start, each member, and its end.
    env.write_manifest("demo.yaml", &manifest("demo", 5, "3.5.1"));
    let upgrade = [
        "ScaledUp",
        "UpgradeStarted",
        "UpgradingMember",
        "MemberUpgraded",
        "UpgradeFinished",
    ];
    let events = env.wait_for("the upgrade's events", || {
        let events = load(&path);
        in_order(&events, &upgrade).then_some(events)
    });
    let finished = said_in(&events, "UpgradeFinished");
    assert!(
        finished[0].starts_with("every member runs 3.5.1 (was 3.4.23)"),
        "{finished:?}"
    );
    assert_eq!(said_in(&events, "MemberUpgraded").len(), 5, "{events:#?}");
}

fn said_in(events: &[ClusterEvent], reason: &str) -> Vec<String> {
    let of = events.iter().filter(|e| e.reason == reason);
    of.map(|e| e.message.clone()).collect()
}
