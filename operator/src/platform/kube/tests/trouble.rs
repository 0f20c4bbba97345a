//! Members the kubelet cannot run, against the fake API server: one pass
//! of `Cluster<KubePlatform>` says why in the status's Degraded condition,
//! and a crash-looping member without quorum is re-created in place (its
//! pod deleted and applied again), not started over and over as a pod that
//! still "runs".

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use http::Method;
use kube::Resource;
use serde_json::Value;

use super::fake::{Fake, fake};
use super::fixtures::{Seen, platform_for, resource};
use super::rbac::{clusters_path, collection};
use crate::controller::Cluster;
use crate::controller::kube::spec_state;
use crate::crd::{EtcdCluster, StoragePolicy::Persistent};
use crate::etcd::Clients;
use crate::plan::Step;
use crate::platform::ClusterRecord;
use crate::platform::kube::KubePlatform;
use crate::platform::kube::objects::record_config_map;

/// etcd's log tail as the kubelet keeps it (`FallbackToLogsOnError`).
pub(super) const FATAL: &str = "{\"level\":\"info\",\"msg\":\"starting an etcd server\"}\n\
    {\"level\":\"fatal\",\"msg\":\"discovery failed\",\"error\":\"member 8e9e05c52164694d has already been bootstrapped\"}\n";

pub(super) fn resource_path() -> String {
    format!("{}/demo", clusters_path())
}

/// The resource in the store, so its status can be read back.
pub(super) fn put_resource(fake: &Fake, r: &EtcdCluster) {
    fake.put(clusters_path(), serde_json::to_value(r).expect("json"));
}

/// The record of a cluster that formed with demo-0..2.
pub(super) fn put_record(fake: &Fake, r: &EtcdCluster, initial: Vec<crate::platform::MemberAddr>) {
    put_record_of(fake, r, formed(r, initial));
}

/// The record of a cluster of `r` that formed with `initial` (3 voters).
pub(super) fn formed(r: &EtcdCluster, initial: Vec<crate::platform::MemberAddr>) -> ClusterRecord {
    ClusterRecord {
        token: "demo-token".into(),
        bootstrapped: true,
        next_index: 3,
        initial,
        generation: 1,
        spec_json: serde_json::to_string(&r.spec).expect("json"),
        last_voters: 3,
        ..ClusterRecord::default()
    }
}

/// `record` in the store, owned by `r`.
pub(super) fn put_record_of(fake: &Fake, r: &EtcdCluster, record: ClusterRecord) {
    let owner = r.controller_owner_ref(&()).expect("owner");
    let json = serde_json::to_string(&record).expect("json");
    let cm = record_config_map("demo", json, &owner);
    fake.put(
        &collection("configmaps"),
        serde_json::to_value(cm).expect("json"),
    );
}

/// The published condition of `type_`.
pub(super) fn condition(fake: &Fake, type_: &str) -> Value {
    let r = fake.get(&resource_path()).expect("the resource");
    let conditions = r["status"]["conditions"].as_array().cloned();
    conditions
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("no {type_} condition in {:#}", r["status"]))
}

/// A loopback address where nothing listens (tests use loopback only).
/// `demo`'s controller over `client`, `r` registered. Nothing answers at
/// the pods' IPs; a short timeout keeps a pass short.
async fn cluster_of(client: kube::Client, r: &EtcdCluster) -> Cluster<KubePlatform> {
    let platform = Arc::new(platform_for(client, r));
    let clients = Arc::new(Clients::new(Duration::from_millis(200)));
    Cluster::new("demo", platform, clients, spec_state(r))
        .await
        .expect("the cluster")
}

/// Puts a member's `pod` and `claim` in the store.
fn put_member(fake: &Fake, pod: Seen, claim: Seen) {
    fake.put(&collection("pods"), pod.json());
    fake.put(&collection("persistentvolumeclaims"), claim.json());
}

fn nobody() -> String {
    crate::testing::free_loopback("kube-trouble-nobody", &HashSet::new()).to_string()
}

#[tokio::test]
async fn members_stuck_pending_or_crashing_say_why_in_status() {
    let (client, fake) = fake();
    let r = resource(3, "3.5.1", Persistent);
    put_resource(&fake, &r);
    let unbound = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. \
                   preemption: 0/1 nodes are available: 1 Preemption is not helpful for \
                   scheduling.";
    let pull = "Back-off pulling image \"quay.io/coreos/etcd:v3.5.1\"";
    let pods = [
        Seen::pod("demo-0", "3.5.1", Persistent).unschedulable(unbound),
        Seen::pod("demo-1", "3.5.1", Persistent).waiting("ImagePullBackOff", pull),
        Seen::pod("demo-2", "3.5.1", Persistent)
            .crash_loop(2, 1, 1, FATAL)
            .ip(&nobody()),
    ];
    for (i, pod) in pods.into_iter().enumerate() {
        put_member(&fake, pod, Seen::claim(&format!("demo-{i}"), "3.5.1"));
    }
    let mut cluster = cluster_of(client, &r).await;
    let out = cluster.reconcile().await;
    // demo-1 cannot pull its image and demo-2 crash loops: neither runs,
    // so the bootstrap starts them again (demo-1's pod, at the spec's
    // version, is left to the kubelet's pulling).
    assert_eq!(out.step, Some(Step::Bootstrap));
    let degraded = condition(&fake, "Degraded");
    assert_eq!(degraded["status"], "True");
    assert_eq!(degraded["reason"], "MemberFailing");
    let message = degraded["message"].as_str().expect("a message");
    for want in [
        format!("member demo-0: Pending: {unbound}"),
        format!("member demo-1: ImagePullBackOff: {pull}"),
        "member demo-2: CrashLoopBackOff: restarted 2 time(s), last exit code 1: discovery \
         failed: member 8e9e05c52164694d has already been bootstrapped"
            .to_string(),
    ] {
        assert!(message.contains(&want), "{want}\nnot in\n{message}");
    }
}

#[tokio::test]
async fn without_quorum_a_crash_looping_member_is_re_created_in_place() {
    let (client, fake) = fake();
    let r = resource(3, "3.5.1", Persistent);
    put_resource(&fake, &r);
    let initial = (0..3)
        .map(|i| super::fixtures::config(&format!("demo-{i}"), "3.5.1").addr)
        .collect();
    put_record(&fake, &r, initial);
    // The others run, but nothing answers at their IPs: no quorum.
    let nobody = nobody();
    for i in 0..2 {
        let name = format!("demo-{i}");
        let pod = Seen::pod(&name, "3.5.1", Persistent).ready().ip(&nobody);
        put_member(&fake, pod, Seen::claim(&name, "3.5.1").started());
    }
    let looping = Seen::pod("demo-2", "3.5.1", Persistent)
        .started()
        .crash_loop(3, 1, 1, FATAL)
        .ip(&nobody);
    put_member(&fake, looping, Seen::claim("demo-2", "3.5.1").started());

    let mut cluster = cluster_of(client, &r).await;
    let out = cluster.reconcile().await;
    // Without quorum three fast failures do not condemn a member's data:
    // it is started again in place.
    assert_eq!(
        out.step,
        Some(Step::Start {
            member: "demo-2".into()
        })
    );
    let pod_path = format!("{}/demo-2", collection("pods"));
    let deleted = fake
        .requests()
        .iter()
        .any(|s| s.method == Method::DELETE && s.path == pod_path);
    assert!(deleted, "the crash-looping pod was deleted");
    let pod = fake.get(&pod_path).expect("a new pod");
    assert!(
        pod["status"].is_null(),
        "the pod is the new one, not yet seen by a kubelet: {:#}",
        pod["status"]
    );
    assert!(
        fake.has(&format!(
            "{}/demo-2-data",
            collection("persistentvolumeclaims")
        )),
        "its claim stays"
    );
    let degraded = condition(&fake, "Degraded");
    let message = degraded["message"].as_str().expect("a message");
    assert!(
        message.contains("member demo-2: CrashLoopBackOff: restarted 3 time(s)"),
        "{message}"
    );
}

#[tokio::test]
async fn a_claim_still_binding_is_creation_not_a_failing_member() {
    let (client, fake) = fake();
    let r = resource(3, "3.5.1", Persistent);
    put_resource(&fake, &r);
    let unbound = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.";
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    for i in 0..3 {
        let pod =
            Seen::pod(&format!("demo-{i}"), "3.5.1", Persistent).unschedulable_since(unbound, &now);
        put_member(&fake, pod, Seen::claim(&format!("demo-{i}"), "3.5.1"));
    }
    let mut cluster = cluster_of(client, &r).await;
    cluster.reconcile().await;
    let degraded = condition(&fake, "Degraded");
    assert_eq!(degraded["status"], "False", "{degraded}");
    assert_ne!(degraded["reason"], "MemberFailing", "{degraded}");
}
