//! Snapshot throughput on a ~100 MiB database (`BENCH_SNAPSHOT_MIB`): the
//! operator's backup stream, and a full backup through the local
//! `BackupStore` (what the operator does: free-space check, stream with
//! SHA-256, fsync, rename, trailer check, `etcdutl`/`etcdctl snapshot
//! status`, meta), each beside `etcdctl snapshot save` of the same member
//! in the same run, alternating. Prints numbers and the ratios; never
//! passes or fails on time.

// A benchmark that cannot do a step has nothing to report: it stops there.
#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use std::sync::Arc;

use etcd_operator::backup::snapshot;
use etcd_operator::backup::{BackupStore, Location, Source};
use etcd_operator::platform::local::backups::LocalBackups;
use etcd_operator::platform::local::binaries::Binaries;
use support::stats;

fn main() {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let filled = support::filled::filled(&rt);
    let source = filled.member.clone();
    let dir = tempfile::tempdir().unwrap();
    let etcdctl = support::etcd_bin().with_file_name("etcdctl");
    let (mut ours, mut theirs, mut full) = (Vec::new(), Vec::new(), Vec::new());
    let mut size = 0u64;
    let binaries = Arc::new(Binaries::new(vec![
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.etcd"),
    ]));
    let state = dir.path().join("state");
    let store = LocalBackups::new(&state, binaries.clone());
    let location = Location::of("s", None);
    for i in 0..runs {
        let dest = dir.path().join(format!("ours-{i}.db"));
        let t0 = Instant::now();
        let s = rt
            .block_on(snapshot::stream_to(
                Source {
                    member: &source.name,
                    url: &source.client_url,
                    tls: None,
                },
                &dest,
            ))
            .unwrap();
        ours.push(t0.elapsed());
        size = s.size;
        std::fs::remove_file(&dest).unwrap();

        let dest = dir.path().join(format!("etcdctl-{i}.db"));
        let t0 = Instant::now();
        let out = Command::new(&etcdctl)
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &source.client_url, "snapshot", "save"])
            .arg(&dest)
            .output()
            .unwrap();
        theirs.push(t0.elapsed());
        assert!(out.status.success(), "etcdctl snapshot save: {out:?}");
        std::fs::remove_file(&dest).unwrap();

        let t0 = Instant::now();
        rt.block_on(store.save(
            &location,
            Source {
                member: &source.name,
                url: &source.client_url,
                tls: None,
            },
        ))
        .unwrap();
        full.push(t0.elapsed());
        std::fs::remove_dir_all(&state).unwrap();
    }
    let mib = size as f64 / (1 << 20) as f64;
    let rate = |d: &[Duration]| mib / stats(d).0;
    println!("snapshot of a {mib:.0} MiB database, {runs} runs each, median:");
    println!(
        "  operator stream     {:>7.3}s  {:>7.1} MiB/s",
        stats(&ours).0,
        rate(&ours)
    );
    println!(
        "  etcdctl snapshot    {:>7.3}s  {:>7.1} MiB/s",
        stats(&theirs).0,
        rate(&theirs)
    );
    println!(
        "  ratio (operator / etcdctl throughput): {:.2}x",
        rate(&ours) / rate(&theirs)
    );
    println!(
        "  BackupStore::save    {:>7.3}s  {:>7.1} MiB/s  (stream, fsync, rename, trailer, \
         etcdutl + etcdctl snapshot status, meta)",
        stats(&full).0,
        rate(&full)
    );
    println!(
        "  ratio (full backup / etcdctl throughput): {:.2}x | target at least 0.9x",
        rate(&full) / rate(&theirs)
    );
}
