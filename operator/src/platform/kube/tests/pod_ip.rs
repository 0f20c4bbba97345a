//! The operator reaches members at their pod IPs, with real etcd behind
//! the fake API server: three etcd processes on loopback addresses (the
//! "pod IPs"), members whose recorded client URLs are cluster DNS names
//! that do not resolve here, and a third member whose pod the kubelet keeps
//! restarting. One pass finds the two healthy members through their IPs
//! and publishes their DNS client URLs; with quorum kept, the
//! crash-looping member is removed and its pod and claim deleted, and the
//! next pass adds its replacement.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::etcd_pods::EtcdPods;
use super::fake::fake;
use super::fixtures::{Seen, platform_for, resource};
use super::rbac::collection;
use super::trouble::{FATAL, condition, put_record, put_resource, resource_path};
use crate::controller::Cluster;
use crate::controller::kube::spec_state;
use crate::crd::StoragePolicy::Persistent;
use crate::plan::{RemoveWhy, Step, Wait};

#[tokio::test]
async fn members_are_reached_at_pod_ips_and_a_crash_loop_is_replaced() {
    let mut etcd = EtcdPods::start("kube-pod-ip", "3.5.1", 3).await;
    let (ips, configs) = (etcd.ips.clone(), etcd.configs.clone());
    let clients = etcd.clients.clone();
    let ip_urls: Vec<String> = (0..3).map(|i| etcd.url(i)).collect();
    // demo-2 has run (etcd knows its name) and now fails at every start.
    etcd.kill(2).await;

    let (client, fake) = fake();
    let r = resource(3, "3.5.1", Persistent);
    put_resource(&fake, &r);
    put_record(&fake, &r, configs.iter().map(|c| c.addr.clone()).collect());
    for (i, c) in configs.iter().enumerate() {
        let pod = Seen::pod_of(c, Persistent);
        let pod = if i < 2 {
            pod.ready().ip(&ips[i].to_string())
        } else {
            pod.crash_loop(3, 1, 1, FATAL).ip(&ips[i].to_string())
        };
        fake.put(&collection("pods"), pod.json());
        let claim = Seen::claim_of(c).started();
        fake.put(&collection("persistentvolumeclaims"), claim.json());
    }

    let platform = Arc::new(platform_for(client, &r));
    let mut cluster = Cluster::new("demo", platform, clients.clone(), spec_state(&r))
        .await
        .expect("the cluster");
    let out = cluster.reconcile().await;
    let Some(Step::Remove { member, why, .. }) = &out.step else {
        let status = fake.get(&resource_path()).map(|r| r["status"].clone());
        panic!("expected a removal, got {:?}; status {status:#?}", out.step);
    };
    assert_eq!((member.as_str(), *why), ("demo-2", RemoveWhy::DataLost));

    // Found through the pod IPs; published with the DNS names.
    let published = fake.get(&resource_path()).expect("the resource");
    let members = published["status"]["members"].as_array().expect("members");
    for (i, m) in members.iter().enumerate() {
        let name = format!("demo-{i}");
        assert_eq!(m["name"], name.as_str());
        let dns = format!("http://{name}.demo.default.svc:2379");
        assert_eq!(m["clientURL"], dns.as_str(), "{m:#}");
        assert_eq!(m["ready"], i < 2, "{m:#}");
    }
    assert!(
        published["status"]["leader"].is_string(),
        "a leader was found"
    );
    let degraded = condition(&fake, "Degraded");
    let message = degraded["message"].as_str().expect("a message");
    assert!(
        message.contains(
            "member demo-2: CrashLoopBackOff: restarted 3 time(s), last exit code 1: discovery \
             failed: member 8e9e05c52164694d has already been bootstrapped"
        ),
        "{message}"
    );
    // Removed from etcd, its pod and claim deleted (etcd refuses a removal
    // for a few seconds after members connected: passes retry).
    let since = Instant::now();
    while fake.has(&format!("{}/demo-2", collection("pods"))) {
        assert!(
            since.elapsed() < Duration::from_secs(20),
            "demo-2 not removed: {:#}",
            condition(&fake, "Degraded")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let again = cluster.reconcile().await;
        // On a loaded machine a healthy member's status call may time out
        // for one pass: the plan then waits for it, which is right too.
        assert!(
            matches!(&again.step, Some(Step::Remove { member, .. }) if member == "demo-2")
                || matches!(&again.step, Some(Step::Wait(Wait::MemberNotReady { member })) if member != "demo-2"),
            "{again:?}"
        );
    }
    let listed = clients
        .member_list(&ip_urls[0])
        .await
        .expect("a member list");
    let names: Vec<&str> = listed.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(!names.contains(&"demo-2"), "{names:?}");
    assert!(!fake.has(&format!("{}/demo-2", collection("pods"))));
    assert!(!fake.has(&format!(
        "{}/demo-2-data",
        collection("persistentvolumeclaims")
    )));

    // Next: its replacement is added as a learner, with a pod and claim
    // (etcd refuses membership changes for a few seconds after one; every
    // try keeps the name taken first: demo-3).
    let since = Instant::now();
    let learner = loop {
        let out = cluster.reconcile().await;
        let listed = clients
            .member_list(&ip_urls[0])
            .await
            .expect("a member list");
        if let Some(l) = listed.into_iter().find(|m| m.is_learner) {
            break l;
        }
        assert_eq!(out.step, Some(Step::AddLearner));
        assert!(
            since.elapsed() < Duration::from_secs(20),
            "no replacement: {:#}",
            condition(&fake, "Degraded")
        );
        tokio::time::sleep(out.next).await;
    };
    let peer = learner.peer_urls.first().expect("a peer URL");
    let name = peer
        .strip_prefix("http://")
        .and_then(|p| p.strip_suffix(".demo.default.svc:2380"))
        .unwrap_or_else(|| panic!("{peer}: the replacement is named like every pod"));
    assert_eq!(
        name, "demo-3",
        "one name per add, however often etcd refused it"
    );
    assert!(fake.has(&format!("{}/{name}", collection("pods"))));
    assert!(fake.has(&format!(
        "{}/{name}-data",
        collection("persistentvolumeclaims")
    )));
    drop(etcd);
}
