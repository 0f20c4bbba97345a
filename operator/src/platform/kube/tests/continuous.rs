//! Continuous backups on Kubernetes, for real: a real etcd member behind
//! the fake API server; the platform applies the follower Deployment the
//! spec asks for, the stand-in kubelet runs its `backup-follow` (the
//! library's follower) on a folder standing in for the backup claim, and
//! delta segments appear there after writes; the status is read from the
//! follower's log; a follower stopped and started again resumes after the
//! last segment; the Deployment goes when the spec drops continuous.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::etcd_pods::EtcdPods;
use super::fake::Fake;
use super::fixtures::resource_from;
use super::kubelet::{DEPLOYMENTS, Kubelet};
use crate::backup::chain::{self, Chain};
use crate::backup::{BackupMeta, BackupStore, Location, Source};
use crate::crd::BackupStatus;
use crate::platform::Platform;
use crate::platform::kube::follow::{FOLLOW_CONTAINER, follower_name};
use crate::validate::ContinuousPolicy;

pub(super) fn spec(continuous: bool) -> Value {
    let mut spec = json!({
        "size": 1, "version": "3.5.1", "storage": {"policy": "Persistent"},
        "backup": {"interval": "1h", "maxBackups": 3},
    });
    if continuous {
        spec["backup"]["continuous"] = json!({"segmentInterval": "200ms"});
    }
    spec
}

/// The chain of `base` in the claim folder `claim`.
pub(super) fn chain_in(kubelet: &Kubelet, base: &BackupMeta) -> Chain {
    chain::read(&kubelet.claim("demo-backups").join("backups/demo"), base)
}

/// Waits (bounded) until the claim's chain of `base` holds `revision`.
pub(super) async fn wait_chain(kubelet: &Kubelet, base: &BackupMeta, revision: i64) -> Chain {
    let since = Instant::now();
    loop {
        let c = chain_in(kubelet, base);
        if c.last_revision() >= revision {
            return c;
        }
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "no segment up to revision {revision}: {} segments, last {}",
            c.segments.len(),
            c.last_revision()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Writes `n` keys named `prefix-i`; returns the last revision.
pub(super) async fn write(kv: &mut etcd_client::Client, prefix: &str, n: usize) -> i64 {
    let mut rev = 0;
    for i in 0..n {
        let r = kv
            .put(format!("{prefix}-{i}"), format!("v{i}"), None)
            .await
            .expect("a write");
        rev = r.header().map_or(rev, |h| h.revision());
    }
    rev
}

fn deployment(fake: &Fake) -> Option<Value> {
    fake.get(&format!("{DEPLOYMENTS}/{}", follower_name("demo")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_deployment_writes_segments_into_the_claim_and_resumes() {
    let etcd = EtcdPods::start("kube-follow", "3.5.1", 1).await;
    let mut kv = etcd_client::Client::connect([etcd.url(0)], None)
        .await
        .expect("a client");
    write(&mut kv, "before", 3).await;
    let on = resource_from(spec(true));
    let off = resource_from(spec(false));
    let (platform, fake, kubelet) = etcd.backup_platform(&on).await;
    let location = Location::of("demo", None);
    let source = Source {
        member: "demo-0",
        url: &etcd.configs[0].addr.client_url,
        tls: None,
    };
    let base = platform
        .backups()
        .save(&location, source)
        .await
        .expect("a full backup");

    // The Deployment as the spec asks: one replica, Recreate, owned, the
    // operator's image running backup-follow with the claim at /state.
    let d = deployment(&fake).expect("the follower Deployment");
    assert_eq!(d["metadata"]["ownerReferences"][0]["kind"], "EtcdCluster");
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(d["spec"]["strategy"]["type"], "Recreate");
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Always");
    let c = &pod["containers"][0];
    assert_eq!(c["name"], FOLLOW_CONTAINER);
    assert_eq!(c["image"], "etcd-operator:test");
    assert_eq!(c["args"][0], "backup-follow");
    assert_eq!(
        pod["volumes"][0]["persistentVolumeClaim"]["claimName"],
        "demo-backups"
    );
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/state");
    let selector = &d["spec"]["selector"]["matchLabels"];
    for (k, v) in selector.as_object().expect("labels") {
        assert_eq!(&d["spec"]["template"]["metadata"]["labels"][k], v);
    }
    // The backup Jobs prefer the follower's node (the claim is attached
    // there); the follower prefers nothing.
    assert!(pod["affinity"].is_null(), "{pod:#}");
    let save = kubelet.job("demo-save-").expect("the save Job");
    let preferred = &save["spec"]["template"]["spec"]["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        [0];
    assert_eq!(preferred["weight"], 100, "{save:#}");
    let term = &preferred["podAffinityTerm"];
    assert_eq!(term["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(&term["labelSelector"]["matchLabels"], selector);

    // Writes after the full backup reach the claim as segments.
    let first = write(&mut kv, "after", 20).await;
    let chain = wait_chain(&kubelet, &base, first).await;
    assert!(!chain.segments.is_empty());
    assert_eq!(chain.cut, None);

    // The status comes from the follower's log.
    let status = Arc::new(Mutex::new(BackupStatus::default()));
    let (_offer, candidates) = tokio::sync::watch::channel(Vec::new());
    let policy = ContinuousPolicy {
        segment_interval: Duration::from_millis(200),
        max_events: 10_000,
    };
    let reader = tokio::spawn(platform.backups().follow(
        policy,
        location.clone(),
        candidates,
        status.clone(),
        Arc::new(tokio::sync::Notify::new()),
    ));
    let since = Instant::now();
    loop {
        let seen = status.lock().expect("status").continuous.clone();
        if seen
            .as_ref()
            .is_some_and(|c| c.base == base.name && c.last_revision >= first)
        {
            break;
        }
        assert!(since.elapsed() < Duration::from_secs(30), "{seen:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    reader.abort();

    // The spec drops continuous: the Deployment goes (its follower stops);
    // writes meanwhile are not followed.
    platform
        .prepare("demo", &off, 1, true)
        .await
        .expect("prepared");
    assert!(deployment(&fake).is_none(), "deleted");
    let segments = chain_in(&kubelet, &base).segments.len();
    let second = write(&mut kv, "while-off", 5).await;
    // Then back on: a new follower resumes after the last segment, and
    // the chain holds every revision once, in order.
    platform
        .prepare("demo", &on, 1, true)
        .await
        .expect("prepared");
    assert!(deployment(&fake).is_some(), "applied again");
    let chain = wait_chain(&kubelet, &base, second).await;
    assert!(chain.segments.len() > segments, "new segments");
    assert_eq!(chain.cut, None);
    let revisions: Vec<i64> = chain
        .segments
        .iter()
        .flat_map(|s| s.revisions.iter().map(|r| r.revision))
        .collect();
    let expected: Vec<i64> = (base.revision + 1..=second).collect();
    assert_eq!(revisions, expected, "every revision once, in order");
    drop(kubelet);
    drop(etcd);
}
