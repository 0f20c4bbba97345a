//! The Kubernetes target against a mocked API server (tower-test): every
//! request is asserted exactly (method, path, label selector, delete body),
//! the way kube-rs's own tests and controller-rs's `ApiServerVerifier` do.
//! No real cluster is involved.

mod common;

use chaos_monkey::cli::FaultKind;
use chaos_monkey::monkey::Error;
use chaos_monkey::select::{self, ClusterView, MemberView, Target};
use chaos_monkey::{Config, Stop};
use common::kube_api::{MEMBERS, NS, config, grace0, in_clusters, list, pod, pods_uri, run_mocked};
use etcd_operator::faults::{Fault, Role};
use http::{Method, StatusCode};
use serde_json::{Value, json};

fn cluster_a() -> Value {
    list(
        "PodList",
        (0..3)
            .map(|i| pod("a", &format!("a-{i}"), "Running"))
            .collect(),
    )
}

/// The member tick 0 picks among a-0..a-2 (all running, roles unknown).
fn expected_victim(cfg: &Config) -> String {
    let view = ClusterView {
        name: "a".into(),
        members: (0..3)
            .map(|i| MemberView {
                name: format!("a-{i}"),
                role: Role::Unknown,
                running: true,
                eligible: true,
            })
            .collect(),
    };
    let picks = select::choose(cfg.seed, 0, &[view], cfg.target, 1);
    format!("a-{}", picks[0].member)
}

#[tokio::test]
async fn kill_deletes_the_victim_pod_with_grace_period_zero() {
    let cfg = config(FaultKind::Kill, Target::Random, 1);
    let victim = expected_victim(&cfg);
    let v = victim.clone();
    let (r, log) = run_mocked(cfg, None, |mut s| async move {
        // The selection is checked: clusters, then their members.
        s.get(&pods_uri(MEMBERS), cluster_a()).await;
        s.get(&pods_uri(&in_clusters("a")), cluster_a()).await;
        // Tick 0.
        s.get(&pods_uri(MEMBERS), cluster_a()).await;
        s.get(&pods_uri(&in_clusters("a")), cluster_a()).await;
        let uri = format!("/api/v1/namespaces/{NS}/pods/{v}?");
        s.expect(
            Method::DELETE,
            &uri,
            Some(grace0(&v)),
            StatusCode::OK,
            pod("a", &v, "Running"),
        )
        .await;
        s.done().await;
    })
    .await;
    assert_eq!(r.expect("run").stop, Stop::MaxFaults);
    let rec = &log.records()[0];
    assert_eq!(
        (rec.fault, rec.cluster.as_str(), rec.member.as_str()),
        (Fault::Kill, "a", victim.as_str())
    );
    assert_eq!(
        (rec.role, rec.outcome.as_str()),
        (Role::Unknown, "injected")
    );
}

#[tokio::test]
async fn destroy_deletes_the_claims_then_the_pod_and_stays_inside_the_selection() {
    let mut cfg = config(FaultKind::Destroy, Target::Random, 1);
    cfg.clusters = vec!["a".into()];
    let victim = expected_victim(&cfg);
    let v = victim.clone();
    let (r, log) = run_mocked(cfg, Some("tier=test"), |mut s| async move {
        let all = format!("{MEMBERS}%2Ctier%3Dtest");
        let selected = format!("{}%2Ctier%3Dtest", in_clusters("a"));
        // A server that also returns pods of another cluster: ignored.
        let mut pods = cluster_a();
        let items = pods["items"].as_array_mut().expect("items");
        items.push(pod("b", "b-0", "Running"));
        s.get(&pods_uri(&all), pods.clone()).await;
        s.get(&pods_uri(&selected), pods.clone()).await;
        s.get(&pods_uri(&selected), pods).await;
        let claims = format!(
            "/api/v1/namespaces/{NS}/persistentvolumeclaims?&labelSelector=etcdoperator.dev%2Fcluster%3Da%2Cetcdoperator.dev%2Fmember%3D{v}"
        );
        let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                           "metadata": {"name": format!("data-{v}"), "namespace": NS}});
        s.get(&claims, list("PersistentVolumeClaimList", vec![claim.clone()])).await;
        let claim_uri = format!("/api/v1/namespaces/{NS}/persistentvolumeclaims/data-{v}?");
        s.expect(Method::DELETE, &claim_uri, Some(json!({})), StatusCode::OK, claim).await;
        let uri = format!("/api/v1/namespaces/{NS}/pods/{v}?");
        s.expect(Method::DELETE, &uri, Some(grace0(&v)), StatusCode::OK, pod("a", &v, "Running")).await;
        s.done().await;
    })
    .await;
    r.expect("run");
    let rec = &log.records()[0];
    assert_eq!(
        (rec.fault, rec.member.as_str(), rec.outcome.as_str()),
        (Fault::Destroy, victim.as_str(), "injected")
    );
}

#[tokio::test]
async fn operator_target_deletes_the_operator_pod() {
    let cfg = config(FaultKind::Kill, Target::Operator, 1);
    let (r, log) = run_mocked(cfg, None, |mut s| async move {
        s.get(&pods_uri(MEMBERS), cluster_a()).await;
        let mut op = pod("", "etcd-operator-5d9f", "Running");
        op["metadata"]["labels"] = json!({"app.kubernetes.io/name": "etcd-operator"});
        s.get(
            &pods_uri("app.kubernetes.io%2Fname%3Detcd-operator"),
            list("PodList", vec![op.clone()]),
        )
        .await;
        let uri = format!("/api/v1/namespaces/{NS}/pods/etcd-operator-5d9f?");
        s.expect(
            Method::DELETE,
            &uri,
            Some(grace0("etcd-operator-5d9f")),
            StatusCode::OK,
            op,
        )
        .await;
        s.done().await;
    })
    .await;
    r.expect("run");
    let rec = &log.records()[0];
    assert_eq!(
        (
            rec.cluster.as_str(),
            rec.member.as_str(),
            rec.outcome.as_str()
        ),
        ("", "etcd-operator-5d9f", "injected")
    );
}

#[tokio::test]
async fn dry_run_only_reads() {
    let mut cfg = config(FaultKind::Destroy, Target::Random, 2);
    cfg.dry_run = true;
    let (r, log) = run_mocked(cfg, None, |mut s| async move {
        for _ in 0..3 {
            s.get(&pods_uri(MEMBERS), cluster_a()).await;
            s.get(&pods_uri(&in_clusters("a")), cluster_a()).await;
        }
        s.done().await;
    })
    .await;
    r.expect("run");
    assert_eq!(log.records().len(), 2);
    assert!(log.records().iter().all(|r| r.outcome == "dry-run"));
}

#[tokio::test]
async fn pods_that_are_not_running_are_spared_and_a_vanished_pod_is_a_failed_fault() {
    let cfg = config(FaultKind::Kill, Target::Random, 1);
    let (r, log) = run_mocked(cfg, None, |mut s| async move {
        let mut terminating = pod("a", "a-2", "Running");
        terminating["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:05Z");
        let pods = list(
            "PodList",
            vec![
                pod("a", "a-0", "Pending"),
                pod("a", "a-1", "Running"),
                terminating,
            ],
        );
        s.get(&pods_uri(MEMBERS), pods.clone()).await;
        s.get(&pods_uri(&in_clusters("a")), pods.clone()).await;
        s.get(&pods_uri(MEMBERS), pods.clone()).await;
        s.get(&pods_uri(&in_clusters("a")), pods).await;
        let uri = format!("/api/v1/namespaces/{NS}/pods/a-1?");
        let gone = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                          "message": "pods \"a-1\" not found", "reason": "NotFound", "code": 404});
        s.expect(
            Method::DELETE,
            &uri,
            Some(grace0("a-1")),
            StatusCode::NOT_FOUND,
            gone,
        )
        .await;
        s.done().await;
    })
    .await;
    r.expect("run");
    let rec = &log.records()[0];
    assert_eq!(
        (rec.member.as_str(), rec.outcome.as_str()),
        ("a-1", "failed: pod a-1 is gone")
    );
}

#[tokio::test]
async fn an_unknown_cluster_is_bad_input() {
    let mut cfg = config(FaultKind::Kill, Target::Random, 1);
    cfg.clusters = vec!["nope".into()];
    let (r, log) = run_mocked(cfg, None, |mut s| async move {
        s.get(&pods_uri(MEMBERS), cluster_a()).await;
        s.done().await;
    })
    .await;
    let e = r.expect_err("bad input");
    assert!(
        matches!(&e, Error::BadInput(m) if m.contains("nope") && m.contains("there are: a")),
        "{e}"
    );
    assert!(log.records().is_empty());
}
