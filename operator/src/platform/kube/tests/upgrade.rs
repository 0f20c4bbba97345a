//! A rolling upgrade moves one member at a time also where the kubelet
//! swaps a container in place (emptyDir members): real etcd 3.4.23 behind
//! the fake API server, the operator patches one pod's image, and until
//! that member's container is the new one and etcd itself reports the new
//! version, the next pass waits for it instead of moving the next member.
//! (Seen on a real API server: all three members, leader included, were
//! moved within 140 ms, because the pod's annotation already said 3.5.1
//! while the old container still answered.)

use std::sync::Arc;

use serde_json::json;

use super::etcd_pods::EtcdPods;
use super::fake::fake;
use super::fixtures::{platform_for, resource};
use super::rbac::collection;
use super::trouble::condition;
use crate::controller::Cluster;
use crate::controller::kube::spec_state;
use crate::crd::StoragePolicy::Ephemeral;
use crate::plan::{Step, Wait};
use crate::version::Version;

fn index(member: &str) -> usize {
    let n = member.rsplit('-').next().and_then(|n| n.parse().ok());
    n.unwrap_or_else(|| panic!("{member} is not demo-N"))
}

#[tokio::test]
async fn an_in_place_upgrade_waits_for_the_new_container_and_etcd_to_report_it() {
    let mut etcd = EtcdPods::start("kube-upgrade", "3.4.23", 3).await;
    let (client, fake) = fake();
    let r = resource(3, "3.5.1", Ephemeral);
    etcd.seat(&fake, &r, Ephemeral, "3.4.23");
    let platform = Arc::new(platform_for(client, &r));
    let clients = etcd.clients.clone();
    let mut cluster = Cluster::new("demo", platform, clients, spec_state(&r))
        .await
        .expect("the cluster");

    let out = cluster.reconcile().await;
    let Some(Step::Upgrade { member: first, to }) = out.step.clone() else {
        panic!("expected an upgrade, got {out:?}");
    };
    assert_eq!(to, Version::new(3, 5, 1));
    let pod_path = format!("{}/{first}", collection("pods"));
    let pod = fake.get(&pod_path).expect("its pod");
    assert_eq!(
        pod["spec"]["containers"][0]["image"], "quay.io/coreos/etcd:v3.5.1",
        "the image is changed in place"
    );

    // The kubelet has not swapped the container: the old etcd answers.
    let out = cluster.reconcile().await;
    let waiting = Step::Wait(Wait::MemberNotReady {
        member: first.clone(),
    });
    assert_eq!(out.step, Some(waiting.clone()), "no second member moves");
    // A planned upgrade on its way: progress that says what it waits for,
    // not trouble.
    let progressing = condition(&fake, "Progressing");
    assert_eq!(
        progressing["reason"], "WaitingForUpgradedMember",
        "{progressing:#}"
    );
    assert!(
        progressing["message"]
            .as_str()
            .is_some_and(|m| m.contains("the kubelet is replacing its container")),
        "{progressing:#}"
    );
    let degraded = condition(&fake, "Degraded");
    assert_eq!(degraded["status"], "False", "{degraded:#}");
    let phase = fake
        .get(&super::trouble::resource_path())
        .map(|r| r["status"]["phase"].clone());
    assert_eq!(phase, Some(json!("Upgrading")));

    // The pod's status says the new image, but etcd still answers as the
    // old version (a status ahead of the process): still not moved.
    let status = json!({"status": {"containerStatuses": [{
        "name": "etcd", "image": "quay.io/coreos/etcd:v3.5.1", "imageID": "",
        "ready": true, "restartCount": 1,
        "state": {"running": {"startedAt": "2026-01-01T00:01:00Z"}},
    }]}});
    fake.change(&pod_path, &status);
    let out = cluster.reconcile().await;
    assert_eq!(out.step, Some(waiting), "etcd has not reported 3.5.1");
    let progressing = condition(&fake, "Progressing");
    assert!(
        progressing["message"]
            .as_str()
            .is_some_and(|m| m.contains("etcd answers as 3.4.23, not yet as 3.5.1")),
        "{progressing:#}"
    );
    assert_eq!(condition(&fake, "Degraded")["status"], "False");

    // The new etcd runs on the member's data: now the next member moves.
    etcd.restart(index(&first), "3.5.1").await;
    let out = cluster.reconcile().await;
    match &out.step {
        Some(Step::Upgrade { member, .. }) => assert_ne!(member, &first),
        other => panic!("expected the next member's upgrade, got {other:?}"),
    }
    drop(etcd);
}
