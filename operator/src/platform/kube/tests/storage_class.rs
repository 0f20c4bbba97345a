//! `spec.storage.storageClassName` changed on a running cluster: a claim's
//! class cannot change, so members move one at a time, a new member on a
//! claim of the new class added and promoted before one on the old class
//! is removed; the cluster never has fewer voters than its size, and it
//! all reads as progress. Real etcd behind the fake API server, this test
//! starting each new member's etcd where a kubelet would start its pod.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::etcd_pods::EtcdPods;
use super::fake::fake;
use super::fixtures::{Seen, platform_for, resource_from};
use super::rbac::collection;
use super::trouble::{condition, resource_path};
use crate::controller::Cluster;
use crate::crd::StoragePolicy::Persistent;
use crate::member::MemberConfig;
use crate::plan::{RemoveWhy, Step};
use crate::platform::kube::ANNOTATION_CONFIG;

fn config_of(pod: &Value) -> Option<MemberConfig> {
    let json = pod["metadata"]["annotations"][ANNOTATION_CONFIG].as_str()?;
    serde_json::from_str(json).ok()
}

/// The class of each member's claim, by member.
fn classes(fake: &super::fake::Fake) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = fake
        .all(&collection("persistentvolumeclaims"))
        .into_iter()
        .map(|(_, c)| {
            let name = c["metadata"]["name"].as_str().unwrap_or_default();
            let class = c["spec"]["storageClassName"].as_str().unwrap_or_default();
            (
                name.trim_end_matches("-data").to_string(),
                class.to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_storage_class_moves_members_one_at_a_time_adding_before_removing() {
    let mut etcd = EtcdPods::start_resolving("kube-storage-class", "3.5.1", 3, 6).await;
    let (client, fake) = fake();
    let r = resource_from(json!({
        "size": 3, "version": "3.5.1", "storage": {"storageClassName": "ssd"},
    }));
    etcd.seat(&fake, &r, Persistent, "3.5.1");
    // The claims were made in another class.
    for c in &etcd.configs {
        let mut claim = Seen::claim_of(c).started().json();
        claim["spec"]["storageClassName"] = json!("hdd");
        fake.put(&collection("persistentvolumeclaims"), claim);
    }
    let platform = Arc::new(platform_for(client, &r));
    let state = crate::controller::kube::spec_state(&r);
    let mut cluster = Cluster::new("demo", platform, etcd.clients.clone(), state)
        .await
        .expect("the cluster");

    let since = Instant::now();
    let mut steps = Vec::new();
    let mut phases = Vec::new();
    loop {
        let out = cluster.reconcile().await;
        let status = fake.get(&resource_path()).expect("the resource")["status"].clone();
        let degraded = condition(&fake, "Degraded");
        assert_ne!(
            degraded["status"], "True",
            "a planned move read as trouble after {:?}: {degraded:#}",
            out.step
        );
        let phase = status["phase"].as_str().unwrap_or_default().to_string();
        let reason = condition(&fake, "Progressing")["reason"].clone();
        if phases.last() != Some(&(phase.clone(), reason.clone())) {
            phases.push((phase, reason));
        }
        if let Some(step) = &out.step
            && !matches!(step, Step::Wait(_))
        {
            steps.push(step.clone());
        }
        if out.step == Some(Step::Converged) && status["readyMembers"] == 3 {
            break;
        }
        // The kubelet's part: a pod the operator created gets its etcd.
        for (path, pod) in fake.all(&collection("pods")) {
            if !pod["status"]["podIP"].is_null() {
                continue;
            }
            let Some(config) = config_of(&pod) else {
                continue;
            };
            let (_, ip) = etcd.join(&config, "3.5.1");
            let running = Seen(pod).ready().runs("3.5.1").ip(&ip.to_string());
            fake.change(&path, &json!({"status": running.json()["status"]}));
        }
        assert!(
            since.elapsed() < Duration::from_secs(90),
            "not moved within 90 s; steps {steps:#?}, claims {:?}",
            classes(&fake)
        );
        tokio::time::sleep(
            out.next
                .clamp(Duration::from_millis(20), Duration::from_millis(500)),
        )
        .await;
    }
    // Every member on the new class, the old ones gone with their claims.
    let now = classes(&fake);
    assert_eq!(now.len(), 3, "{now:?}");
    assert!(now.iter().all(|(_, c)| c == "ssd"), "{now:?}");
    // Add, promote, remove, three times; never two members out at once.
    // (An add etcd refuses for now, for 5 s after a member joined, is
    // asked again: one add.)
    let mut membership: Vec<&str> = steps
        .iter()
        .filter_map(|s| match s {
            Step::AddLearner => Some("add"),
            Step::Promote { .. } => Some("promote"),
            Step::Remove {
                why: RemoveWhy::StorageClass,
                ..
            } => Some("remove"),
            Step::Remove { .. } => Some("other removal"),
            _ => None,
        })
        .collect();
    membership.dedup();
    // Read as the move it is: never a scale-up, nor a repair. (The
    // leader's handover before its removal, one voter over the size, reads
    // as a scale-down's: status cannot tell the two apart.)
    assert!(
        phases
            .iter()
            .all(|(p, r)| ["Upgrading", "Running"].contains(&p.as_str())
                || (p == "Scaling" && r == "HandingOverLeadership")),
        "{phases:#?}"
    );
    assert!(
        phases.iter().any(|(_, r)| r == "MovingToStorageClass"),
        "{phases:#?}"
    );
    assert_eq!(
        membership,
        ["add", "promote", "remove"].repeat(3),
        "{steps:#?}"
    );
    drop(cluster);
    drop(etcd);
}
