//! The hand-driven floors of the disaster-recovery benchmark
//! (`benches/recovery.rs`): a majority of three hand-run members destroyed,
//! then rebuilt with etcd, etcdctl and etcdutl alone, no operator; and the
//! loss window of a sequential writer, counted the same way for both sides.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use etcd_operator::etcd::Clients;
use etcd_operator::member::InitialState;
use etcd_operator::testing::acked::{Acked, Writer, read_prefix};
use etcd_operator::testing::{binaries, etcdctl};

use super::{BOUND, Hand, hand, until_healthy};

/// etcd's initial corruption check, left out of the floors. The operator
/// passes it to every member but those it just restored from a snapshot
/// (their first start): with it, each member restored from a snapshot
/// (its WAL exists) asks its peers for their hashes before it serves
/// them, and waits out etcd's request timeout (7 s) per peer that is
/// doing the same: 14 s for 3 members started together. A survivor
/// restarted alone with `--force-new-cluster` has no peer to ask.
pub const CORRUPT_CHECK: &str = etcd_operator::member::flags::INITIAL_CORRUPT_CHECK;

/// Acknowledged writes before a loss the writer had before it is judged.
pub const WRITES_BEFORE_LOSS: usize = 200;

/// What a loss cost: acknowledged writes missing afterwards, and the time
/// between the last write kept and the last write acknowledged before the
/// loss (0 when the last one is kept).
#[derive(Clone, Copy, Debug, Default)]
pub struct Loss {
    pub acked: usize,
    pub missing: usize,
    pub window: Duration,
}

/// Reads the writer's keys back from `urls` and compares them with what it
/// acknowledged; `lost_at` is when the majority was destroyed.
pub fn loss(acked: &[Acked], urls: &[String], prefix: &str, lost_at: Instant) -> Loss {
    let found: HashMap<String, String> = read_prefix(urls, prefix).into_iter().collect();
    let kept = |a: &Acked| found.get(&a.key) == Some(&a.value);
    let missing = acked.iter().filter(|a| !kept(a)).count();
    let before: Vec<&Acked> = acked.iter().filter(|a| a.at <= lost_at).collect();
    let last_kept = before.iter().copied().rev().find(|a| kept(a)).map(|a| a.at);
    let window = match (before.last(), last_kept) {
        (Some(last), Some(kept_at)) => last.at.saturating_duration_since(kept_at),
        (Some(last), None) => last.at.saturating_duration_since(acked[0].at),
        _ => Duration::ZERO,
    };
    Loss {
        acked: acked.len(),
        missing,
        window,
    }
}

/// Three hand-run 3.4.23 members forming a new cluster, started, healthy.
pub async fn hand_cluster(
    clients: &Clients,
    dir: &Path,
    tag: &str,
    taken: &mut HashSet<std::net::Ipv4Addr>,
) -> Vec<Hand> {
    let mut hands: Vec<Hand> = (0..3)
        .map(|m| hand(dir, &format!("{tag}-{m}"), &format!("h{m}"), taken))
        .collect();
    let ic = initial_cluster(&hands);
    for h in &mut hands {
        h.record.initial_cluster = ic.clone();
        h.start();
    }
    until_healthy(clients, &urls(&hands), Instant::now()).await;
    hands
}

fn initial_cluster(hands: &[Hand]) -> String {
    hands
        .iter()
        .map(|h| format!("{}={}", h.record.addr.name, h.record.addr.peer_url))
        .collect::<Vec<_>>()
        .join(",")
}

/// Client URLs of `hands`.
pub fn urls(hands: &[Hand]) -> Vec<String> {
    hands
        .iter()
        .map(|h| h.record.addr.client_url.clone())
        .collect()
}

/// The index of a member that is not the leader.
pub async fn a_follower(clients: &Clients, urls: &[String]) -> usize {
    let deadline = Instant::now() + BOUND;
    loop {
        for (i, u) in urls.iter().enumerate() {
            if let Ok(s) = clients.status(u).await
                && s.leader != 0
                && s.leader != s.id
            {
                return i;
            }
        }
        assert!(Instant::now() < deadline, "no follower in {urls:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Kills a hand-run member and deletes its data: lost for good.
pub async fn destroy(h: &mut Hand) {
    h.kill().await;
    std::fs::remove_dir_all(&h.data).unwrap();
}

/// Polls until `url` answers with a leader.
async fn serving(clients: &Clients, url: &str, since: Instant) {
    loop {
        if clients.status(url).await.is_ok_and(|s| s.leader != 0) {
            return;
        }
        assert!(
            since.elapsed() < BOUND,
            "{url} did not serve within {BOUND:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// `etcdctl member add NAME --peer-urls=PEER` through `endpoint`, retried
/// (every 50 ms, bounded) while etcd refuses it: its 5 s guard after a
/// member (re)connects, as a person would retry.
fn member_add(endpoint: &str, name: &str, peer: &str, since: Instant) {
    loop {
        let out = std::process::Command::new(etcdctl())
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", endpoint, "--command-timeout=5s"])
            .args(["member", "add", name, &format!("--peer-urls={peer}")])
            .output()
            .unwrap();
        if out.status.success() {
            return;
        }
        assert!(
            since.elapsed() < BOUND,
            "member add {name} refused for {BOUND:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The survivor floor, from the loss on: the survivor `keep` stopped and
/// restarted alone with `--force-new-cluster`, then each destroyed member
/// added back (`etcdctl member add`) and started on empty data with
/// `--initial-cluster-state existing`, one at a time. Returns the time
/// from `since` to 3 healthy members.
pub async fn rebuild_from_survivor(
    clients: &Clients,
    hands: &mut [Hand],
    keep: usize,
    since: Instant,
) -> Duration {
    hands[keep].kill().await;
    hands[keep].record.force_new_cluster = true;
    hands[keep].start_without(&[CORRUPT_CHECK]);
    let seed_url = hands[keep].record.addr.client_url.clone();
    serving(clients, &seed_url, since).await;
    let mut joined = vec![keep];
    for i in (0..hands.len()).filter(|i| *i != keep) {
        let (name, peer) = (
            hands[i].record.addr.name.clone(),
            hands[i].record.addr.peer_url.clone(),
        );
        member_add(&seed_url, &name, &peer, since);
        joined.push(i);
        let members: Vec<&Hand> = joined.iter().map(|j| &hands[*j]).collect();
        let ic = members
            .iter()
            .map(|h| format!("{}={}", h.record.addr.name, h.record.addr.peer_url))
            .collect::<Vec<_>>()
            .join(",");
        let h = &mut hands[i];
        h.record.initial_cluster = ic;
        h.record.initial_state = InitialState::Existing;
        h.start_without(&[CORRUPT_CHECK]);
        let now: Vec<String> = joined
            .iter()
            .map(|j| hands[*j].record.addr.client_url.clone())
            .collect();
        until_healthy(clients, &now, since).await;
    }
    since.elapsed()
}

/// `etcdctl snapshot save` (3.4.23) from `url` into `file`.
pub fn snapshot_save(url: &str, file: &Path) {
    let out = std::process::Command::new(etcdctl())
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", url, "snapshot", "save"])
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "snapshot save: {out:?}");
}

/// `snapshot restore` of `file` into `data` for member `name` of a new
/// cluster `ic` (token `token`), by `tool` (etcdutl, or etcdctl 3.4).
pub fn snapshot_restore(tool: &Path, file: &Path, data: &Path, name: &str, peer: &str, ic: &str) {
    let out = std::process::Command::new(tool)
        .env("ETCDCTL_API", "3")
        .args(["snapshot", "restore"])
        .arg(file)
        .args(["--name", name, "--initial-cluster", ic])
        .args(["--initial-cluster-token", "floor-restored"])
        .args(["--initial-advertise-peer-urls", peer])
        .arg("--data-dir")
        .arg(data)
        .output()
        .unwrap();
    assert!(out.status.success(), "snapshot restore: {out:?}");
}

/// etcdctl of 3.4.23, which restores snapshots for 3.4 (no etcdutl).
pub fn etcdctl_34() -> PathBuf {
    etcdctl()
}

/// etcdutl of 3.5.1.
pub fn etcdutl_35() -> PathBuf {
    binaries().join("3.5.1/etcdutl")
}

/// Starts a writer on `urls` and waits (bounded) for
/// [`WRITES_BEFORE_LOSS`] acknowledged writes.
pub fn writer_with_acks(urls: Vec<String>, prefix: &str) -> Writer {
    let writer = Writer::start(urls, prefix);
    let deadline = Instant::now() + BOUND;
    while writer.acked().len() < WRITES_BEFORE_LOSS {
        assert!(Instant::now() < deadline, "writes not acknowledged");
        std::thread::sleep(Duration::from_millis(20));
    }
    writer
}
