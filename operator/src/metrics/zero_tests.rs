//! Counters are exported at zero from a cluster's first pass, so their
//! first event counts in a rate or an increase: every reconcile outcome,
//! leader changes, and both backup results while backups are on.

use std::sync::Arc;
use std::time::Duration;

use super::{Metrics, OUTCOMES};
use crate::crd::EtcdClusterStatus;

fn series(text: &str, name: &str, labels: &str) -> Option<String> {
    let prefix = format!("{name}{{{labels}");
    text.lines()
        .find(|l| l.starts_with(&prefix))
        .and_then(|l| l.rsplit(' ').next())
        .map(str::to_string)
}

#[test]
fn a_clusters_counters_start_at_zero_from_its_first_pass() {
    let metrics = Arc::new(Metrics::new());
    let m = metrics.cluster("ns", "demo");
    let before = metrics.encode();
    assert!(!before.contains("cluster=\"demo\""), "{before}");

    m.reconciled("converged", Duration::from_millis(3));
    let text = metrics.encode();
    let l = r#"namespace="ns",cluster="demo""#;
    for outcome in OUTCOMES {
        let want = if outcome == "converged" { "1" } else { "0" };
        let got = series(
            &text,
            "etcd_operator_reconciles_total",
            &format!(r#"{l},outcome="{outcome}""#),
        );
        assert_eq!(got.as_deref(), Some(want), "{outcome}:\n{text}");
    }
    let leader = series(&text, "etcd_operator_leader_changes_total", l);
    assert_eq!(leader.as_deref(), Some("0"), "{text}");
    // Backups are off: no backup counters.
    assert!(!text.contains("etcd_operator_backups_total{"), "{text}");

    // Backups on: both results at zero; the first failure then reads 1.
    m.status(&EtcdClusterStatus::default(), Some(Duration::from_secs(60)));
    let text = metrics.encode();
    for result in ["taken", "failed"] {
        let got = series(
            &text,
            "etcd_operator_backups_total",
            &format!(r#"{l},result="{result}""#),
        );
        assert_eq!(got.as_deref(), Some("0"), "{result}:\n{text}");
    }
    m.backup_failed();
    let text = metrics.encode();
    let failed = series(
        &text,
        "etcd_operator_backups_total",
        &format!(r#"{l},result="failed""#),
    );
    assert_eq!(failed.as_deref(), Some("1"), "{text}");

    // Later passes keep counting from there.
    m.reconciled("failed", Duration::from_millis(3));
    m.reconciled("failed", Duration::from_millis(3));
    let text = metrics.encode();
    let failed = series(
        &text,
        "etcd_operator_reconciles_total",
        &format!(r#"{l},outcome="failed""#),
    );
    assert_eq!(failed.as_deref(), Some("2"), "{text}");
}

#[test]
fn a_forgotten_cluster_gets_no_new_zero_series() {
    let metrics = Arc::new(Metrics::new());
    let m = metrics.cluster("ns", "gone");
    m.reconciled("converged", Duration::ZERO);
    m.status(&EtcdClusterStatus::default(), Some(Duration::from_secs(60)));
    m.forget();
    let text = metrics.encode();
    assert!(!text.contains("etcd_operator_backups_total{"), "{text}");
    assert!(
        !text.contains("etcd_operator_leader_changes_total{"),
        "{text}"
    );
}
