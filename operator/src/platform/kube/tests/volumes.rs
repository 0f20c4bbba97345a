//! `spec.storage.size` grown: the claims are patched one member at a time,
//! each once the previous one has its new size, no pod restarted; a class
//! that cannot grow, and a smaller size, are said in status and nothing
//! is patched. Real etcd 3.5.1 behind the fake API server, the test
//! standing in for the storage driver (a claim's capacity grows when the
//! test says so).

use std::sync::Arc;

use http::Method;
use serde_json::{Value, json};

use super::etcd_pods::EtcdPods;
use super::fake::{Fake, fake};
use super::fixtures::{Seen, platform_for, resource_from};
use super::rbac::collection;
use super::trouble::{condition, put_record, put_resource};
use crate::controller::Cluster;
use crate::controller::kube::spec_state;
use crate::crd::StoragePolicy;
use crate::plan::{Step, Wait};
use crate::platform::kube::KubePlatform;

/// Where the fake server keeps storage classes (cluster-scoped).
const CLASSES: &str = "/apis/storage.k8s.io/v1/namespaces//storageclasses";

fn claim_path(member: &str) -> String {
    format!("{}/{member}-data", collection("persistentvolumeclaims"))
}

/// Members of `spec` at 3.5.1 whose claims (of class `fast`, which may
/// grow when `expands`) ask and have 5Gi.
async fn cluster(spec: Value, expands: bool) -> (EtcdPods, Fake, Cluster<KubePlatform>) {
    let etcd = EtcdPods::start("kube-volumes", "3.5.1", 3).await;
    let (client, fake) = fake();
    let r = resource_from(spec);
    put_resource(&fake, &r);
    put_record(
        &fake,
        &r,
        etcd.configs.iter().map(|c| c.addr.clone()).collect(),
    );
    fake.put(
        CLASSES,
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "fast"}, "provisioner": "example.com/csi",
            "allowVolumeExpansion": expands}),
    );
    for (i, c) in etcd.configs.iter().enumerate() {
        let pod = Seen::pod_of(c, StoragePolicy::Persistent)
            .ready()
            .runs("3.5.1");
        fake.put(&collection("pods"), pod.ip(&etcd.ips[i].to_string()).json());
        let mut claim = Seen::claim_of(c).started().json();
        claim["spec"]["storageClassName"] = json!("fast");
        claim["status"]["capacity"] = json!({"storage": "5Gi"});
        fake.put(&collection("persistentvolumeclaims"), claim);
    }
    let platform = Arc::new(platform_for(client, &r));
    let cluster = Cluster::new("demo", platform, etcd.clients.clone(), spec_state(&r))
        .await
        .expect("the cluster");
    (etcd, fake, cluster)
}

/// Writes other than status and marks: what the operator changed.
fn writes(fake: &Fake, under: &str) -> Vec<String> {
    fake.requests()
        .into_iter()
        .filter(|s| s.path.starts_with(under) && s.method != Method::GET)
        .map(|s| format!("{} {}", s.method, s.path))
        .collect()
}

#[tokio::test]
async fn a_larger_size_grows_the_claims_one_member_at_a_time_in_place() {
    let spec = json!({"size": 3, "version": "3.5.1", "storage": {"size": "10Gi"}});
    let (etcd, fake, mut cluster) = cluster(spec, true).await;
    for member in ["demo-0", "demo-1", "demo-2"] {
        let out = cluster.reconcile().await;
        assert_eq!(
            out.step,
            Some(Step::ExpandVolume {
                member: member.into(),
                to: "10Gi".into()
            })
        );
        let claim = fake.get(&claim_path(member)).expect("its claim");
        assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "10Gi");
        // The driver has not grown it yet: the next waits.
        let out = cluster.reconcile().await;
        assert_eq!(
            out.step,
            Some(Step::Wait(Wait::VolumeGrowing {
                member: member.into(),
                to: "10Gi".into()
            }))
        );
        let progressing = condition(&fake, "Progressing");
        assert_eq!(progressing["reason"], "VolumeGrowing", "{progressing:#}");
        assert_eq!(condition(&fake, "Degraded")["status"], "False");
        fake.change(
            &claim_path(member),
            &json!({"status": {"capacity": {"storage": "10Gi"}}}),
        );
    }
    assert_eq!(cluster.reconcile().await.step, Some(Step::Converged));
    let claims = writes(&fake, &collection("persistentvolumeclaims"));
    assert_eq!(claims.len(), 3, "one patch per claim: {claims:?}");
    assert!(
        writes(&fake, &collection("pods")).is_empty(),
        "no pod touched"
    );
    let resource = fake
        .get(&super::trouble::resource_path())
        .expect("resource");
    for m in resource["status"]["members"]
        .as_array()
        .into_iter()
        .flatten()
    {
        assert_eq!(m["volumeSize"], "10Gi", "{m:#}");
        assert_eq!(m["storageClassName"], "fast", "{m:#}");
    }
    drop(etcd);
}

#[tokio::test]
async fn a_class_that_cannot_grow_is_said_and_nothing_is_patched() {
    let spec = json!({"size": 3, "version": "3.5.1", "storage": {"size": "10Gi"}});
    let (etcd, fake, mut cluster) = cluster(spec, false).await;
    let out = cluster.reconcile().await;
    assert!(
        matches!(out.step, Some(Step::Wait(Wait::VolumeNotExpandable { .. }))),
        "{out:?}"
    );
    let degraded = condition(&fake, "Degraded");
    assert_eq!(degraded["status"], "True");
    assert_eq!(degraded["reason"], "VolumeNotExpandable");
    let message = degraded["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("storage class fast does not allow volume expansion")
            && message.contains("demo-0, demo-1, demo-2"),
        "{message}"
    );
    assert!(writes(&fake, &collection("persistentvolumeclaims")).is_empty());
    drop(etcd);
}

#[tokio::test]
async fn a_smaller_size_is_refused_by_name() {
    let spec = json!({
        "size": 3, "version": "3.5.1", "storage": {"size": "4608Mi"},
    });
    let (etcd, fake, mut cluster) = cluster(spec, true).await;
    let out = cluster.reconcile().await;
    let degraded = condition(&fake, "Degraded");
    assert_eq!(
        degraded["reason"], "VolumeShrinkRefused",
        "{degraded:#} {out:?}"
    );
    assert!(
        matches!(out.step, Some(Step::Wait(Wait::VolumeShrink { .. }))),
        "{out:?}"
    );
    let message = degraded["message"].as_str().unwrap_or_default();
    assert!(
        message
            .starts_with("spec.storage.size: 4608Mi is smaller than member demo-0's volume (5Gi)"),
        "{message}"
    );
    assert!(writes(&fake, &collection("persistentvolumeclaims")).is_empty());
    drop(etcd);
}
