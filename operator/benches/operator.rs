//! Benchmark of the operator on the local platform, each number beside a
//! hand-driven floor measured in the same run (the same steps done directly
//! with the etcd binary and the etcd API, no operator):
//!
//! * create: manifest written -> 3 members healthy;
//! * restart in place: `kill -9` of a follower -> 3 members healthy;
//! * replace: data wiped and `kill -9` -> 3 members healthy (remove, add as
//!   learner, start, promote), each run on a cluster settled past etcd's 5 s
//!   reconfiguration guard;
//! * both recoveries again on a cluster with peer and client TLS (`mode:
//!   Auto`), beside a hand-driven TLS floor (members with certificates from
//!   a CA of the benchmark's), and the ratio TLS / plain;
//! * the operator's resident memory and CPU while idle, with 1 and 10
//!   clusters of 3 members.
//!
//! Prints numbers and ratios; never passes or fails on time. `BENCH_RUNS`
//! sets the number of runs per measurement (default 8).

// A benchmark that cannot do a step has nothing to report: it stops there.
#![allow(clippy::unwrap_used)]

mod floor;
mod support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use etcd_operator::etcd::Clients;
use etcd_operator::member::InitialState;
use etcd_operator::platform::local::process::{self, ProcessId};
use etcd_operator::testing::{Env, manifest};
use etcd_operator::tls::ClientTls;
use support::{Hand, HandCa, hand, median, row, until_healthy, usage};

/// Past etcd's 5 s "unhealthy cluster" guard after a member reconnects.
const SETTLE: Duration = Duration::from_secs(6);

fn runs() -> usize {
    support::runs(8)
}

/// An Env running this build's (release) operator with production logging.
fn operator_env() -> Env {
    let mut env = Env::new();
    env.operator_bin = Some(env!("CARGO_BIN_EXE_etcd-operator").into());
    env.log_filter = "info".into();
    env
}

/// Client URLs of the operator's members once their records exist.
async fn member_urls(env: &Env, cluster: &str, n: usize, since: Instant) -> Vec<String> {
    loop {
        let names = env.layout().member_names(cluster).unwrap_or_default();
        let urls: Vec<String> = names
            .iter()
            .filter_map(|m| env.member(cluster, m))
            .filter(|r| r.process.is_some_and(|p| process::alive(&p)))
            .map(|r| r.config.addr.client_url)
            .collect();
        if urls.len() == n {
            return urls;
        }
        assert!(
            since.elapsed() < support::BOUND,
            "no {n} members of {cluster}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn wait_operator_up(env: &Env) {
    let lock = env.layout().lock_path();
    let since = Instant::now();
    while !std::fs::read_to_string(&lock).is_ok_and(|s| s.starts_with("pid")) {
        assert!(since.elapsed() < support::BOUND, "operator did not start");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn create(clients: &Clients) -> (Vec<Duration>, Vec<Duration>) {
    let (mut ours, mut floor) = (Vec::new(), Vec::new());
    for i in 0..runs() {
        let mut env = operator_env();
        env.start_operator();
        wait_operator_up(&env).await;
        let t0 = Instant::now();
        env.write_manifest("c.yaml", &manifest("c", 3, "3.4.23"));
        let urls = member_urls(&env, "c", 3, t0).await;
        ours.push(until_healthy(clients, &urls, t0).await);
        drop(env);

        let dir = tempfile::tempdir().unwrap();
        let mut taken = HashSet::new();
        let seed = format!("floor-create-{i}");
        let mut hands = floor::members(dir.path(), 3, &seed, "f", &mut taken);
        let urls = floor::client_urls(&hands);
        let t0 = Instant::now();
        for h in &mut hands {
            h.start();
        }
        floor.push(until_healthy(clients, &urls, t0).await);
        for h in &mut hands {
            h.kill().await;
        }
    }
    (ours, floor)
}

/// A follower of the cluster behind `urls`: (index, member id).
async fn follower(clients: &Clients, urls: &[String]) -> usize {
    for (i, u) in urls.iter().enumerate() {
        if let Ok(s) = clients.status(u).await
            && s.leader != s.id
        {
            return i;
        }
    }
    0
}

/// Peer and client TLS from the operator's own CA.
const TLS_SPEC: &str = "  tls:\n    peer: {mode: Auto}\n    client: {mode: Auto}\n";

/// Tells `clients` to reach `urls` with the client certificate the
/// cluster's status names (nothing for a cluster without client TLS).
fn register_tls(env: &Env, clients: &Clients, cluster: &str, urls: &[String]) {
    let status = env.status(cluster);
    let tls = ClientTls::from_status(status.as_ref().and_then(|c| c.status.as_ref())).unwrap();
    for u in urls {
        clients.set_tls(u, tls.clone());
    }
}

/// The client URLs of cluster `r` (registered for TLS), and the index,
/// name and process of a follower.
async fn follower_of(env: &Env, clients: &Clients) -> (Vec<String>, usize, String, ProcessId) {
    let urls = member_urls(env, "r", 3, Instant::now()).await;
    register_tls(env, clients, "r", &urls);
    let victim = follower(clients, &urls).await;
    let name = env
        .layout()
        .member_names("r")
        .unwrap()
        .into_iter()
        .find(|m| {
            env.member("r", m)
                .is_some_and(|r| r.config.addr.client_url == urls[victim])
        })
        .unwrap();
    let pid = env.member("r", &name).unwrap().process.unwrap();
    (urls, victim, name, pid)
}

/// The operator's recoveries (restart in place, replace) on a 3-member
/// cluster, with peer and client TLS when `tls`.
async fn recovery_by_operator(clients: &Clients, tls: bool) -> (Vec<Duration>, Vec<Duration>) {
    let mut env = operator_env();
    let mut m = manifest("r", 3, "3.4.23");
    if tls {
        m.push_str(TLS_SPEC);
    }
    env.write_manifest("r.yaml", &m);
    env.start_operator();
    env.wait_running("r", 3);
    let (mut restart, mut replace) = (Vec::new(), Vec::new());
    for _ in 0..runs() {
        let (urls, _, _, pid) = follower_of(&env, clients).await;
        let t0 = Instant::now();
        process::kill(pid).await.unwrap();
        restart.push(until_healthy(clients, &urls, t0).await);
    }
    for _ in 0..runs() {
        tokio::time::sleep(SETTLE).await;
        let (urls, victim, name, pid) = follower_of(&env, clients).await;
        let t0 = Instant::now();
        std::fs::remove_dir_all(env.layout().data_dir("r", &name)).unwrap();
        process::kill(pid).await.unwrap();
        // Healthy again with a new member in the victim's place.
        let mut new_urls;
        loop {
            new_urls = member_urls(&env, "r", 3, t0).await;
            if !new_urls.contains(&urls[victim]) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        register_tls(&env, clients, "r", &new_urls);
        replace.push(until_healthy(clients, &new_urls, t0).await);
    }
    (restart, replace)
}

/// The same recoveries by hand, the floor; members with peer and client
/// TLS from `tls`'s CA when given.
async fn recovery_by_hand(
    clients: &Clients,
    tls: Option<&HandCa>,
) -> (Vec<Duration>, Vec<Duration>) {
    let dir = tempfile::tempdir().unwrap();
    let mut taken = HashSet::new();
    let mut next = 0;
    let prefix = if tls.is_some() {
        "floor-tls"
    } else {
        "floor-recovery"
    };
    let mut new_hand = |taken: &mut HashSet<_>| {
        next += 1;
        let mut h = hand(
            dir.path(),
            &format!("{prefix}-{next}"),
            &format!("h{next}"),
            taken,
        );
        if let Some(ca) = tls {
            h.use_tls(ca);
            clients.set_tls(&h.record.addr.client_url, Some(ca.client.clone()));
        }
        h
    };
    let mut hands: Vec<Hand> = (0..3).map(|_| new_hand(&mut taken)).collect();
    floor::tell_initial_cluster(&mut hands);
    for h in &mut hands {
        h.start();
    }
    let urls = floor::client_urls;
    until_healthy(clients, &urls(&hands), Instant::now()).await;
    let (mut restart, mut replace) = (Vec::new(), Vec::new());
    for _ in 0..runs() {
        let u = urls(&hands);
        let v = follower(clients, &u).await;
        let t0 = Instant::now();
        hands[v].kill().await;
        hands[v].start();
        restart.push(until_healthy(clients, &u, t0).await);
    }
    for _ in 0..runs() {
        tokio::time::sleep(SETTLE).await;
        let u = urls(&hands);
        let v = follower(clients, &u).await;
        let victim_id = clients.status(&u[v]).await.unwrap().id;
        let api = u[(v + 1) % 3].clone();
        let t0 = Instant::now();
        std::fs::remove_dir_all(&hands[v].data).unwrap();
        hands[v].kill().await;
        retry(|| clients.remove(&api, victim_id)).await;
        let mut fresh = new_hand(&mut taken);
        let (id, members) = retry(|| clients.add_learner(&api, &fresh.record.addr.peer_url)).await;
        let ic: Vec<String> = members
            .iter()
            .map(|m| {
                let peer = m.peer_urls[0].clone();
                let name = if peer == fresh.record.addr.peer_url {
                    fresh.record.addr.name.clone()
                } else {
                    m.name.clone()
                };
                format!("{name}={peer}")
            })
            .collect();
        fresh.record.initial_cluster = ic.join(",");
        fresh.record.initial_state = InitialState::Existing;
        fresh.start();
        retry(|| clients.promote(&api, id)).await;
        hands[v] = fresh;
        replace.push(until_healthy(clients, &urls(&hands), t0).await);
    }
    for h in &mut hands {
        h.kill().await;
    }
    (restart, replace)
}

/// Retries an etcd call every 5 ms (etcd refuses changes while unsettled).
async fn retry<T, F, Fut>(mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = etcd_operator::etcd::Result<T>>,
{
    let since = Instant::now();
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) => assert!(since.elapsed() < support::BOUND, "gave up: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn idle() {
    let mut env = operator_env();
    env.write_manifest("i0.yaml", &manifest("i0", 3, "3.4.23"));
    env.start_operator();
    env.wait_running("i0", 3);
    let pid = operator_pid(&env);
    for (clusters, label) in [(1, "1 cluster of 3"), (10, "10 clusters of 3")] {
        for i in 1..clusters {
            env.write_manifest(
                &format!("i{i}.yaml"),
                &manifest(&format!("i{i}"), 3, "3.4.23"),
            );
        }
        for i in 0..clusters {
            env.wait_running(&format!("i{i}"), 3);
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        let window = Duration::from_secs(20);
        let (cpu0, _) = usage(pid);
        tokio::time::sleep(window).await;
        let (cpu1, rss) = usage(pid);
        println!(
            "{:<34} operator RSS {rss:>6.1} MiB, CPU {:>5.2}% of a core (over {window:?})",
            format!("idle, {label}"),
            100.0 * (cpu1 - cpu0) / window.as_secs_f64()
        );
    }
}

fn operator_pid(env: &Env) -> u32 {
    u32::try_from(env.operator_process().unwrap().pid).unwrap()
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let clients = Clients::new(Duration::from_millis(100));
        println!(
            "etcd-operator benchmark (local platform, etcd 3.4.23, {} runs each)",
            runs()
        );
        let (c, cf) = create(&clients).await;
        row("create: manifest -> 3 healthy", &c, &cf);
        let (r, p) = recovery_by_operator(&clients, false).await;
        let (rf, pf) = recovery_by_hand(&clients, None).await;
        row("kill -9 follower -> 3 healthy", &r, &rf);
        row("wipe+kill -9 -> replaced, healthy", &p, &pf);
        let ca = HandCa::new();
        let (rt, pt) = recovery_by_operator(&clients, true).await;
        let (rtf, ptf) = recovery_by_hand(&clients, Some(&ca)).await;
        row("TLS: kill -9 follower -> healthy", &rt, &rtf);
        row("TLS: wipe+kill -9 -> replaced", &pt, &ptf);
        println!(
            "TLS / plain recovery (medians): restart {:.2}x, replace {:.2}x; floors: {:.2}x, {:.2}x \
             (target: TLS recovery within 2x of its floor)",
            median(&rt) / median(&r),
            median(&pt) / median(&p),
            median(&rtf) / median(&rf),
            median(&ptf) / median(&pf),
        );
        idle().await;
    });
}
