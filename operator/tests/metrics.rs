//! The operator's `/metrics`, `/healthz` and `/readyz` against real etcd:
//! scraped and parsed, names and labels checked, and the values moving
//! after the leader is killed and a backup is taken.

use etcd_operator::testing::metrics::{Sample, get, value};
use etcd_operator::testing::{Env, kill9};

#[path = "common/monitoring.rs"]
mod monitoring_names;

const MANIFEST: &str = "apiVersion: etcdoperator.dev/v1alpha1\nkind: EtcdCluster\n\
metadata:\n  name: m\nspec:\n  size: 3\n  version: \"3.4.23\"\n  \
backup: {interval: 2s, maxBackups: 2}\n";

fn cluster<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut l = vec![("cluster", "m"), ("namespace", "")];
    l.extend_from_slice(extra);
    l
}

fn at(samples: &[Sample], name: &str, extra: &[(&str, &str)]) -> f64 {
    value(samples, name, &cluster(extra)).unwrap_or(0.0)
}

#[test]
fn metrics_are_scraped_labelled_and_move_after_a_kill() {
    let mut env = Env::new();
    env.with_metrics();
    env.write_manifest("m.yaml", MANIFEST);
    env.start_operator();
    let c = env.wait_running("m", 3);
    let addr = env.metrics_addr();
    assert_eq!(
        get(addr, "/healthz").expect("healthz"),
        (200, "ok\n".into())
    );
    assert_eq!(get(addr, "/readyz").expect("readyz"), (200, "ok\n".into()));
    let (code, text) = get(addr, "/metrics").expect("metrics");
    assert_eq!(code, 200);
    for name in [
        "etcd_operator_reconciles",
        "etcd_operator_reconcile_duration_seconds",
        "etcd_operator_steps",
        "etcd_operator_members_ready",
        "etcd_operator_members_voting",
        "etcd_operator_members_learners",
    ] {
        assert!(
            text.contains(&format!("# TYPE {name} ")),
            "{name} in\n{text}"
        );
    }
    assert!(
        text.trim_end().ends_with("# EOF"),
        "OpenMetrics ends with # EOF"
    );
    // The families this running operator shows are all among those it
    // registers (family_names, which fills a series in each, since a
    // family shows in a scrape only with one), and every metric the alerts
    // and the dashboard in deploy/monitoring/ use is one of those (a
    // counter's or histogram's series carry a suffix).
    let registered = etcd_operator::metrics::family_names();
    for scraped in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let name = scraped.split(' ').next().unwrap_or_default();
        assert!(
            registered.iter().any(|r| r == name),
            "{name} not in {registered:?}"
        );
    }
    for used in monitoring_names::metric_names_used() {
        let known = registered.iter().any(|f| {
            let rest = used.strip_prefix(f.as_str());
            rest.is_some_and(|r| ["", "_total", "_bucket", "_sum", "_count"].contains(&r))
        });
        assert!(
            known,
            "deploy/monitoring names {used}, which the operator does not export: {registered:?}"
        );
    }

    let before = env.wait_for("the backup counted", || {
        let s = env.scrape();
        (at(&s, "etcd_operator_backups_total", &[("result", "taken")]) >= 1.0).then_some(s)
    });
    assert_eq!(at(&before, "etcd_operator_members_ready", &[]), 3.0);
    assert_eq!(at(&before, "etcd_operator_members_voting", &[]), 3.0);
    assert_eq!(at(&before, "etcd_operator_members_learners", &[]), 0.0);
    assert_eq!(
        at(
            &before,
            "etcd_operator_steps_total",
            &[("kind", "bootstrap")]
        ),
        1.0
    );
    assert!(
        at(
            &before,
            "etcd_operator_reconciles_total",
            &[("outcome", "converged")]
        ) >= 1.0
    );
    assert!(at(&before, "etcd_operator_last_backup_size_bytes", &[]) > 0.0);
    let age = at(&before, "etcd_operator_last_backup_age_seconds", &[]);
    assert!((0.0..120.0).contains(&age), "backup age {age}");
    let passes = |s: &[Sample]| {
        s.iter()
            .filter(|x| x.name == "etcd_operator_reconcile_duration_seconds_count")
            .map(|x| x.value)
            .sum::<f64>()
    };

    // Kill the leader: restarted in place, a new leader elected.
    let leader = c
        .status
        .expect("status")
        .members
        .into_iter()
        .find(|m| m.leader)
        .expect("a leader");
    kill9(env.pid("m", &leader.name).expect("the leader runs"));
    let after = env.wait_for("the kill seen in the metrics", || {
        let s = env.scrape();
        let moved = at(&s, "etcd_operator_steps_total", &[("kind", "start")]) >= 1.0
            && at(&s, "etcd_operator_leader_changes_total", &[]) >= 1.0
            && at(&s, "etcd_operator_last_recovery_duration_seconds", &[]) > 0.0
            && at(&s, "etcd_operator_members_ready", &[]) == 3.0;
        moved.then_some(s)
    });
    assert!(passes(&after) > passes(&before), "reconciles counted");
    let recovery = at(&after, "etcd_operator_last_recovery_duration_seconds", &[]);
    assert!(recovery < 60.0, "recovery {recovery}s");
}
