//! What an idle cluster costs the API server: the controller (`run`, the
//! operator's own loop, its watches included; no leader election, so no
//! Lease renewals) against the fake API server, with real etcd behind
//! pods that are all ready, counting the requests it makes once the
//! cluster has converged.
//!
//! The bound comes from the design, not from a clock: a pass that nothing
//! changed for reads pods and claims from the lists before (the watches
//! say nothing changed, `watched`), and a status that says the same is
//! rewritten only every `STATUS_REWRITE` (`status`). So over two idle
//! passes the operator asks nothing about pods or claims, writes nothing
//! but at most one status, and watches the resource again only as the
//! fake ends a watch it answered (each status write ends one; a real API
//! server keeps the stream open). A change to a pod makes the next pass
//! list again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use http::Method;

use super::etcd_pods::EtcdPods;
use super::fake::{Fake, Seen as Request, Target, fake};
use super::fixtures::resource;
use super::rbac::collection;
use super::trouble::resource_path;
use crate::controller::IDLE_INTERVAL;
use crate::controller::kube::{Options, run};
use crate::crd::StoragePolicy::Persistent;
use crate::metrics::Metrics;
use crate::platform::kube::pod::DEFAULT_IMAGE;
use crate::platform::kube::status::STATUS_REWRITE;

/// A converged cluster of 3 ready members of `version` in the fake API
/// server, its etcd real.
async fn idle_cluster(seed: &str, version: &str) -> (EtcdPods, kube::Client, Fake) {
    let etcd = EtcdPods::start(seed, version, 3).await;
    let (client, fake) = fake();
    let r = resource(3, version, Persistent);
    etcd.seat(&fake, &r, Persistent, version);
    (etcd, client, fake)
}

fn options(metrics: &Arc<Metrics>) -> Options {
    Options {
        namespace: None,
        image: DEFAULT_IMAGE.into(),
        backup_image: None,
        handover: true,
        scratch: None,
        metrics: metrics.clone(),
        health: Default::default(),
    }
}

/// Reconcile passes so far, of any outcome (from the metrics).
fn passes(metrics: &Metrics) -> u64 {
    metrics
        .encode()
        .lines()
        .filter(|l| l.starts_with("etcd_operator_reconciles_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|n| n as u64)
        .sum()
}

/// Waits (at most `within`) until `fake` saw a request after `since`
/// that `wanted` picks.
async fn await_request(
    fake: &Fake,
    since: tokio::time::Instant,
    within: Duration,
    wanted: impl Fn(&Request) -> bool,
) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if fake.requests().iter().any(|r| r.at >= since && wanted(r)) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether `r` asks about pods or claims.
fn about_members(r: &Request) -> bool {
    Target::parse(&r.path)
        .is_some_and(|t| t.resource == "pods" || t.resource == "persistentvolumeclaims")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_cluster_asks_nothing_of_pods_and_writes_at_most_a_status() {
    let (etcd, client, fake) = idle_cluster("kube-idle", "3.5.1").await;
    let metrics = Arc::new(Metrics::new());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(run(client, options(&metrics), async move {
        let _ = stopped.await;
    }));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !converged(&fake) {
        assert!(tokio::time::Instant::now() < deadline, "never converged");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Converged: from the next status write on (the pass after it has
    // nothing left to mark or write), two idle passes and a bit.
    let status_write = |r: &Request| kind(r) == "PATCH etcdclusters/status";
    let now = tokio::time::Instant::now();
    let wrote = await_request(&fake, now, STATUS_REWRITE + IDLE_INTERVAL * 2, status_write).await;
    assert!(
        wrote,
        "the status is rewritten every {STATUS_REWRITE:?} at least"
    );
    let from = tokio::time::Instant::now();
    let passes_before = passes(&metrics);
    let window = IDLE_INTERVAL * 2 + Duration::from_secs(1);
    tokio::time::sleep(window).await;
    let to = tokio::time::Instant::now();
    let idle_passes = passes(&metrics) - passes_before;
    let seen: Vec<Request> = fake
        .requests()
        .into_iter()
        .filter(|r| r.at >= from && r.at < to)
        .collect();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in &seen {
        *counts.entry(kind(r)).or_default() += 1;
    }
    assert!(idle_passes >= 2, "{idle_passes} passes in {window:?}");
    let members: Vec<String> = seen.iter().filter(|r| about_members(r)).map(kind).collect();
    assert_eq!(
        members,
        Vec::<String>::new(),
        "pods or claims asked for while idle"
    );
    let writes = seen.iter().filter(|r| r.method != Method::GET).count();
    let status_writes = counts
        .get("PATCH etcdclusters/status")
        .copied()
        .unwrap_or(0);
    // The window is shorter than STATUS_REWRITE: one rewrite at most.
    assert!(window < STATUS_REWRITE);
    assert!(status_writes <= 1, "{counts:?}");
    assert_eq!(
        writes, status_writes,
        "writes other than the status: {counts:?}"
    );
    let rewatches = counts.get("GET etcdclusters watch").copied().unwrap_or(0);
    assert!(rewatches <= status_writes + 1, "{counts:?}");
    assert_eq!(
        seen.len(),
        status_writes + rewatches,
        "nothing else while idle: {counts:?}"
    );

    // A pod that changes is listed again by the pass it wakes.
    let changed = tokio::time::Instant::now();
    let pod = format!("{}/{}", collection("pods"), etcd.configs[0].addr.name);
    fake.change(
        &pod,
        &serde_json::json!({"metadata": {"labels": {"touched": "yes"}}}),
    );
    let listed = await_request(&fake, changed, Duration::from_secs(10), |r| {
        r.method == Method::GET && kind(r) == "GET pods"
    })
    .await;
    assert!(listed, "a changed pod is not listed again");
    let _ = stop.send(());
    let _ = controller.await;
    drop(etcd);
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
    let metrics = Arc::new(Metrics::new());
    let controller = tokio::spawn(run(client, options(&metrics), async move {
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
