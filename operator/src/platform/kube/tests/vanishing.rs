//! A member whose emptyDir pod was just deleted still answers for a
//! moment (the kubelet stops its container after the pod object is gone):
//! the operator replaces it and says so, and never tells the user to
//! remove it by hand. (Seen on a real API server: for about a second the
//! status said "etcd lists member ..., which the operator does not run;
//! remove it with etcdctl member remove ...".)

use std::sync::Arc;

use super::etcd_pods::EtcdPods;
use super::fake::fake;
use super::fixtures::{Seen, platform_for, resource};
use super::rbac::collection;
use super::trouble::{put_record, put_resource, resource_path};
use crate::controller::Cluster;
use crate::controller::kube::spec_state;
use crate::crd::StoragePolicy::Ephemeral;
use crate::plan::{RemoveWhy, Step};

#[tokio::test]
async fn a_member_whose_pod_is_gone_is_replaced_not_left_to_the_user() {
    let etcd = EtcdPods::start("kube-vanishing", "3.5.1", 3).await;
    let (client, fake) = fake();
    let r = resource(3, "3.5.1", Ephemeral);
    put_resource(&fake, &r);
    put_record(
        &fake,
        &r,
        etcd.configs.iter().map(|c| c.addr.clone()).collect(),
    );
    // demo-2's pod is deleted; its etcd still runs.
    for i in 0..2 {
        let pod = Seen::pod_of(&etcd.configs[i], Ephemeral)
            .ready()
            .runs("3.5.1");
        let pod = pod.started().ip(&etcd.ips[i].to_string());
        fake.put(&collection("pods"), pod.json());
    }
    let platform = Arc::new(platform_for(client, &r));
    let mut cluster = Cluster::new("demo", platform, etcd.clients.clone(), spec_state(&r))
        .await
        .expect("the cluster");
    let out = cluster.reconcile().await;
    match &out.step {
        Some(Step::Remove { member, why, .. }) => {
            assert_eq!(
                (member.as_str(), *why),
                ("demo-2", RemoveWhy::NotOnPlatform)
            );
        }
        other => panic!("expected demo-2's removal, got {other:?}"),
    }
    let status = fake.get(&resource_path()).expect("the resource")["status"].clone();
    let text = status.to_string();
    assert!(!text.contains("etcdctl member remove"), "{status:#}");
    assert!(text.contains("remove member demo-2"), "{status:#}");
    drop(etcd);
}
