//! The operator reaches members at their pod IPs, with real etcd behind
//! the fake API server: three etcd processes on loopback addresses (the
//! "pod IPs"), members whose recorded client URLs are cluster DNS names
//! that do not resolve here, and a third member whose pod the kubelet keeps
//! restarting. One pass finds the two healthy members through their IPs
//! and publishes their DNS client URLs; with quorum kept, the
//! crash-looping member is removed and its pod and claim deleted, and the
//! next pass adds its replacement.

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::fake::fake;
use super::fixtures::{Seen, platform_for, resource};
use super::rbac::collection;
use super::trouble::{FATAL, condition, put_record, put_resource, resource_path};
use crate::controller::Cluster;
use crate::controller::kube::spec_state;
use crate::crd::StoragePolicy::Persistent;
use crate::etcd::Clients;
use crate::member::{InitialState, MemberAddr, MemberConfig};
use crate::plan::{RemoveWhy, Step};
use crate::testing::{etcd_binary, free_loopback};
use crate::version::Version;

/// Member `name` at `ip`: peers at the IP, clients told the DNS name.
fn config(name: &str, ip: Ipv4Addr, initial_cluster: &str) -> MemberConfig {
    MemberConfig {
        addr: MemberAddr {
            name: name.into(),
            peer_url: format!("http://{ip}:2380"),
            client_url: format!("http://{name}.demo.default.svc:2379"),
        },
        version: Version::new(3, 5, 1),
        initial_cluster: initial_cluster.into(),
        initial_state: InitialState::New,
        token: "demo-token".into(),
        bootstrap: true,
        tls: Default::default(),
        tuning: Default::default(),
        backend: Default::default(),
        force_new_cluster: false,
    }
}

fn spawn(etcd: &Path, c: &MemberConfig, ip: Ipv4Addr, dir: &Path) -> tokio::process::Child {
    let log = std::fs::File::create(dir.join(format!("{}.log", c.addr.name))).expect("a log");
    let data = dir.join(&c.addr.name);
    let client = format!("http://{ip}:2379");
    tokio::process::Command::new(etcd)
        .args(["--name", &c.addr.name])
        .arg("--data-dir")
        .arg(&data)
        .args(["--listen-peer-urls", &c.addr.peer_url])
        .args(["--initial-advertise-peer-urls", &c.addr.peer_url])
        .args(["--listen-client-urls", &client])
        .args(["--advertise-client-urls", &client])
        .args(["--initial-cluster", &c.initial_cluster])
        .args(["--initial-cluster-state", "new"])
        .args(["--initial-cluster-token", &c.token])
        .args(["--logger", "zap", "--log-outputs", "stderr"])
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("etcd starts")
}

async fn wait_healthy(clients: &Clients, urls: &[String]) {
    let since = Instant::now();
    loop {
        let mut all = true;
        for url in urls {
            all &= clients.status(url).await.is_ok_and(|s| s.leader != 0);
        }
        if all {
            return;
        }
        assert!(
            since.elapsed() < Duration::from_secs(30),
            "etcd did not form"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn members_are_reached_at_pod_ips_and_a_crash_loop_is_replaced() {
    let etcd = etcd_binary("3.5.1");
    let dir = tempfile::tempdir().expect("a temporary folder");
    let mut taken = HashSet::new();
    let ips: Vec<Ipv4Addr> = (0..3)
        .map(|i| {
            let ip = free_loopback(&format!("kube-pod-ip/demo-{i}"), &taken);
            taken.insert(ip);
            ip
        })
        .collect();
    let initial_cluster = (0..3)
        .map(|i| format!("demo-{i}=http://{}:2380", ips[i]))
        .collect::<Vec<_>>()
        .join(",");
    let configs: Vec<MemberConfig> = (0..3)
        .map(|i| config(&format!("demo-{i}"), ips[i], &initial_cluster))
        .collect();
    let mut procs: Vec<_> = (0..3)
        .map(|i| spawn(&etcd, &configs[i], ips[i], dir.path()))
        .collect();
    let clients = Arc::new(Clients::new(Duration::from_secs(1)));
    let ip_urls: Vec<String> = ips.iter().map(|ip| format!("http://{ip}:2379")).collect();
    wait_healthy(&clients, &ip_urls).await;
    // demo-2 has run (etcd knows its name) and now fails at every start.
    procs[2].kill().await.expect("demo-2 killed");

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
        assert!(
            matches!(&again.step, Some(Step::Remove { member, .. }) if member == "demo-2"),
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
    // try takes a new name).
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
    assert!(fake.has(&format!("{}/{name}", collection("pods"))));
    assert!(fake.has(&format!(
        "{}/{name}-data",
        collection("persistentvolumeclaims")
    )));
    drop(procs);
}
