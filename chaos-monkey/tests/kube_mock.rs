//! The Kubernetes target against a mocked API server (tower-test): every
//! request is asserted exactly (method, path, label selector, delete body),
//! the way kube-rs's own tests and controller-rs's `ApiServerVerifier` do.
//! No real cluster is involved.

mod common;

use chaos_monkey::cli::FaultKind;
use chaos_monkey::monkey::Error;
use chaos_monkey::roles::RoleSource;
use chaos_monkey::select::{self, ClusterView, MemberView, Target};
use chaos_monkey::{Config, Stop};
use common::kube_api::{
    MEMBERS, NS, api_status, cluster_a, config, etcdcluster_uri, expected_victim, in_clusters,
    list, pod, pods_uri, published, rfc3339, run_mocked,
};
use etcd_operator::faults::{Fault, Role};
use http::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::{Duration, SystemTime};

#[tokio::test]
async fn kill_deletes_the_victim_pod_with_grace_period_zero() {
    let cfg = config(FaultKind::Kill, Target::Random, 1);
    let victim = expected_victim(&cfg);
    let v = victim.clone();
    let (r, log) = run_mocked(cfg, None, |mut s| async move {
        // The selection is checked: clusters, then their members (pods
        // without IPs: etcd is not asked, the EtcdCluster is read instead);
        // tick 0 finds a cluster without a published status yet.
        s.picks_in_cluster_a().await;
        s.delete_pod(&v, StatusCode::OK, pod("a", &v, "Running"))
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
        // Only the selected cluster's status is read, never b's.
        s.no_etcdcluster("a").await;
        s.get(&pods_uri(&selected), pods).await;
        s.no_etcdcluster("a").await;
        let claims = format!(
            "/api/v1/namespaces/{NS}/persistentvolumeclaims?&labelSelector=etcdoperator.dev%2Fcluster%3Da%2Cetcdoperator.dev%2Fmember%3D{v}"
        );
        let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                           "metadata": {"name": format!("data-{v}"), "namespace": NS}});
        s.get(&claims, list("PersistentVolumeClaimList", vec![claim.clone()])).await;
        let claim_uri = format!("/api/v1/namespaces/{NS}/persistentvolumeclaims/data-{v}?");
        s.expect(Method::DELETE, &claim_uri, Some(json!({})), StatusCode::OK, claim).await;
        s.delete_pod(&v, StatusCode::OK, pod("a", &v, "Running")).await;
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
        s.delete_pod("etcd-operator-5d9f", StatusCode::OK, op).await;
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
        // Whatever reading the EtcdCluster gives (none, forbidden, a
        // server error), roles stay unknown and the ticks go on.
        let forbidden = api_status(
            403,
            "Forbidden",
            "etcdclusters.etcdoperator.dev \"a\" is forbidden",
        );
        let broken = api_status(500, "InternalError", "etcd is sad");
        let replies = [
            (
                StatusCode::NOT_FOUND,
                api_status(404, "NotFound", "not found"),
            ),
            (StatusCode::FORBIDDEN, forbidden),
            (StatusCode::INTERNAL_SERVER_ERROR, broken),
        ];
        for (code, reply) in replies {
            s.get(&pods_uri(MEMBERS), cluster_a()).await;
            s.get(&pods_uri(&in_clusters("a")), cluster_a()).await;
            s.expect(Method::GET, &etcdcluster_uri("a"), None, code, reply)
                .await;
        }
        s.done().await;
    })
    .await;
    r.expect("run");
    assert_eq!(log.records().len(), 2);
    assert!(log.records().iter().all(|r| r.outcome == "dry-run"));
    assert!(log.records().iter().all(|r| r.role == Role::Unknown));
    assert_eq!(log.role_sources(), [None, None]);
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
        s.no_etcdcluster("a").await;
        s.get(&pods_uri(MEMBERS), pods.clone()).await;
        s.get(&pods_uri(&in_clusters("a")), pods).await;
        s.no_etcdcluster("a").await;
        let gone = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                          "message": "pods \"a-1\" not found", "reason": "NotFound", "code": 404});
        s.delete_pod("a-1", StatusCode::NOT_FOUND, gone).await;
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

/// Members a-0..a-2 whose pod IPs refuse connections (127.0.0.2-4 port
/// 2379: loopback, where the local platform never puts members), running
/// for a minute: etcd gives no roles, as for a monkey outside the cluster.
fn unreachable_a(phases: [&str; 3]) -> Vec<Value> {
    let started = rfc3339(SystemTime::now() - Duration::from_secs(60));
    phases
        .iter()
        .enumerate()
        .map(|(i, phase)| {
            let mut p = pod("a", &format!("a-{i}"), phase);
            p["status"]["podIP"] = json!(format!("127.0.0.{}", i + 2));
            p["status"]["startTime"] = json!(started);
            p
        })
        .collect()
}

/// Runs the monkey for one fault while the pods' IPs do not answer and the
/// published status names a-`leader`: the check before tick 0 and tick 0
/// each list the pods and read the status; tick 0 deletes `victim`.
async fn one_kill_with_the_status(
    cfg: Config,
    pods: Value,
    leader: usize,
    victim: String,
) -> (Result<chaos_monkey::Summary, Error>, chaos_monkey::FaultLog) {
    run_mocked(cfg, None, |mut s| async move {
        let status = || published("a", 3, Some(leader), SystemTime::now());
        for _ in 0..2 {
            s.get(&pods_uri(MEMBERS), pods.clone()).await;
            s.get(&pods_uri(&in_clusters("a")), pods.clone()).await;
            s.etcdcluster("a", status()).await;
        }
        s.delete_pod(&victim, StatusCode::OK, pod("a", &victim, "Running"))
            .await;
        s.done().await;
    })
    .await
}

#[tokio::test]
async fn leader_target_takes_the_leader_from_the_status_when_pod_ips_do_not_answer() {
    let cfg = config(FaultKind::Kill, Target::Leader, 1);
    let pods = list("PodList", unreachable_a(["Running"; 3]));
    let (r, log) = one_kill_with_the_status(cfg, pods, 2, "a-2".into()).await;
    assert_eq!(r.expect("run").stop, Stop::MaxFaults);
    assert_eq!(log.records().len(), 1);
    let rec = &log.records()[0];
    assert_eq!(
        (
            rec.fault,
            rec.member.as_str(),
            rec.role,
            rec.outcome.as_str()
        ),
        (Fault::Kill, "a-2", Role::Leader, "injected")
    );
    assert_eq!(log.role_sources(), [Some(RoleSource::Status)]);
}

#[tokio::test]
async fn follower_target_takes_followers_from_the_status() {
    let cfg = config(FaultKind::Kill, Target::Follower, 1);
    let view = ClusterView {
        name: "a".into(),
        members: [Role::Follower, Role::Leader, Role::Follower]
            .into_iter()
            .enumerate()
            .map(|(i, role)| MemberView {
                name: format!("a-{i}"),
                role,
                running: true,
                eligible: true,
            })
            .collect(),
    };
    let victim = format!(
        "a-{}",
        select::choose(cfg.seed, 0, &[view], cfg.target, 1)[0].member
    );
    assert_ne!(victim, "a-1");
    let v = victim.clone();
    let pods = list("PodList", unreachable_a(["Running"; 3]));
    let (r, log) = one_kill_with_the_status(cfg, pods, 1, v).await;
    r.expect("run");
    let rec = &log.records()[0];
    assert_eq!(
        (rec.member.as_str(), rec.role),
        (victim.as_str(), Role::Follower)
    );
    assert_eq!(log.role_sources(), [Some(RoleSource::Status)]);
}

/// A random kill among a-0..a-2 where `running` run: the victim tick 0
/// picks.
fn random_victim(cfg: &Config, running: [bool; 3]) -> String {
    let view = ClusterView {
        name: "a".into(),
        members: running
            .iter()
            .enumerate()
            .map(|(i, &running)| MemberView {
                name: format!("a-{i}"),
                role: Role::Unknown,
                running,
                eligible: running,
            })
            .collect(),
    };
    let picks = select::choose(cfg.seed, 0, &[view], cfg.target, 1);
    format!("a-{}", picks[0].member)
}

#[tokio::test]
async fn a_stale_status_leader_that_is_down_makes_no_roles() {
    // The status still names a-1 leader, but its pod is Pending (it was
    // killed and is coming back): nobody is known to lead, so nobody is
    // known to follow either; the victim's role is unknown.
    let cfg = config(FaultKind::Kill, Target::Random, 1);
    let victim = random_victim(&cfg, [true, false, true]);
    let v = victim.clone();
    let pods = list("PodList", unreachable_a(["Running", "Pending", "Running"]));
    let (r, log) = one_kill_with_the_status(cfg, pods, 1, v).await;
    r.expect("run");
    let rec = &log.records()[0];
    assert_eq!(
        (rec.member.as_str(), rec.role),
        (victim.as_str(), Role::Unknown)
    );
    assert_eq!(log.role_sources(), [None]);
}

#[tokio::test]
async fn a_status_leader_restarted_since_or_an_old_status_is_not_believed() {
    // Tick 0 (and the check before it): a-1's container restarted after
    // the status was observed. Tick 1: the status is two minutes old (the
    // operator is not publishing). Neither names a leader: nothing to hit,
    // so the run ends by --duration after two ticks.
    let mut cfg = config(FaultKind::Kill, Target::Leader, 1);
    cfg.interval = Duration::from_secs(1);
    cfg.duration = Some(Duration::from_millis(2500));
    let mut restarted = unreachable_a(["Running"; 3]);
    restarted[1]["status"]["containerStatuses"] = json!([{
        "name": "etcd", "image": "etcd", "imageID": "", "ready": true, "restartCount": 1,
        "state": {"running": {"startedAt": rfc3339(SystemTime::now() + Duration::from_secs(5))}},
    }]);
    let restarted = list("PodList", restarted);
    let pods = list("PodList", unreachable_a(["Running"; 3]));
    let (r, log) = run_mocked(cfg, None, |mut s| async move {
        let fresh = || published("a", 3, Some(1), SystemTime::now());
        s.get(&pods_uri(MEMBERS), restarted.clone()).await;
        s.get(&pods_uri(&in_clusters("a")), restarted.clone()).await;
        s.etcdcluster("a", fresh()).await;
        s.get(&pods_uri(MEMBERS), restarted.clone()).await;
        s.get(&pods_uri(&in_clusters("a")), restarted).await;
        s.etcdcluster("a", fresh()).await;
        let old = SystemTime::now() - Duration::from_secs(120);
        s.get(&pods_uri(MEMBERS), pods.clone()).await;
        s.get(&pods_uri(&in_clusters("a")), pods).await;
        s.etcdcluster("a", published("a", 3, Some(1), old)).await;
        s.done().await;
    })
    .await;
    let summary = r.expect("run");
    assert_eq!((summary.stop, summary.ticks), (Stop::Duration, 2));
    assert!(log.records().is_empty());
}
