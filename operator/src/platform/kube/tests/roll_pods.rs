//! A change of `spec.pod` or `spec.image` rolls through the members as an
//! upgrade does, and an operator that knows these fields leaves members
//! made before them alone: real etcd 3.5.1 behind the fake API server,
//! the test standing in for the kubelet (a re-created pod gets Ready and
//! its IP only when the test says so).

use std::sync::Arc;

use serde_json::{Value, json};

use super::etcd_pods::EtcdPods;
use super::fake::{Fake, fake};
use super::fixtures::{Seen, platform_for, resource_from};
use super::rbac::collection;
use super::trouble::{condition, put_record, put_resource};
use crate::controller::Cluster;
use crate::controller::kube::spec_state;
use crate::crd::{EtcdCluster, StoragePolicy};
use crate::plan::{RestartWhy, Step, Wait};
use crate::platform::kube::config;

/// Pods (ready, at their etcd's address) and claims (started) of the
/// members `etcd` runs, as an operator without `spec.pod` made them.
fn members(fake: &Fake, etcd: &EtcdPods) {
    for (i, c) in etcd.configs.iter().enumerate() {
        let pod = Seen::pod_of(c, StoragePolicy::Persistent)
            .ready()
            .runs("3.5.1");
        let pod = pod.ip(&etcd.ips[i].to_string());
        fake.put(&collection("pods"), pod.json());
        let claim = Seen::claim_of(c).started();
        fake.put(&collection("persistentvolumeclaims"), claim.json());
    }
}

async fn cluster(
    fake: &Fake,
    etcd: &EtcdPods,
    r: &EtcdCluster,
    client: kube::Client,
) -> Cluster<crate::platform::kube::KubePlatform> {
    put_resource(fake, r);
    put_record(
        fake,
        r,
        etcd.configs.iter().map(|c| c.addr.clone()).collect(),
    );
    members(fake, etcd);
    let platform = Arc::new(platform_for(client, r));
    Cluster::new("demo", platform, etcd.clients.clone(), spec_state(r))
        .await
        .expect("the cluster")
}

fn pod(fake: &Fake, member: &str) -> Value {
    fake.get(&format!("{}/{member}", collection("pods")))
        .unwrap_or_else(|| panic!("no pod {member}"))
}

/// The kubelet's part: the re-created pod runs etcd (the same process
/// here, on the same data) and is Ready at its address.
fn kubelet_readies(fake: &Fake, etcd: &EtcdPods, member: &str) {
    let i = etcd
        .configs
        .iter()
        .position(|c| c.addr.name == member)
        .unwrap_or_else(|| panic!("no member {member}"));
    let status = Seen(json!({}))
        .ready()
        .runs("3.5.1")
        .ip(&etcd.ips[i].to_string());
    fake.change(
        &format!("{}/{member}", collection("pods")),
        &json!({"status": status.json()["status"]}),
    );
}

fn recorded(object: &Value) -> crate::member::MemberConfig {
    let annotations = serde_json::from_value(object["metadata"]["annotations"].clone()).ok();
    config::read("object", annotations.as_ref())
        .expect("readable")
        .expect("a recorded config")
}

#[tokio::test]
async fn a_new_pod_spec_rolls_one_member_at_a_time_the_leader_last() {
    let etcd = EtcdPods::start("kube-roll-pod", "3.5.1", 3).await;
    let (client, fake) = fake();
    let r = resource_from(json!({
        "size": 3, "version": "3.5.1",
        "image": {"repository": "mirror.example.com/etcd"},
        "pod": {"priorityClassName": "etcd-critical", "labels": {"team": "platform"}},
    }));
    let mut cluster = cluster(&fake, &etcd, &r, client).await;

    let mut restarted: Vec<String> = Vec::new();
    let mut handed_over = false;
    for _ in 0..40 {
        let out = cluster.reconcile().await;
        match out.step {
            Some(Step::Restart { member, why }) => {
                let RestartWhy::Settings { changed } = why else {
                    panic!("a restart for new settings, got {why:?}");
                };
                assert_eq!(changed, ["spec.image.repository", "spec.pod"]);
                assert!(!restarted.contains(&member), "{member} restarted twice");
                let p = pod(&fake, &member);
                assert_eq!(p["spec"]["priorityClassName"], "etcd-critical");
                assert_eq!(p["metadata"]["labels"]["team"], "platform");
                assert_eq!(
                    p["spec"]["containers"][0]["image"],
                    "mirror.example.com/etcd:v3.5.1"
                );
                // Not Ready yet: nothing else moves.
                let next = cluster.reconcile().await;
                assert_eq!(
                    next.step,
                    Some(Step::Wait(Wait::MemberNotReady {
                        member: member.clone()
                    })),
                    "a second member moved while {member} was not ready"
                );
                let progressing = condition(&fake, "Progressing");
                assert_eq!(condition(&fake, "Degraded")["status"], "False");
                assert_eq!(progressing["status"], "True", "{progressing:#}");
                kubelet_readies(&fake, &etcd, &member);
                restarted.push(member);
            }
            Some(Step::MoveLeader { from, .. }) => {
                // Only the last member to move leads: it hands over first.
                assert_eq!(restarted.len(), 2, "the leader {from} moves last");
                handed_over = true;
            }
            Some(Step::Converged) => break,
            Some(Step::Wait(Wait::MemberNotReady { .. })) => {}
            other => panic!("unexpected step {other:?} after {restarted:?}"),
        }
    }
    assert_eq!(restarted.len(), 3, "every member restarted: {restarted:?}");
    assert!(handed_over, "the leader handed its leadership over first");
    // Each claim now records what its member runs.
    for c in &etcd.configs {
        let claim = fake
            .get(&format!(
                "{}/{}-data",
                collection("persistentvolumeclaims"),
                c.addr.name
            ))
            .expect("a claim");
        let pod = recorded(&claim).pod;
        assert_eq!(pod.repository.as_deref(), Some("mirror.example.com/etcd"));
        assert!(pod.template.is_some());
    }
    drop(etcd);
}

#[tokio::test]
async fn an_operator_upgrade_restarts_no_member() {
    let etcd = EtcdPods::start("kube-no-roll", "3.5.1", 3).await;
    let (client, fake) = fake();
    let r = resource_from(json!({"size": 3, "version": "3.5.1"}));
    let mut cluster = cluster(&fake, &etcd, &r, client).await;
    let mut last = None;
    for _ in 0..5 {
        last = cluster.reconcile().await.step;
        if last == Some(Step::Converged) {
            break;
        }
    }
    assert_eq!(last, Some(Step::Converged));
    let pods = collection("pods");
    let touched: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|s| s.path.starts_with(&pods) && s.method != http::Method::GET)
        .map(|s| format!("{} {}", s.method, s.path))
        .collect();
    assert!(touched.is_empty(), "pods written: {touched:?}");
    drop(etcd);
}
