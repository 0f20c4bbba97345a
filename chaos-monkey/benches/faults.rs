//! Benchmark of the operator's answers to the monkey's faults on the local
//! platform, each number beside a hand-driven floor measured in the same
//! run (the same fault, by the same monkey, against etcd processes started
//! by the benchmark with no operator):
//!
//! * partition: the leader cut off from the other two members for 3 s
//!   (`--fault partition --target leader`); from the monkey's heal record
//!   to all 3 members answering with one leader and no errors. The floor
//!   has nothing to do but wait for raft; the operator must not slow it.
//! * NOSPACE: a follower flooded until etcd raises its NOSPACE alarm
//!   (`--fault disk-full` against a 16 MiB `quotaBackendBytes`); from the
//!   monkey's record (written when etcd answered NOSPACE) to the first put
//!   acknowledged. The floor does by hand what the operator does: compact
//!   to the current revision, defragment the followers then the leader,
//!   disarm the alarm.
//!
//! Prints numbers and ratios; never passes or fails on time. Needs root
//! and iptables (as the partition does). `BENCH_RUNS` sets the runs per
//! measurement (default 5); `-- partition` or `-- nospace` runs only that
//! row; `BENCH_OPERATOR_LOG=PATH` keeps the operator's log of the NOSPACE
//! runs there (and prints each run's record time) to see where the time
//! went.

// A benchmark that cannot do a step has nothing to report: it stops there.
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::etcd::{Cluster, RulesGuard};
use common::{Monkey, records};
use etcd_client::{Client, ConnectOptions};
use etcd_operator::etcd::Clients;
use etcd_operator::faults::Fault;
use etcd_operator::testing::bench::wanted;
use etcd_operator::testing::{Env, client_urls, manifest};
use tokio::runtime::Runtime;

/// The longest any measured step may take.
const BOUND: Duration = Duration::from_secs(90);
/// How often conditions are polled.
const POLL: Duration = Duration::from_millis(5);
/// The quota the NOSPACE runs fill.
const QUOTA: &str = "16777216";

fn runs() -> usize {
    std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
}

/// Median and p99 of a sample, in seconds.
fn stats(samples: &[Duration]) -> (f64, f64) {
    let mut s: Vec<f64> = samples.iter().map(Duration::as_secs_f64).collect();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let pick = |q: f64| s[((q * (s.len() - 1) as f64).round() as usize).min(s.len() - 1)];
    (pick(0.5), pick(0.99))
}

fn row(what: &str, ours: &[Duration], floor: &[Duration]) {
    let (m, p) = stats(ours);
    let (fm, fp) = stats(floor);
    println!(
        "{what:<36} n={:<3} median {m:>7.3}s  p99 {p:>7.3}s | floor median {fm:>7.3}s  p99 \
         {fp:>7.3}s | ratio {:>5.2}x",
        ours.len(),
        m / fm
    );
}

fn since_ms(unix_ms: u64) -> Duration {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    now.saturating_sub(Duration::from_millis(unix_ms))
}

/// Whether every URL answers with the same leader and no errors (alarms).
async fn healthy(clients: &Clients, urls: &[String]) -> bool {
    let statuses = futures::future::join_all(urls.iter().map(|u| clients.status(u))).await;
    let mut leader = None;
    for s in statuses {
        match s {
            Ok(s) if s.leader != 0 && s.errors.is_empty() => {
                if leader.is_some_and(|l| l != s.leader) {
                    return false;
                }
                leader = Some(s.leader);
            }
            _ => return false,
        }
    }
    true
}

async fn until_healthy(clients: &Clients, urls: &[String]) {
    let since = Instant::now();
    while !healthy(clients, urls).await {
        assert!(since.elapsed() < BOUND, "not healthy within {BOUND:?}");
        tokio::time::sleep(POLL).await;
    }
}

/// The monkey, once, with `fault` against the clusters under `state`.
fn monkey(state: &str, log: &Path, seed: usize, fault: &[&str]) -> (Monkey, RulesGuard) {
    let seed = seed.to_string();
    let mut args = vec![
        "--state-dir",
        state,
        "--kill-interval",
        "100ms",
        "--max-faults",
        "1",
        "--seed",
        &seed,
        "--fault-log",
        log.to_str().unwrap(),
    ];
    args.extend_from_slice(fault);
    let m = Monkey::start(&args);
    let guard = RulesGuard(m.pid());
    (m, guard)
}

/// Waits for the record of `fault` in `log`; its time (ms since the epoch).
async fn record_of(log: &Path, fault: Fault, m: &Monkey) -> u64 {
    let since = Instant::now();
    loop {
        let found = std::fs::metadata(log)
            .is_ok()
            .then(|| records(log).into_iter().find(|r| r.fault == fault))
            .flatten();
        if let Some(r) = found {
            assert!(r.injected(), "{r:?}; monkey: {}", m.stderr());
            return r.unix_ms;
        }
        assert!(
            since.elapsed() < BOUND,
            "no {fault:?} record; monkey: {}",
            m.stderr()
        );
        tokio::time::sleep(POLL).await;
    }
}

const PARTITION: &[&str] = &[
    "--fault",
    "partition",
    "--target",
    "leader",
    "--fault-for",
    "3s",
];

/// One partition of the leader of the cluster behind `urls`: heal -> healthy.
fn partition_once(
    rt: &Runtime,
    clients: &Clients,
    state: &str,
    urls: &[String],
    i: usize,
) -> Duration {
    rt.block_on(until_healthy(clients, urls));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("faults.jsonl");
    let (m, guard) = monkey(state, &log, i, PARTITION);
    let took = rt.block_on(async {
        let healed = record_of(&log, Fault::Heal, &m).await;
        until_healthy(clients, urls).await;
        since_ms(healed)
    });
    let pid = m.pid();
    let done = m.wait();
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    RulesGuard::clean(pid).unwrap();
    drop(guard);
    took
}

/// A running operator (this build's) with one 3-member cluster `b`,
/// `extra` added to its spec.
fn operator_cluster(extra: &str) -> (Env, Vec<String>) {
    let mut env = Env::new();
    env.log_filter = "info".into();
    env.write_manifest("b.yaml", &format!("{}{extra}", manifest("b", 3, "3.4.23")));
    env.start_operator();
    let urls = client_urls(&env.wait_running("b", 3));
    (env, urls)
}

fn partition(rt: &Runtime, clients: &Clients) -> (Vec<Duration>, Vec<Duration>) {
    let (env, urls) = operator_cluster("");
    let state = env.state.to_str().unwrap().to_string();
    let ours = (0..runs())
        .map(|i| partition_once(rt, clients, &state, &urls, i))
        .collect();
    drop(env);
    let c = Cluster::start(3, &[]);
    let urls: Vec<String> = (0..3).map(|i| c.url(i)).collect();
    let floor = (0..runs())
        .map(|i| partition_once(rt, clients, c.state_arg(), &urls, i))
        .collect();
    (ours, floor)
}

/// Puts until one is acknowledged.
async fn until_put(urls: &[String]) {
    let opts = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(2));
    let mut client = Client::connect(urls, Some(opts)).await.unwrap();
    let since = Instant::now();
    while client.put("bench/after", "v", None).await.is_err() {
        assert!(
            since.elapsed() < BOUND,
            "no write accepted within {BOUND:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// The hand-driven answer to NOSPACE: the operator's steps, done directly.
async fn clear_by_hand(clients: &Clients, urls: &[String]) {
    let statuses: Vec<_> = futures::future::join_all(urls.iter().map(|u| clients.status(u)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let revision = statuses.iter().map(|s| s.revision).max().unwrap();
    clients.compact(&urls[0], revision).await.unwrap();
    let mut order: Vec<usize> = (0..urls.len()).collect();
    // Followers first, the leader last.
    order.sort_by_key(|&i| statuses[i].id == statuses[i].leader);
    for i in order {
        clients.defragment(&urls[i]).await.unwrap();
    }
    for alarm in clients.alarms(&urls[0]).await.unwrap() {
        clients.disarm(&urls[0], alarm).await.unwrap();
    }
}

const DISK_FULL: &[&str] = &["--fault", "disk-full", "--target", "follower"];

/// One NOSPACE of the cluster behind `urls`: alarm -> a write accepted,
/// cleared by the operator or (`by_hand`) by [`clear_by_hand`].
fn nospace_once(
    rt: &Runtime,
    clients: &Clients,
    state: &str,
    urls: &[String],
    i: usize,
    by_hand: bool,
) -> Duration {
    rt.block_on(until_healthy(clients, urls));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("faults.jsonl");
    let (m, guard) = monkey(state, &log, i, DISK_FULL);
    let took = rt.block_on(async {
        let raised = record_of(&log, Fault::DiskFull, &m).await;
        if std::env::var_os("BENCH_OPERATOR_LOG").is_some() {
            println!("NOSPACE run {i} (by hand: {by_hand}): the monkey's record at {raised} ms");
        }
        if by_hand {
            clear_by_hand(clients, urls).await;
        }
        until_put(urls).await;
        since_ms(raised)
    });
    let done = m.wait();
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    drop(guard);
    took
}

fn nospace(rt: &Runtime, clients: &Clients) -> (Vec<Duration>, Vec<Duration>) {
    let (env, urls) = operator_cluster(&format!("  quotaBackendBytes: {QUOTA}\n"));
    let state = env.state.to_str().unwrap().to_string();
    let ours = (0..runs())
        .map(|i| nospace_once(rt, clients, &state, &urls, i, false))
        .collect();
    keep_operator_log(&env);
    drop(env);
    let c = Cluster::start(3, &["--quota-backend-bytes", QUOTA]);
    let urls: Vec<String> = (0..3).map(|i| c.url(i)).collect();
    let floor = (0..runs())
        .map(|i| nospace_once(rt, clients, c.state_arg(), &urls, i, true))
        .collect();
    (ours, floor)
}

/// With `BENCH_OPERATOR_LOG=PATH`, the operator's log (its timestamps
/// show where the time between the fault record and the write went) is
/// copied to PATH before the operator's folder goes.
fn keep_operator_log(env: &Env) {
    if let Some(path) = std::env::var_os("BENCH_OPERATOR_LOG") {
        std::fs::copy(env.operator_log(), &path).unwrap();
        println!("operator log kept in {}", Path::new(&path).display());
    }
}

fn main() {
    let rt = Runtime::new().unwrap();
    // Clients are made inside the runtime (their connections live there).
    let clients = rt.block_on(async { Clients::new(Duration::from_millis(500)) });
    println!(
        "fault answers benchmark (local platform, etcd 3.4.23, {} runs each)",
        runs()
    );
    if wanted("partition") {
        let (p, pf) = partition(&rt, &clients);
        row("partition healed -> 3 healthy", &p, &pf);
    }
    if wanted("nospace") {
        let (n, nf) = nospace(&rt, &clients);
        row("NOSPACE alarm -> write accepted", &n, &nf);
    }
}
