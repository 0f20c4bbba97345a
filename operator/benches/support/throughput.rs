//! The restore throughput of a backup chain (`benches/recovery.rs`,
//! section `throughput`): a 1-member 3.5.1 cluster filled with large
//! values, a full backup of most of it, the rest written while continuous
//! backups run (delta segments), then the operator's restore path timed
//! (`LocalBackups::open_chain_for_restore`: the base restored into a
//! scratch member, the segments replayed, the member stopped and its
//! database sealed as a snapshot file, its revision checked), its phases timed one by one with the same library functions,
//! beside `etcdutl snapshot restore` of the resulting snapshot. With a
//! bucket ([`run_in`]), the backups go into an object store and the
//! restore downloads the chain from there first, as a rebuild does.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::Client;
use futures::StreamExt;

use etcd_operator::backup::{self, BackupMeta, BackupStore, Location, Source, chain, replay};
use etcd_operator::platform::local::backups::LocalBackups;
use etcd_operator::platform::local::binaries::Binaries;
use etcd_operator::platform::local::process;
use etcd_operator::testing::{Env, client_urls, manifest};

use super::bucket::InBucket;
use super::dr::{etcdutl_35, snapshot_restore};
use super::stats;

/// Each value written: a quarter MiB (etcd takes requests up to 1.5 MiB).
const VALUE: usize = 256 << 10;
/// The longest the setup (filling, the full backup, the segments) may take.
const SETUP_BOUND: Duration = Duration::from_secs(900);
const MIB: f64 = 1024.0 * 1024.0;

fn total_mib() -> usize {
    std::env::var("BENCH_RESTORE_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

/// The cluster, with backups (into `bucket`, else its folder) or not yet.
fn big(backups: bool, bucket: Option<&InBucket>) -> String {
    let mut m = manifest("tp", 1, "3.5.1");
    m.push_str("  quotaBackendBytes: 4294967296\n");
    if backups {
        m.push_str("  backup:\n    interval: 1h\n    maxBackups: 2\n");
        m.push_str(&bucket.map(InBucket::yaml).unwrap_or_default());
        m.push_str("    continuous:\n      segmentInterval: 1s\n");
    }
    m
}

/// Writes `mib` MiB of distinct values under `prefix`, 8 puts in flight;
/// returns the revision of the last.
async fn fill(urls: &[String], prefix: &str, mib: usize) -> i64 {
    let client = Client::connect(urls, None).await.unwrap();
    let n = mib * (1 << 20) / VALUE;
    let revs: Vec<i64> = futures::stream::iter(0..n)
        .map(|i| {
            let mut c = client.clone();
            async move {
                let seed = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let value: Vec<u8> = (0..VALUE as u64)
                    .map(|b| (seed ^ b.wrapping_mul(0x2545_F491)).to_le_bytes()[(b % 8) as usize])
                    .collect();
                let r = c.put(format!("{prefix}{i:06}"), value, None).await.unwrap();
                r.header().map_or(0, |h| h.revision())
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    revs.into_iter().max().unwrap_or(0)
}

/// Polls (every second, bounded) until `f` returns `Some`.
fn until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let since = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            since.elapsed() < SETUP_BOUND,
            "no {what} within {SETUP_BOUND:?}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Where the chain is: the backup store and location to restore it from,
/// and a folder with its segments (the backup folder, or a copy of what
/// the bucket holds).
struct Built {
    env: Env,
    base: BackupMeta,
    dir: PathBuf,
    store: LocalBackups,
    location: Location,
}

/// The chain, built (its operator stopped, the member left running).
fn build(rt: &tokio::runtime::Runtime, bucket: Option<&InBucket>) -> Built {
    let total = total_mib();
    let full = total * 4 / 5;
    let mut env = Env::new();
    env.operator_bin = Some(env!("CARGO_BIN_EXE_etcd-operator").into());
    env.log_filter = "info".into();
    if let Some(b) = bucket {
        env.operator_env.extend(b.credentials.iter().cloned());
    }
    let (store, location) = match bucket {
        Some(b) => (b.reader(&env.state), b.location("tp")),
        None => (
            LocalBackups::new(
                &env.state,
                Arc::new(Binaries::new(vec![env.etcd_binaries.clone()])),
            ),
            Location::of("tp", None),
        ),
    };
    env.write_manifest("tp.yaml", &big(false, bucket));
    env.start_operator();
    let urls = client_urls(&env.wait_running("tp", 1));
    let t = Instant::now();
    let rev = rt.block_on(fill(&urls, "full/", full));
    println!(
        "  setup: {full} MiB written in {:.1}s (up to revision {rev})",
        t.elapsed().as_secs_f64()
    );
    env.write_manifest("tp.yaml", &big(true, bucket));
    let dir = match bucket {
        Some(_) => env.dir.path().join("chain-from-the-bucket"),
        None => env.state.join("backups").join("tp"),
    };
    let base = until("full backup", || {
        rt.block_on(store.list(&location))
            .ok()?
            .into_iter()
            .find(|m| m.revision >= rev)
    });
    let t = Instant::now();
    let last = rt.block_on(fill(&urls, "delta/", total - full));
    until("delta segments up to the last write", || {
        if bucket.is_some() {
            std::fs::create_dir_all(&dir).ok()?;
            rt.block_on(store.object_segments_into(&location, &base, &dir))
                .ok()?;
        }
        (chain::read(&dir, &base).last_revision() >= last).then_some(())
    });
    println!(
        "  setup: {} MiB more written and in delta segments after {:.1}s (up to revision {last})",
        total - full,
        t.elapsed().as_secs_f64()
    );
    env.stop_operator();
    Built {
        env,
        base,
        dir,
        store,
        location,
    }
}

/// The restore path's phases, one by one, as merge.rs runs them: the
/// chain read, the base checked, restored and served by a scratch member,
/// the replay, the scratch member stopped, its database sealed as a
/// snapshot file, its revision checked.
async fn phases(env: &Env, base: &BackupMeta, dir: &Path) -> Vec<(&'static str, Duration)> {
    let mut out = Vec::new();
    let mut t = Instant::now();
    let mut lap = |what: &'static str, out: &mut Vec<(&'static str, Duration)>| {
        out.push((what, t.elapsed()));
        t = Instant::now();
    };
    let (d, b) = (dir.to_path_buf(), base.clone());
    let c = tokio::task::spawn_blocking(move || chain::read(&d, &b))
        .await
        .unwrap();
    lap("chain read + hashed", &mut out);
    let (file, sha) = (base.path(dir), base.sha256.clone());
    tokio::task::spawn_blocking(move || backup::check_file(&file, Some(&sha)))
        .await
        .unwrap()
        .unwrap();
    lap("base checked", &mut out);
    let scratch = tempfile::tempdir_in(env.dir.path()).unwrap();
    let data = scratch.path().join("data");
    let (peer, url) = ("http://127.0.0.1:23800", "http://127.0.0.1:23790");
    let ic = format!("p={peer}");
    snapshot_restore(&etcdutl_35(), &base.path(dir), &data, "p", peer, &ic);
    lap("base restored (etcdutl)", &mut out);
    let args: Vec<String> = [
        "--name",
        "p",
        "--data-dir",
        &data.to_string_lossy(),
        "--listen-client-urls",
        url,
        "--advertise-client-urls",
        url,
        "--listen-peer-urls",
        peer,
        "--initial-advertise-peer-urls",
        peer,
        "--initial-cluster",
        &ic,
        "--initial-cluster-token",
        "floor-restored",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let etcd = etcd_operator::testing::etcd_binary("3.5.1");
    let id = process::spawn(&etcd, &args, &scratch.path().join("etcd.log")).unwrap();
    let guard = Killed(Some(id));
    let since = Instant::now();
    let source = Source {
        member: "p",
        url,
        tls: None,
    };
    let replayed = loop {
        match replay::apply(source, &c).await {
            Ok(r) => break r,
            Err(e) if since.elapsed() < Duration::from_secs(60) => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("replay: {e}"),
        }
    };
    lap("scratch served + segments replayed", &mut out);
    assert_eq!(replayed.revision, c.last_revision());
    let mut guard = guard;
    let id = guard.0.take().unwrap();
    process::signal(&id, rustix::process::Signal::TERM).unwrap();
    process::wait_exit(id).await.unwrap();
    lap("scratch stopped (SIGTERM)", &mut out);
    let dest = scratch.path().join("merged.db");
    let (db, d) = (data.join("member/snap/db"), dest.clone());
    tokio::task::spawn_blocking(move || backup::snapshot::seal_db(&db, &d))
        .await
        .unwrap()
        .unwrap();
    lap("database sealed (moved, SHA-256 appended)", &mut out);
    let tool = backup::tools::Tool {
        label: "etcdutl 3.5.1".into(),
        path: etcdutl_35(),
    };
    let status = backup::tools::status(&tool, &dest).await.unwrap();
    assert_eq!(status.revision, c.last_revision());
    lap("revision checked (etcdutl snapshot status)", &mut out);
    drop(guard);
    out
}

/// Kills the scratch member when dropped.
struct Killed(Option<process::ProcessId>);

impl Drop for Killed {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = process::signal(&p, rustix::process::Signal::KILL);
        }
    }
}

/// Builds a chain in the cluster's folder, times its restore `runs` times,
/// prints the rows.
pub fn run(rt: &tokio::runtime::Runtime, runs: usize) {
    run_in(rt, runs, None);
}

/// [`run`] with the chain in `bucket` when given: each restore downloads
/// it first (checked against the metas' SHA-256), as a rebuild does.
pub fn run_in(rt: &tokio::runtime::Runtime, runs: usize, bucket: Option<&InBucket>) {
    // The operator takes no backup that would leave less than its
    // free-space floor; the chain, the member, the scratch member and the
    // restores take about 3 times the chain.
    let tmp = std::env::temp_dir();
    let need = ((total_mib() as u64) * 3) << 20;
    if let Err(e) = etcd_operator::platform::local::space::check(&tmp, need) {
        println!(
            "restore throughput: skipped, not enough free space under {}: {e}",
            tmp.display()
        );
        return;
    }
    let Built {
        env,
        base,
        dir,
        store,
        location,
    } = build(rt, bucket);
    let c = chain::read(&dir, &base);
    let segs: u64 = chain::segment_files(&dir)
        .iter()
        .filter(|(b, _, _)| *b == base.name)
        .map(|(_, _, p)| size(p))
        .sum();
    let chain_mib = (base.size + segs) as f64 / MIB;
    let (mut ours, mut floor) = (Vec::new(), Vec::new());
    let mut out_mib = 0.0;
    for _ in 0..runs {
        let t = Instant::now();
        let restored = rt
            .block_on(store.open_chain_for_restore(&location, &base))
            .unwrap();
        ours.push(t.elapsed());
        assert_eq!(restored.problem, None, "{restored:?}");
        assert_eq!(restored.replayed.revision, c.last_revision());
        let file = PathBuf::from(restored.source.as_str());
        out_mib = size(&file) as f64 / MIB;
        let scratch = tempfile::tempdir_in(env.dir.path()).unwrap();
        let peer = "http://127.0.0.1:23800";
        let t = Instant::now();
        snapshot_restore(
            &etcdutl_35(),
            &file,
            &scratch.path().join("data"),
            "f",
            peer,
            &format!("f={peer}"),
        );
        floor.push(t.elapsed());
        rt.block_on(store.close_restore(&restored.source));
    }
    let (om, op) = stats(&ours);
    let (fm, fp) = stats(&floor);
    println!(
        "{:<36} n={:<2} median {om:>6.2}s p99 {op:>6.2}s = {:>6.1} MiB/s | floor (etcdutl snapshot \
         restore of the {out_mib:.0} MiB result) median {fm:>6.2}s p99 {fp:>6.2}s = {:>6.1} MiB/s \
         | target under 10 s",
        format!(
            "restore of a {chain_mib:.0} MiB chain{}",
            if bucket.is_some() { " from S3" } else { "" }
        ),
        ours.len(),
        chain_mib / om,
        out_mib / fm,
    );
    println!(
        "    chain: base {} ({:.0} MiB, revision {}), {} segments ({:.0} MiB) up to revision {}",
        base.name,
        base.size as f64 / MIB,
        base.revision,
        c.segments.len(),
        segs as f64 / MIB,
        c.last_revision()
    );
    if let Some(b) = bucket {
        // The phases after the download are the folder's (section
        // `throughput` of benches/recovery.rs); a standby bootstraps from
        // the same chain.
        let mut env = env;
        super::standby_boot::run(&mut env, b, (&base, c.last_revision()), om);
        return;
    }
    let p = rt.block_on(phases(&env, &base, &dir));
    let line: Vec<String> = p
        .iter()
        .map(|(w, d)| format!("{w} {:.2}s", d.as_secs_f64()))
        .collect();
    println!("    phases (one run): {}", line.join(", "));
}
