//! Full backups into an object store (S3: moto's server, started here on
//! loopback) on a ~100 MiB database (`BENCH_SNAPSHOT_MIB`): the operator's
//! `BackupStore::save` to `objectStore` (snapshot streamed into its folder,
//! verified with the trailer, `etcdutl` and `etcdctl snapshot status`,
//! uploaded in 16 MiB parts, meta last) beside the floor a user would run
//! by hand, `etcdctl snapshot save` then an upload of that file with the
//! same client, alternating in the same run; then a restore's download of
//! the newest backup (fetched, checked against its meta's SHA-256, set
//! aside). Section `full`.
//!
//! Section `chain`: the restore of a chain of `BENCH_RESTORE_MIB` MiB
//! (default 500: a full backup of 80 %, delta segments of 20 %) that the
//! operator uploaded to the bucket: downloaded (each object checked
//! against its meta's SHA-256), the base restored into a scratch member,
//! the segments replayed, the database sealed, beside `etcdutl snapshot
//! restore` of the result (`support/throughput.rs`; the same from a
//! folder is `benches/recovery.rs throughput`). Target: under 10 s.
//!
//! Section `loss`: a majority of a 3-member cluster destroyed under a
//! sequential writer while continuous backups (`segmentInterval: 1s`) go
//! into the bucket, rebuilt by the operator from the bucket, beside the
//! same with the backups in the cluster's folder, alternating: the time to
//! 3 healthy members, the acknowledged writes lost and the loss window
//! (from the last write kept to the last one acknowledged before the
//! loss). Target: at most the last second of writes.
//!
//! Prints numbers and ratios; never passes or fails on time. Arguments
//! after `--` pick sections (all by default), e.g. `cargo bench -p
//! etcd-operator --bench object_store -- loss`. Needs
//! `.venv/bin/moto_server` (ci/setup installs it).

// A benchmark that cannot do a step has nothing to report: it stops there.
#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_operator::backup::object::ObjectLocation;
use etcd_operator::backup::object::client::{Bucket, StoreEnv};
use etcd_operator::backup::{BackupStore, Location, Source};
use etcd_operator::crd::ObjectStoreSpec;
use etcd_operator::etcd::Clients;
use etcd_operator::platform::local::backups::LocalBackups;
use etcd_operator::platform::local::binaries::Binaries;
use etcd_operator::testing::bench::wanted;
use etcd_operator::testing::s3::S3Server;
use support::bucket::InBucket;
use support::rebuild::{self, Run};
use support::{stats, throughput};

const BUCKET: &str = "bench";

fn main() {
    etcd_operator::tls::install_crypto_provider();
    let runs = support::runs(3);
    let s3 = S3Server::start();
    s3.create_bucket(BUCKET);
    let rt = tokio::runtime::Runtime::new().unwrap();
    if wanted("full") {
        full(&rt, &s3, runs);
    }
    if wanted("chain") {
        throughput::run_in(&rt, runs, Some(&InBucket::new(&s3, "chain", "bench")));
    }
    if wanted("loss") {
        loss(&rt, &s3, runs);
    }
}

/// A full backup into the bucket beside etcdctl's plus an upload, and a
/// restore's download.
fn full(rt: &tokio::runtime::Runtime, s3: &S3Server, runs: usize) {
    let filled = support::filled::filled(rt);
    let member = filled.member.clone();
    let spec = ObjectStoreSpec {
        url: format!("s3://{BUCKET}/bench"),
        endpoint: Some(s3.endpoint()),
        region: None,
        credentials_secret: None,
        service_account_name: None,
    };
    let place = ObjectLocation::parse(&spec, "objectStore").unwrap();
    let store_env = StoreEnv::new(s3.credentials());
    let bucket = rt.block_on(Bucket::open(&place, &store_env)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let binaries = Arc::new(Binaries::new(vec![
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.etcd"),
    ]));
    let store = LocalBackups::new(dir.path().join("state"), binaries).with_store_env(store_env);
    let location = Location {
        object: Some(place),
        ..Location::of("s", None)
    };
    let source = || Source {
        member: &member.name,
        url: &member.client_url,
        tls: None,
    };
    let etcdctl = support::etcd_bin().with_file_name("etcdctl");
    let (mut floor, mut ours, mut fetch) = (Vec::new(), Vec::new(), Vec::new());
    let mut size = 0u64;
    for i in 0..runs {
        let file = dir.path().join(format!("etcdctl-{i}.db"));
        let t0 = Instant::now();
        let out = Command::new(&etcdctl)
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &member.client_url, "snapshot", "save"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "etcdctl snapshot save: {out:?}");
        size = rt
            .block_on(bucket.upload(&file, &format!("by-hand/{i}.db")))
            .unwrap()
            .size;
        floor.push(t0.elapsed());
        std::fs::remove_file(&file).unwrap();

        let t0 = Instant::now();
        let meta = rt.block_on(store.save(&location, source())).unwrap();
        ours.push(t0.elapsed());

        let t0 = Instant::now();
        let copy = rt
            .block_on(store.open_for_restore(&location, &meta.name))
            .unwrap();
        fetch.push(t0.elapsed());
        rt.block_on(store.close_restore(&copy));
    }
    let mib = size as f64 / (1 << 20) as f64;
    let rate = |d: &[Duration]| mib / stats(d).0;
    println!("full backup of a {mib:.0} MiB database into S3 (moto), {runs} runs each, median:");
    println!(
        "  etcdctl snapshot save + upload  {:>7.3}s  {:>7.1} MiB/s",
        stats(&floor).0,
        rate(&floor)
    );
    println!(
        "  BackupStore::save (objectStore) {:>7.3}s  {:>7.1} MiB/s  (stream, fsync, trailer, \
         etcdutl + etcdctl snapshot status, upload, meta)",
        stats(&ours).0,
        rate(&ours)
    );
    println!(
        "  ratio (operator / by hand throughput): {:.2}x | target at least 0.9x",
        rate(&ours) / rate(&floor)
    );
    println!(
        "  restore's download of a backup     {:>7.3}s  {:>7.1} MiB/s  (download, SHA-256 \
         against the meta, set aside)",
        stats(&fetch).0,
        rate(&fetch)
    );
}

/// Rebuilds from continuous backups in the bucket and in the folder,
/// alternating; the rows and what each lost.
fn loss(rt: &tokio::runtime::Runtime, s3: &S3Server, runs: usize) {
    let clients = Clients::new(Duration::from_millis(200));
    let (mut bucket, mut folder): (Vec<Run>, Vec<Run>) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let b = InBucket::new(s3, &format!("loss-{i}"), "bench");
        bucket.push(rebuild::backup_operator(rt, &clients, Some(&b)).0);
        folder.push(rebuild::backup_operator(rt, &clients, None).0);
    }
    let took = |v: &[Run]| v.iter().map(|r| r.took).collect::<Vec<_>>();
    let (bm, bp) = stats(&took(&bucket));
    let (fm, fp) = stats(&took(&folder));
    println!(
        "majority destroyed -> 3 healthy, continuous backups (1 s segments), {runs} runs each:"
    );
    println!(
        "  from S3 (moto)    median {bm:>7.3}s p99 {bp:>7.3}s | from the folder median \
         {fm:>7.3}s p99 {fp:>7.3}s | ratio {:.2}x",
        bm / fm
    );
    for (what, v) in [("from S3", &bucket), ("from the folder", &folder)] {
        println!("  {what}: {} | target at most 1 s", rebuild::loss_text(v));
        for r in v.iter() {
            println!("      {:.3}s, {}", r.took.as_secs_f64(), r.note);
        }
    }
}
