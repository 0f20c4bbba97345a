//! A scale-up on Kubernetes tells its story in Events and never reads as
//! trouble: real etcd behind the fake API server (the pods' DNS names
//! resolve for the members, as cluster DNS would), the operator takes a
//! cluster of 3 to 4, this test starting the new member's etcd where a
//! kubelet would start its pod. Every pass's status is progress (Degraded
//! never True, phase Scaling until Running), and the Event requests say
//! the scale-up began, the member was added and promoted, and the
//! scale-up ended, each a Normal Event POSTed on the resource.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Method;
use serde_json::{Value, json};

use super::etcd_pods::EtcdPods;
use super::fake::fake;
use super::fixtures::{Seen, platform_for, resource};
use super::rbac::collection;
use super::trouble::{condition, resource_path};
use crate::controller::Cluster;
use crate::controller::kube::spec_state;
use crate::crd::StoragePolicy::Persistent;
use crate::member::MemberConfig;
use crate::plan::Step;
use crate::platform::kube::ANNOTATION_CONFIG;

const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/default/events";

/// The config the operator recorded on a pod it created.
fn config_of(pod: &Value) -> MemberConfig {
    let json = pod["metadata"]["annotations"][ANNOTATION_CONFIG]
        .as_str()
        .expect("the pod records its config");
    serde_json::from_str(json).expect("a member config")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_up_is_progress_and_its_events_say_begun_and_ended() {
    let mut etcd = EtcdPods::start_resolving("kube-scale-events", "3.5.1", 3, 4).await;
    let (client, fake) = fake();
    let r = resource(4, "3.5.1", Persistent);
    etcd.seat(&fake, &r, Persistent, "3.5.1");
    let platform = Arc::new(platform_for(client, &r));
    let mut cluster = Cluster::new("demo", platform, etcd.clients.clone(), spec_state(&r))
        .await
        .expect("the cluster");

    let since = Instant::now();
    let mut phases = Vec::new();
    loop {
        let out = cluster.reconcile().await;
        let status = fake.get(&resource_path()).expect("the resource")["status"].clone();
        let degraded = condition(&fake, "Degraded");
        assert_ne!(
            degraded["status"], "True",
            "a planned scale-up read as trouble after {:?}: {degraded:#}",
            out.step
        );
        let phase = status["phase"].as_str().unwrap_or_default().to_string();
        assert!(
            ["Scaling", "Running"].contains(&phase.as_str()),
            "phase {phase} during a scale-up: {status:#}"
        );
        phases.push(phase);
        if out.step == Some(Step::Converged) && status["readyMembers"] == 4 {
            break;
        }
        // The kubelet's part: a pod the operator created gets its etcd.
        let pod_path = format!("{}/demo-3", collection("pods"));
        if let Some(pod) = fake
            .get(&pod_path)
            .filter(|p| p["status"]["podIP"].is_null())
        {
            let (_, ip) = etcd.join(&config_of(&pod), "3.5.1");
            let running = Seen(pod).ready().runs("3.5.1").ip(&ip.to_string());
            fake.change(&pod_path, &json!({"status": running.json()["status"]}));
        }
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "no scale-up within 60 s; phases {phases:?}, events {:#?}",
            fake.all(EVENTS)
        );
        tokio::time::sleep(
            out.next
                .clamp(Duration::from_millis(20), Duration::from_millis(500)),
        )
        .await;
    }
    assert!(phases.iter().any(|p| p == "Scaling"), "{phases:?}");

    // The Events, as POSTed, in the order they happened.
    let posts = fake
        .requests()
        .iter()
        .filter(|s| s.method == Method::POST && s.path == EVENTS)
        .count();
    let mut events: Vec<Value> = fake.all(EVENTS).into_iter().map(|(_, e)| e).collect();
    assert_eq!(posts, events.len(), "one POST per Event: {events:#?}");
    events.sort_by_key(|e| e["eventTime"].as_str().unwrap_or_default().to_string());
    for e in &events {
        assert_eq!(
            e["type"], "Normal",
            "no failure in a planned scale-up: {e:#}"
        );
        assert_eq!(e["regarding"]["kind"], "EtcdCluster", "{e:#}");
        assert_eq!(e["regarding"]["name"], "demo", "{e:#}");
    }
    let story: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or_default(),
                e["note"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let reasons: Vec<&str> = story.iter().map(|(r, _)| *r).collect();
    assert_eq!(
        reasons,
        ["ScalingUp", "MemberAdded", "MemberPromoted", "ScaledUp"],
        "{story:#?}"
    );
    assert_eq!(story[0].1, "scaling up from 3 to 4 members");
    assert_eq!(story[1].1, "member demo-3 added as a learner");
    assert!(story[2].1.contains("learner demo-3"), "{story:#?}");
    assert!(
        story[3]
            .1
            .starts_with("scaled up from 3 to 4 members: 4 of 4 members ready"),
        "{story:#?}"
    );
    drop(cluster);
    drop(etcd);
}
