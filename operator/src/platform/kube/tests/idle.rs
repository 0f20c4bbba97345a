//! What an idle cluster costs the API server: the controller (`run`, the
//! operator's own loop, its watches included; no leader election, so no
//! Lease renewals) against the fake API server, with real etcd behind
//! pods that are all ready, counting the requests it makes once the
//! cluster has converged.

use std::collections::BTreeMap;
use std::time::Duration;

use http::Method;

use super::etcd_pods::EtcdPods;
use super::fake::{Fake, Seen as Request, Target, fake};
use super::fixtures::{Seen, resource};
use super::rbac::collection;
use super::trouble::{put_record, put_resource, resource_path};
use crate::controller::kube::{Options, run};
use crate::crd::StoragePolicy::Persistent;
use crate::platform::kube::pod::DEFAULT_IMAGE;

/// A converged cluster of 3 ready members of `version` in the fake API
/// server, its etcd real.
async fn idle_cluster(seed: &str, version: &str) -> (EtcdPods, kube::Client, Fake) {
    let etcd = EtcdPods::start(seed, version, 3).await;
    let (client, fake) = fake();
    let r = resource(3, version, Persistent);
    put_resource(&fake, &r);
    put_record(
        &fake,
        &r,
        etcd.configs.iter().map(|c| c.addr.clone()).collect(),
    );
    for (i, c) in etcd.configs.iter().enumerate() {
        let pod = Seen::pod_of(c, Persistent).ready().runs(version);
        let pod = pod.started().ip(&etcd.ips[i].to_string());
        fake.put(&collection("pods"), pod.json());
        fake.put(
            &collection("persistentvolumeclaims"),
            Seen::claim_of(c).started().json(),
        );
    }
    (etcd, client, fake)
}

fn options() -> Options {
    Options {
        namespace: None,
        image: DEFAULT_IMAGE.into(),
        backup_image: None,
        handover: true,
        metrics: Default::default(),
        health: Default::default(),
    }
}

/// `METHOD resource[/sub] [watch]`, for counting.
fn kind(r: &Request) -> String {
    let what = Target::parse(&r.path).map_or(r.path.clone(), |t| match (&t.name, &t.sub) {
        (Some(_), Some(sub)) => format!("{}/{sub}", t.resource),
        (Some(_), None) => format!("{} (one)", t.resource),
        (None, _) => t.resource,
    });
    let watch = r.query.get("watch").is_some_and(|w| w == "true");
    let what = if watch { format!("{what} watch") } else { what };
    format!("{} {what}", r.method)
}

/// Whether the published status says all 3 members are ready.
fn converged(fake: &Fake) -> bool {
    fake.get(&resource_path())
        .is_some_and(|r| r["status"]["phase"] == "Running" && r["status"]["readyMembers"] == 3)
}

/// The measurement (`KUBE_IDLE_SECS`, default 60): the requests an idle
/// cluster costs in that time, by kind, printed. Not a test (it takes a
/// minute and judges nothing): `cargo nextest run -p etcd-operator --lib
/// --run-ignored only -E 'test(idle_api_requests_measured)' --no-capture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement of a minute; run it by name"]
async fn idle_api_requests_measured() {
    let secs: u64 = std::env::var("KUBE_IDLE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let (etcd, client, fake) = idle_cluster("kube-idle-measured", "3.5.1").await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(run(client, options(), async move {
        let _ = stopped.await;
    }));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !converged(&fake) {
        assert!(tokio::time::Instant::now() < deadline, "never converged");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // One idle pass after the one that converged, then the window.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let from = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let to = tokio::time::Instant::now();
    let _ = stop.send(());
    let _ = controller.await;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let seen = fake.requests();
    for r in seen.iter().filter(|r| r.at >= from && r.at < to) {
        *counts.entry(kind(r)).or_default() += 1;
    }
    let total: usize = counts.values().sum();
    println!("idle for {secs} s: {total} requests to the API server");
    for (k, n) in &counts {
        println!("  {n:5}  {k}");
    }
    let writes = seen
        .iter()
        .filter(|r| r.at >= from && r.at < to && r.method != Method::GET)
        .count();
    println!("  of which writes: {writes}");
    drop(etcd);
}
