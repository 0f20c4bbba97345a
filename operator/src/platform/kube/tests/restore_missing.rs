//! A restore that cannot find its source, on Kubernetes: a new cluster's
//! `spec.restore` names a backup of cluster `example` that is not in its
//! claim (backup Jobs run for real by the stand-in kubelet). The operator
//! says where it looked in the user's
//! terms (the claim and its folder, never a path inside the Job's pod),
//! lists what is there, marks the cluster Failed with a reason of its own,
//! says it once as a Warning Event, creates nothing, and looks again only
//! when the spec changes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::fake::fake;
use super::fixtures::resource_from;
use super::kubelet::Kubelet;
use super::rbac::collection;
use super::trouble::{condition, put_resource, resource_path};
use crate::controller::Cluster;
use crate::controller::kube::spec_state;
use crate::crd::EtcdCluster;
use crate::etcd::Clients;
use crate::plan::{Step, Wait};
use crate::platform::kube::KubePlatform;
use crate::platform::kube::pod::DEFAULT_IMAGE;

const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/default/events/";

fn restoring(backup: &str) -> EtcdCluster {
    resource_from(json!({
        "size": 1, "version": "3.5.1", "storage": {"policy": "Persistent"},
        "restore": {"backup": backup, "cluster": "example"},
    }))
}

fn warnings(fake: &super::fake::Fake) -> Vec<Value> {
    let events = fake.all(EVENTS).into_iter().map(|(_, e)| e);
    events.filter(|e| e["type"] == "Warning").collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_whose_backup_is_not_there_says_where_it_looked_and_waits_for_the_spec() {
    let missing = "example.387cb4ea-20261206-000000-000";
    let r = restoring(missing);
    let (client, fake) = fake();
    let kubelet = Kubelet::start(fake.clone(), BTreeMap::new());
    put_resource(&fake, &r);
    // example's claim is there, without that backup.
    fake.put(
        &collection("persistentvolumeclaims"),
        json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "example-backups", "namespace": "default"},
            "status": {"phase": "Bound"},
        }),
    );
    let platform = KubePlatform::new(client, "default", DEFAULT_IMAGE)
        .with_backup_image(Some("etcd-operator:test".into()));
    let platform = Arc::new(platform);
    let clients = Arc::new(Clients::new(Duration::from_millis(300)));
    let mut cluster = Cluster::new("demo", platform.clone(), clients, spec_state(&r))
        .await
        .expect("the cluster");
    let out = cluster.reconcile().await;
    assert_eq!(out.step, Some(Step::Bootstrap), "the restore is tried");
    let jobs = kubelet.ran().len();
    assert!(jobs > 0, "the backup was looked for by a Job");
    // The passes after it wait: said in status, no Job, no member.
    for _ in 0..3 {
        let out = cluster.reconcile().await;
        assert!(
            matches!(out.step, Some(Step::Wait(Wait::RestoreNotFound { .. }))),
            "{out:?}"
        );
        assert!(out.next >= Duration::from_secs(1), "no busy retry: {out:?}");
    }
    assert_eq!(kubelet.ran().len(), jobs, "no Job after the refusal");
    let status = fake.get(&resource_path()).expect("the resource")["status"].clone();
    assert_eq!(status["phase"], "Failed", "{status:#}");
    let degraded = condition(&fake, "Degraded");
    assert_eq!(degraded["status"], "True");
    assert_eq!(degraded["reason"], "RestoreSourceNotFound");
    let message = degraded["message"].as_str().expect("a message");
    for want in [
        format!("spec.restore.backup: no backup \"{missing}\""),
        "in persistentvolumeclaim example-backups (folder backups/example)".into(),
        "(backups there: none)".into(),
        "looked for again at once".into(),
    ] {
        assert!(message.contains(&want), "{want:?} not in {message}");
    }
    assert!(
        !message.contains("/state"),
        "a path in the Job's pod: {message}"
    );
    assert_eq!(condition(&fake, "Progressing")["status"], "False");
    assert!(
        !fake.has(&format!("{}/demo-0", collection("pods")))
            && !fake.has(&format!(
                "{}/demo-0-data",
                collection("persistentvolumeclaims")
            )),
        "no member is created"
    );
    let refused = warnings(&fake);
    assert_eq!(refused.len(), 1, "said once: {refused:#?}");
    assert_eq!(refused[0]["reason"], "RestoreRefused");
    assert!(
        refused[0]["note"]
            .as_str()
            .is_some_and(|n| n.contains("persistentvolumeclaim example-backups")),
        "{:#}",
        refused[0]
    );

    // Another spec: looked for again at once (and refused again, saying so).
    let other = "example.387cb4ea-20261207-000000-000";
    cluster
        .set_spec(spec_state(&restoring(other)))
        .await
        .expect("the spec");
    let out = cluster.reconcile().await;
    assert_eq!(out.step, Some(Step::Bootstrap));
    assert!(kubelet.ran().len() > jobs, "looked for again");
    let out = cluster.reconcile().await;
    assert!(
        matches!(&out.step, Some(Step::Wait(Wait::RestoreNotFound { message })) if message.contains(other)),
        "{out:?}"
    );
    assert_eq!(warnings(&fake).len(), 2, "the new refusal is said");
    drop(cluster);
    drop(kubelet);
}
