//! `--fault partition` on Kubernetes against a mocked API server: the
//! NetworkPolicy the monkey creates (asserted exactly) and deletes after
//! --fault-for, and a refused create logged as a failed fault.

mod common;

use std::time::Duration;

use chaos_monkey::cli::FaultKind;
use chaos_monkey::select::Target;
use common::kube_api::{NS, api_status, config, expected_victim, run_mocked};
use etcd_operator::faults::Fault;
use http::{Method, StatusCode};
use serde_json::{Value, json};

/// The NetworkPolicy that cuts `member` of cluster `a` from `blocked`.
fn isolation(name: &str, member: &str, blocked: &[&str]) -> Value {
    let peers = json!([
        {"podSelector": {"matchExpressions": [
            {"key": "etcdoperator.dev/member", "operator": "NotIn", "values": blocked}
        ]}},
        {"namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [NS]}
        ]}}
    ]);
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"app.kubernetes.io/managed-by": "chaos-monkey", "etcdoperator.dev/cluster": "a"},
        },
        "spec": {
            "podSelector": {"matchLabels": {"etcdoperator.dev/cluster": "a", "etcdoperator.dev/member": member}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": peers}],
            "egress": [{"to": peers}],
        }
    })
}

#[tokio::test]
async fn partition_creates_a_network_policy_and_deletes_it_after_fault_for() {
    let mut cfg = config(FaultKind::Partition, Target::Random, 1);
    cfg.faults.fault_for = Duration::from_millis(50);
    let victim = expected_victim(&cfg);
    let v = victim.clone();
    let (r, log) = run_mocked(cfg, None, |mut s| async move {
        s.picks_in_cluster_a().await;
        let name = format!("chaos-monkey-{v}-{}-1", std::process::id());
        let others: Vec<String> = (0..3)
            .map(|i| format!("a-{i}"))
            .filter(|m| *m != v)
            .collect();
        let others: Vec<&str> = others.iter().map(String::as_str).collect();
        let policy = isolation(&name, &v, &others);
        let uri = format!("/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies?");
        s.expect(
            Method::POST,
            &uri,
            Some(policy.clone()),
            StatusCode::CREATED,
            policy.clone(),
        )
        .await;
        // Healed after --fault-for.
        let del = format!("/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies/{name}?");
        s.expect(Method::DELETE, &del, None, StatusCode::OK, policy)
            .await;
        s.done().await;
    })
    .await;
    let summary = r.expect("run");
    assert!(summary.left_unhealed.is_empty());
    let kinds: Vec<(Fault, &str)> = log
        .records()
        .iter()
        .map(|r| (r.fault, r.member.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (Fault::Partition, victim.as_str()),
            (Fault::Heal, victim.as_str())
        ]
    );
    assert!(
        log.records().iter().all(|r| r.injected()),
        "{:?}",
        log.records()
    );
}

#[tokio::test]
async fn a_refused_network_policy_is_a_failed_fault_and_nothing_to_heal() {
    let mut cfg = config(FaultKind::Partition, Target::Random, 1);
    cfg.faults.fault_for = Duration::from_millis(50);
    let (r, log) = run_mocked(cfg, None, |mut s| async move {
        s.picks_in_cluster_a().await;
        let uri = format!("/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies?");
        s.expect(
            Method::POST,
            &uri,
            None,
            StatusCode::FORBIDDEN,
            api_status(403, "Forbidden", "networkpolicies is forbidden"),
        )
        .await;
        s.done().await;
    })
    .await;
    r.expect("run");
    let recs = log.records();
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0].fault, Fault::Partition);
    assert!(
        recs[0]
            .outcome
            .starts_with("failed: cannot create NetworkPolicy"),
        "{}",
        recs[0].outcome
    );
}
