//! The operator's side of a rebuild from backups after a majority is
//! destroyed (`benches/recovery.rs` section `backup`,
//! `benches/object_store.rs` section `loss`), and what both sections and
//! the survivor rows share: a 3-member
//! cluster with continuous backups (1 s delta segments, into a bucket when
//! one is given) under a sequential writer, two members destroyed (killed,
//! data wiped), then the time until the operator says it rebuilt the
//! cluster and its 3 members answer healthy, and what the writer lost.

use std::time::{Duration, Instant};

use etcd_operator::backup::{BackupMeta, BackupStore, Location, chain};
use etcd_operator::crd::{EtcdCluster, RecoveryStatus};
use etcd_operator::etcd::Clients;
use etcd_operator::platform::local::backups::LocalBackups;
use etcd_operator::testing::{Env, client_urls, kill9, manifest};

use super::bucket::InBucket;
use super::dr::{self, Loss};
use super::{BOUND, healthy};

/// One measured rebuild: its time, what it lost, and a note.
pub struct Run {
    pub took: Duration,
    pub loss: Loss,
    pub note: String,
}

/// A local-platform environment running the release operator.
pub fn operator_env() -> Env {
    let mut env = Env::new();
    env.operator_bin = Some(env!("CARGO_BIN_EXE_etcd-operator").into());
    // BENCH_LOG: the operator's log filter (for a story in more detail).
    env.log_filter = std::env::var("BENCH_LOG").unwrap_or_else(|_| "info".into());
    env
}

/// One full backup an hour, delta segments every second (into `bucket`
/// when given), a rebuild from backups (never from a survivor), as
/// tests/deltas.rs.
pub fn continuous(name: &str, bucket: Option<&InBucket>) -> String {
    let mut m = manifest(name, 3, "3.4.23");
    m.push_str("  backup:\n    interval: 1h\n    maxBackups: 2\n");
    m.push_str(&bucket.map(InBucket::yaml).unwrap_or_default());
    m.push_str("    continuous:\n      segmentInterval: 1s\n");
    m.push_str("  recovery:\n    restoreFromBackup: true\n    fromSurvivor: false\n");
    m
}

/// Kills `member` and wipes its data: lost for good.
pub fn destroy(env: &Env, cluster: &str, member: &str) {
    let pid = env.pid(cluster, member).unwrap();
    std::fs::remove_dir_all(env.layout().data_dir(cluster, member)).unwrap();
    kill9(pid);
}

/// Polls (every 5 ms) until the operator says it rebuilt `cluster` and its
/// 3 members answer healthy themselves (one leader, 3 started voters).
pub async fn until_rebuilt(
    env: &Env,
    clients: &Clients,
    cluster: &str,
    since: Instant,
) -> (Duration, EtcdCluster) {
    loop {
        if let Some(c) = env.status(cluster)
            && c.status
                .as_ref()
                .is_some_and(|s| s.last_recovery.is_some() && s.members.len() == 3)
            && healthy(clients, &client_urls(&c)).await
        {
            return (since.elapsed(), c);
        }
        assert!(
            since.elapsed() < BOUND,
            "{cluster} not rebuilt within {BOUND:?}; operator log: {}",
            env.operator_log().display()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The cluster's last rebuild, as its status says.
pub fn recovery(c: &EtcdCluster) -> RecoveryStatus {
    c.status
        .as_ref()
        .and_then(|s| s.last_recovery.clone())
        .unwrap()
}

/// The newest full backup in `location`, waited for (bounded).
fn first_backup(
    rt: &tokio::runtime::Runtime,
    env: &Env,
    store: &LocalBackups,
    location: &Location,
) -> BackupMeta {
    env.wait_for("a full backup", || {
        rt.block_on(store.list(location)).ok()?.first().cloned()
    })
}

/// Waits (bounded) until `location` holds at least 3 delta segments after
/// `base` (read from the bucket into a folder of `env`'s, when in one).
fn until_segments(
    rt: &tokio::runtime::Runtime,
    env: &Env,
    store: &LocalBackups,
    location: &Location,
    base: &BackupMeta,
) {
    let copy = env.dir.path().join("chain-seen");
    env.wait_for("3 segments after the full backup", || {
        let dir = if location.object.is_some() {
            std::fs::create_dir_all(&copy).ok()?;
            rt.block_on(store.object_segments_into(location, base, &copy))
                .ok()?;
            copy.clone()
        } else {
            store.dir(location)
        };
        (chain::read(&dir, base).segments.len() >= 3).then_some(())
    });
}

/// The operator's rebuild from backups (in `bucket` when given), and how
/// many revisions it replayed on top of the full backup (the floor of
/// benches/recovery.rs replays as many). With `BENCH_STORY` set it prints
/// where the rebuild's time went.
pub fn backup_operator(
    rt: &tokio::runtime::Runtime,
    clients: &Clients,
    bucket: Option<&InBucket>,
) -> (Run, i64) {
    let mut env = operator_env();
    let (store, location) = match bucket {
        Some(b) => {
            env.operator_env.extend(b.credentials.iter().cloned());
            (b.reader(&env.state), b.location("bk"))
        }
        None => (
            LocalBackups::new(
                &env.state,
                std::sync::Arc::new(etcd_operator::platform::local::binaries::Binaries::new(
                    vec![env.etcd_binaries.clone()],
                )),
            ),
            Location::of("bk", None),
        ),
    };
    env.write_manifest("bk.yaml", &continuous("bk", bucket));
    env.start_operator();
    let c = env.wait_running("bk", 3);
    let base = first_backup(rt, &env, &store, &location);
    let writer = dr::writer_with_acks(client_urls(&c), "w/");
    until_segments(rt, &env, &store, &location, &base);
    let members = c.status.clone().unwrap().members;
    for m in &members[..2] {
        destroy(&env, "bk", &m.name);
    }
    let lost_at = Instant::now();
    let lost_wall = std::time::SystemTime::now();
    let (took, c) = rt.block_on(until_rebuilt(&env, clients, "bk", lost_at));
    let acked = writer.stop();
    // With BENCH_STORY set: where the rebuild's time went (the operator's
    // log and the members' notable lines, from the loss on).
    if std::env::var_os("BENCH_STORY").is_some() {
        println!(
            "--- story of a backup rebuild ({:.3}s) ---",
            took.as_secs_f64()
        );
        println!("{}", env.story("bk", lost_wall, &[]));
    }
    let r = recovery(&c);
    let run = Run {
        took,
        loss: dr::loss(&acked, &client_urls(&c), "w/", lost_at),
        note: format!(
            "source {:?}, {} segments replayed, {} revisions lost",
            r.source, r.replayed_segments, r.lost_revisions
        ),
    };
    (run, r.replayed_revision - r.backup_revision)
}

/// The runs' losses: acknowledged writes missing, and the loss windows.
pub fn loss_text(runs: &[Run]) -> String {
    let missing: Vec<String> = runs
        .iter()
        .map(|r| format!("{}/{}", r.loss.missing, r.loss.acked))
        .collect();
    let windows: Vec<String> = runs
        .iter()
        .map(|r| format!("{:.3}", r.loss.window.as_secs_f64()))
        .collect();
    format!(
        "writes lost {} | loss window s {}",
        missing.join(" "),
        windows.join(" ")
    )
}
