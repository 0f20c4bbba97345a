//! Shared pieces of the benchmarks: statistics, a direct health probe, and
//! hand-driven etcd processes for the floors the operator is measured
//! against.

#![allow(dead_code, clippy::unwrap_used)]

pub mod bucket;
pub mod dr;
pub mod dr_backup;
pub mod filled;
pub mod rebuild;
pub mod standby_boot;
pub mod throughput;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use etcd_operator::etcd::Clients;
use etcd_operator::member::flags::{Listen, etcd_args};
use etcd_operator::member::{MemberAddr, MemberConfig, MemberTls};
use etcd_operator::platform::local::addr;
use etcd_operator::platform::local::process::{self, ProcessId};
use etcd_operator::testing::bootstrap_config;
use etcd_operator::tls::issue::{self, Usage};
use etcd_operator::tls::{CertKey, ClientTls, files};
use etcd_operator::version::Version;

/// The longest any benchmark step may take before it is reported as failed.
pub const BOUND: Duration = Duration::from_secs(90);

/// Runs per measurement: `BENCH_RUNS`, else `default`.
pub fn runs(default: usize) -> usize {
    std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Median and p99 of a sample, in seconds.
pub fn stats(samples: &[Duration]) -> (f64, f64) {
    let mut s: Vec<f64> = samples.iter().map(Duration::as_secs_f64).collect();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let pick = |q: f64| s[((q * (s.len() - 1) as f64).round() as usize).min(s.len() - 1)];
    (pick(0.5), pick(0.99))
}

/// One result row.
pub fn row(what: &str, ours: &[Duration], floor: &[Duration]) {
    let (m, p) = stats(ours);
    let (fm, fp) = stats(floor);
    println!(
        "{what:<34} n={:<3} median {:>7.3}s  p99 {:>7.3}s | floor median {:>7.3}s  p99 {:>7.3}s | ratio {:>5.2}x",
        ours.len(),
        m,
        p,
        fm,
        fp,
        m / fm
    );
}

/// Whether every URL answers with the same leader and the member list holds
/// exactly these members, all started voters.
pub async fn healthy(clients: &Clients, urls: &[String]) -> bool {
    let statuses = futures::future::join_all(urls.iter().map(|u| clients.status(u))).await;
    let mut leaders = HashSet::new();
    for s in statuses {
        match s {
            Ok(s) if s.leader != 0 => {
                leaders.insert(s.leader);
            }
            _ => return false,
        }
    }
    if leaders.len() != 1 {
        return false;
    }
    let Ok(list) = clients.member_list(&urls[0]).await else {
        return false;
    };
    list.len() == urls.len()
        && list.iter().all(|m| {
            !m.name.is_empty() && !m.is_learner && urls.iter().any(|u| m.client_urls.contains(u))
        })
}

/// Median of a sample, in seconds.
pub fn median(samples: &[Duration]) -> f64 {
    stats(samples).0
}

/// A CA for hand-run TLS members, and a client certificate it signed.
pub struct HandCa {
    pub ca: CertKey,
    pub client: ClientTls,
}

const DAY: Duration = Duration::from_secs(86_400);

impl HandCa {
    pub fn new() -> Self {
        let now = std::time::SystemTime::now();
        let ca = issue::new_ca("floor", 30 * DAY, now).unwrap();
        let cert_key = issue::issue(
            &ca,
            now + 30 * DAY,
            "floor-client",
            &[],
            Usage::Client,
            DAY,
            now,
        )
        .unwrap();
        let client = ClientTls {
            ca: ca.cert.clone(),
            cert_key,
            server_name: None,
        };
        HandCa { ca, client }
    }
}

/// Polls (every 5 ms) until `urls` are healthy; returns the time taken.
pub async fn until_healthy(clients: &Clients, urls: &[String], since: Instant) -> Duration {
    loop {
        if healthy(clients, urls).await {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < BOUND,
            "not healthy within {BOUND:?}: {urls:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A hand-run etcd member (the floor's side).
pub struct Hand {
    pub record: MemberConfig,
    pub data: PathBuf,
    pub log: PathBuf,
    pub process: Option<ProcessId>,
}

/// The etcd 3.4.23 binary and etcdctl.
pub fn etcd_bin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../.etcd/3.4.23/etcd")
}

/// A hand-run member's config.
pub fn hand(dir: &Path, seed: &str, name: &str, taken: &mut HashSet<std::net::Ipv4Addr>) -> Hand {
    let ip = addr::allocate(seed, taken).unwrap();
    taken.insert(ip);
    let addr = MemberAddr {
        name: name.into(),
        peer_url: format!("http://{ip}:2380"),
        client_url: format!("http://{ip}:2379"),
    };
    Hand {
        record: bootstrap_config(addr, Version::new(3, 4, 23), String::new(), "floor"),
        data: dir.join(name).join("data"),
        log: dir.join(name).join("etcd.log"),
        process: None,
    }
}

impl Hand {
    /// The TLS folder etcd is pointed at.
    fn tls_dir(&self) -> PathBuf {
        self.data.join("../tls")
    }

    /// Peer and client TLS, as the operator sets a member up: https URLs,
    /// a certificate from `ca` naming its address and 127.0.0.1 (peers
    /// dial from there), mutual TLS on both sides.
    pub fn use_tls(&mut self, ca: &HandCa) {
        let a = &mut self.record.addr;
        a.peer_url = a.peer_url.replace("http://", "https://");
        a.client_url = a.client_url.replace("http://", "https://");
        let host = etcd_operator::tls::url_host(&a.client_url)
            .unwrap()
            .to_string();
        let now = std::time::SystemTime::now();
        let names = [host, "127.0.0.1".into(), "localhost".into()];
        let leaf = issue::issue(
            &ca.ca,
            now + 30 * DAY,
            &a.name,
            &names,
            Usage::Member,
            DAY,
            now,
        )
        .unwrap();
        std::fs::create_dir_all(&self.data).unwrap();
        let dir = self.tls_dir();
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in [
            (files::PEER_CERT, &leaf.cert),
            (files::PEER_KEY, &leaf.key),
            (files::PEER_CA, &ca.ca.cert),
            (files::SERVER_CERT, &leaf.cert),
            (files::SERVER_KEY, &leaf.key),
            (files::CLIENT_CA, &ca.ca.cert),
        ] {
            std::fs::write(dir.join(name), text).unwrap();
        }
        self.record.tls = MemberTls {
            peer: true,
            client: true,
            trust: String::new(),
        };
    }

    pub fn start(&mut self) {
        self.start_without(&[]);
    }

    /// [`Hand::start`] without the flags named in `drop` (such as etcd's
    /// initial corruption check, which a person restoring by hand would
    /// not pass and which makes a member restored from a snapshot wait
    /// for its peers' hashes before it serves them).
    pub fn start_without(&mut self, drop: &[&str]) {
        std::fs::create_dir_all(&self.data).unwrap();
        let args: Vec<String> = etcd_args(
            &self.record,
            &self.data,
            &self.tls_dir(),
            Listen::Advertised,
        )
        .into_iter()
        .filter(|a| !drop.contains(&a.as_str()))
        .collect();
        self.process = Some(process::spawn(&etcd_bin(), &args, &self.log).unwrap());
    }

    pub async fn kill(&mut self) {
        if let Some(p) = self.process.take() {
            process::kill(p).await.unwrap();
        }
    }
}

/// A hand-run member never outlives the benchmark, also when it panics.
impl Drop for Hand {
    fn drop(&mut self) {
        if let Some(p) = self.process.take() {
            let _ = process::signal(&p, rustix::process::Signal::KILL);
        }
    }
}

/// Operator process CPU time (user + system) in seconds and RSS in MiB.
pub fn usage(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 (11 and 12 after the state).
    let cpu = (ticks(11) + ticks(12)) / clock_ticks();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    (cpu, rss_kib / 1024.0)
}

fn clock_ticks() -> f64 {
    rustix::param::clock_ticks_per_second() as f64
}
