//! Continuous backups (`spec.backup.continuous`), against real etcd: a
//! burst of writes after the last full backup survives a backup-based
//! rebuild except for the last segment's, and a tampered segment cuts the
//! chain there (reported; the replay stops before it).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_operator::backup::{self, BackupMeta, BackupStore, Location, chain};
use etcd_operator::crd::RecoverySource;
use etcd_operator::platform::local::backups::LocalBackups;
use etcd_operator::platform::local::binaries::Binaries;
use etcd_operator::testing::acked::{Writer, not_found, read_prefix};
use etcd_operator::testing::{Env, binaries, client_urls, kill9, manifest};

/// The segment interval of these tests.
const INTERVAL: Duration = Duration::from_secs(1);

/// Three members, one full backup an hour, delta segments every second,
/// and a rebuild from backups (never from a survivor) on a quorum loss.
fn continuous(name: &str) -> String {
    let mut m = manifest(name, 3, "3.4.23");
    m.push_str(
        "  backup:\n    interval: 1h\n    maxBackups: 2\n    continuous:\n      segmentInterval: 1s\n",
    );
    m.push_str("  recovery:\n    restoreFromBackup: true\n    fromSurvivor: false\n");
    m
}

fn backups(env: &Env, cluster: &str) -> (PathBuf, Vec<BackupMeta>) {
    let dir = env.state.join("backups").join(cluster);
    let list = backup::list(&dir).expect("list backups");
    (dir, list)
}

/// Waits for the first full backup of `cluster`.
fn first_backup(env: &Env, cluster: &str) -> BackupMeta {
    env.wait_for("a full backup", || backups(env, cluster).1.first().cloned())
}

/// The intact segments of `base` on disk.
fn segments(env: &Env, cluster: &str, base: &BackupMeta) -> chain::Chain {
    chain::read(&backups(env, cluster).0, base)
}

/// The revision of a snapshot file, as `etcdutl snapshot status` says.
fn snapshot_revision(path: &str) -> i64 {
    let out = std::process::Command::new(binaries().join("3.5.1/etcdutl"))
        .args(["snapshot", "status", path, "-w", "json"])
        .output()
        .expect("etcdutl runs");
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    v["revision"].as_i64().expect("a revision")
}

#[test]
fn a_burst_after_the_last_full_backup_survives_a_rebuild_but_the_last_segment() {
    let mut env = Env::new();
    env.write_manifest("dl.yaml", &continuous("dl"));
    env.start_operator();
    let c = env.wait_running("dl", 3);
    let urls = client_urls(&c);
    let base = first_backup(&env, "dl");
    let writer = Writer::start(urls.clone(), "w/");
    let started = Instant::now();
    // A burst well past the full backup, over several segments.
    env.wait_for("1000 writes and 3 segments after the full backup", || {
        let chain = segments(&env, "dl", &base);
        (writer.acked().len() >= 1000 && chain.segments.len() >= 3).then_some(())
    });
    let members = c.status.as_ref().expect("status").members.clone();
    for m in &members[..2] {
        env.destroy("dl", &m.name);
    }
    let lost_at = Instant::now();
    let before_loss = writer.acked().len();
    let (c, r) = env.wait_rebuilt("dl rebuilt from backups", "dl", 3);
    let acked = writer.stop();
    assert_eq!(r.source, RecoverySource::Backup, "{r:?}");
    assert_eq!(r.backup, base.name, "rebuilt from the full backup: {r:?}");
    assert!(r.replayed_segments >= 3, "segments replayed: {r:?}");
    assert!(r.replayed_revision > base.revision, "{r:?}");
    assert_eq!(r.seed_revision, r.replayed_revision, "{r:?}");
    assert_eq!(r.replay_problem, None, "{r:?}");
    let found: HashMap<String, String> = read_prefix(&client_urls(&c), "w/").into_iter().collect();
    let missing = not_found(&acked, &found);
    // Every write the replayed segments hold is back, exactly.
    let behind: Vec<_> = missing
        .iter()
        .filter(|a| a.revision <= r.replayed_revision)
        .map(|a| (&a.key, a.revision))
        .collect();
    assert!(
        behind.is_empty(),
        "writes up to revision {} were replayed, yet these are missing: {behind:?}",
        r.replayed_revision
    );
    // What is lost was acknowledged in the last interval (and the flush
    // after it) before the loss: at most the last segment's writes.
    let window = missing
        .iter()
        .map(|a| lost_at.saturating_duration_since(a.at))
        .max()
        .unwrap_or_default();
    let rate = before_loss as f64 / lost_at.duration_since(started).as_secs_f64();
    println!(
        "MEASURED: {} of {} acknowledged writes lost (writer at {rate:.0}/s, segment interval \
         {INTERVAL:?}); the oldest lost was acknowledged {:.2} s before the loss; status: {} \
         revisions lost, loss window {:?} ms; {} segments replayed up to revision {}",
        missing.len(),
        acked.len(),
        window.as_secs_f64(),
        r.lost_revisions,
        r.loss_window_ms,
        r.replayed_segments,
        r.replayed_revision
    );
    assert!(
        window <= INTERVAL * 2,
        "{} writes lost, the oldest acknowledged {window:?} before the loss: more than the last \
         segment's",
        missing.len()
    );
    assert!(r.loss_window_ms.is_some(), "{r:?}");
    let log = std::fs::read_to_string(env.operator_log()).expect("log");
    assert!(
        log.contains("delta segments up to revision"),
        "the replay is logged"
    );
    // The restored members started without etcd's initial corruption
    // check (all restored the same file); a later start checks again.
    let members = c.status.as_ref().expect("status").members.clone();
    for m in &members {
        let pid = env.pid("dl", &m.name).expect("runs");
        assert!(!corrupt_check(pid), "{} started with the check", m.name);
    }
    let again = &members[0].name;
    let pid = env.pid("dl", again).expect("runs");
    kill9(pid);
    // A new pid can be read before it has exec'd etcd (its command line is
    // still the operator's then): wait for etcd's own.
    let restarted = env.wait_for("the killed member restarted as etcd", || {
        env.pid("dl", again).filter(|p| *p != pid && runs_etcd(*p))
    });
    assert!(
        corrupt_check(restarted),
        "{again} restarted without the check"
    );
}

/// Whether the process `pid` runs with etcd's initial corruption check.
fn runs_etcd(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == b"--data-dir"))
}

fn corrupt_check(pid: i32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("cmdline");
    cmdline
        .split(|b| *b == 0)
        .any(|a| a == etcd_operator::member::flags::INITIAL_CORRUPT_CHECK.as_bytes())
}

#[test]
fn a_tampered_segment_cuts_the_chain_and_the_replay_stops_before_it() {
    let mut env = Env::new();
    env.write_manifest("tp.yaml", &continuous("tp"));
    env.start_operator();
    let c = env.wait_running("tp", 3);
    let urls = client_urls(&c);
    let base = first_backup(&env, "tp");
    // Writes in batches, each in a segment of its own or more.
    for batch in 0..4 {
        let before = segments(&env, "tp", &base).segments.len();
        for i in 0..20 {
            let out = env.etcdctl(&urls, &["put", &format!("b{batch}/{i:02}"), "v"]);
            assert!(out.status.success(), "put: {out:?}");
        }
        env.wait_for("the batch in a segment", || {
            let chain = segments(&env, "tp", &base);
            (chain.segments.len() > before
                && chain.last_revision() >= base.revision + 20 * (batch + 1))
                .then_some(())
        });
    }
    env.stop_operator();
    let intact = segments(&env, "tp", &base);
    assert!(
        intact.segments.len() >= 4 && intact.cut.is_none(),
        "{intact:?}"
    );
    // One byte flipped in the middle of segment 2.
    let (dir, _) = backups(&env, "tp");
    let second = dir.join(chain::segment_file(&base.name, 2));
    let mut bytes = std::fs::read(&second).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(&second, &bytes).expect("tamper");
    let first_last = intact.segments[0].last_revision();

    // `backups` shows the cut.
    let out = env.operator_cli(&["backups", "tp"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("chain of {}", base.name)))
        .unwrap_or_else(|| panic!("a chain line in {text}"));
    assert!(
        line.contains("1 segments")
            && line.contains("CUT")
            && line.contains(&chain::segment_file(&base.name, 2)),
        "{line}"
    );

    // A restore replays segment 1 and stops before segment 2.
    let store = LocalBackups::new(
        &env.state,
        Arc::new(Binaries::new(vec![env.etcd_binaries.clone()])),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let restored = rt
        .block_on(store.open_chain_for_restore(&Location::of("tp", None), &base))
        .expect("set aside");
    assert_eq!(restored.replayed.segments, 1, "{restored:?}");
    assert_eq!(restored.replayed.revision, first_last, "{restored:?}");
    let problem = restored.problem.clone().expect("the cut is said");
    assert!(problem.contains("damaged"), "{problem}");
    let status = snapshot_revision(restored.source.as_str());
    assert_eq!(
        status, first_last,
        "the snapshot set aside ends at segment 1"
    );
    rt.block_on(store.close_restore(&restored.source));

    // The operator, back, finds the cut: logged, and a new full backup
    // starts a new chain.
    env.start_operator();
    env.wait_for("a new full backup", || {
        (backups(&env, "tp").1.len() >= 2).then_some(())
    });
    let log = std::fs::read_to_string(env.operator_log()).expect("log");
    assert!(
        log.contains(&format!("the chain of {} is cut at", base.name)),
        "the cut is logged"
    );
}

#[test]
fn a_chain_whose_history_is_compacted_ends_and_a_full_backup_starts_the_next() {
    let mut env = Env::new();
    env.write_manifest("cp.yaml", &continuous("cp"));
    env.start_operator();
    let c = env.wait_running("cp", 3);
    let urls = client_urls(&c);
    let base = first_backup(&env, "cp");
    for i in 0..10 {
        let out = env.etcdctl(&urls, &["put", &format!("a/{i}"), "v"]);
        assert!(out.status.success(), "put: {out:?}");
    }
    env.wait_for("a segment", || {
        (segments(&env, "cp", &base).last_revision() >= base.revision + 10).then_some(())
    });
    // While no operator follows, the cluster moves on and compacts the
    // history the chain would need next.
    env.stop_operator();
    let mut last = None;
    for i in 0..10 {
        let out = env.etcdctl(&urls, &["put", &format!("b/{i}"), "v", "-w", "json"]);
        assert!(out.status.success(), "put: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        last = v["header"]["revision"].as_i64();
    }
    let last = last.expect("a revision");
    let out = env.etcdctl(&urls, &["compaction", &last.to_string()]);
    assert!(out.status.success(), "compaction: {out:?}");
    let before = segments(&env, "cp", &base);
    env.start_operator();
    let newer = env.wait_for("a full backup after the compaction", || {
        backups(&env, "cp")
            .1
            .into_iter()
            .find(|m| m.name != base.name && m.revision >= last)
    });
    let log = std::fs::read_to_string(env.operator_log()).expect("log");
    assert!(
        log.contains(&format!("the chain of {} ends: etcd compacted", base.name)),
        "the end of the chain is logged"
    );
    // The old chain stays as it was (whole, with its base); the new one
    // follows the new backup.
    assert_eq!(segments(&env, "cp", &base), before);
    for i in 0..5 {
        let out = env.etcdctl(&urls, &["put", &format!("c/{i}"), "v"]);
        assert!(out.status.success(), "put: {out:?}");
    }
    env.wait_for("a segment of the new chain", || {
        let chain = segments(&env, "cp", &newer);
        (chain.cut.is_none() && chain.last_revision() >= last + 5).then_some(())
    });
}

#[test]
fn a_new_cluster_restored_from_a_backup_replays_its_segments() {
    let mut env = Env::new();
    env.write_manifest("src.yaml", &continuous("src"));
    env.start_operator();
    let c = env.wait_running("src", 3);
    let base = first_backup(&env, "src");
    // Writes after the full backup, over several segments.
    let writer = Writer::start(client_urls(&c), "w/");
    env.wait_for("300 writes and 3 segments after the full backup", || {
        let chain = segments(&env, "src", &base);
        (writer.acked().len() >= 300 && chain.segments.len() >= 3).then_some(())
    });
    let acked = writer.stop();
    let newest = acked.iter().map(|a| a.revision).max().expect("writes");
    // Every acknowledged write in a complete segment.
    let chain = env.wait_for("the last write in a segment", || {
        let chain = segments(&env, "src", &base);
        (chain.last_revision() >= newest).then_some(chain)
    });
    assert!(newest > base.revision, "the writes came after the backup");

    // The cluster goes; its backups stay.
    env.remove_manifest("src.yaml");
    env.wait_for("src deleted", || env.status("src").is_none().then_some(()));

    // A new cluster created from the full backup holds every write of the
    // segments after it.
    let mut m = manifest("rs", 1, "3.4.23");
    m.push_str(&format!("  restore:\n    backup: {}\n", base.name));
    env.write_manifest("rs.yaml", &m);
    let c = env.wait_running("rs", 1);
    let r = c
        .status
        .as_ref()
        .and_then(|s| s.restore.clone())
        .expect("status.restore");
    assert_eq!(r.backup, base.name, "{r:?}");
    assert_eq!(
        r.replayed_segments,
        i64::try_from(chain.segments.len()).expect("count"),
        "every complete segment replayed: {r:?}"
    );
    assert_eq!(r.replayed_revision, chain.last_revision(), "{r:?}");
    assert!(r.last_segment_time.is_some(), "{r:?}");
    assert_eq!(r.replay_problem, None, "{r:?}");
    let found: HashMap<String, String> = read_prefix(&client_urls(&c), "w/").into_iter().collect();
    let missing: Vec<_> = not_found(&acked, &found)
        .into_iter()
        .map(|a| (&a.key, a.revision))
        .collect();
    println!(
        "MEASURED: a new cluster restored from {} (revision {}) with {} segments replayed up to \
         revision {}: {} of {} acknowledged writes present",
        base.name,
        base.revision,
        r.replayed_segments,
        r.replayed_revision,
        acked.len() - missing.len(),
        acked.len()
    );
    assert!(
        missing.is_empty(),
        "writes of complete segments are missing: {missing:?}"
    );
    let log = std::fs::read_to_string(env.operator_log()).expect("log");
    assert!(
        log.contains("delta segments replayed into the snapshot set aside"),
        "the replay is logged"
    );
}

#[test]
fn large_values_written_while_no_operator_follows_are_caught_up_in_segments() {
    let mut env = Env::new();
    env.write_manifest("lv.yaml", &continuous("lv"));
    env.start_operator();
    let c = env.wait_running("lv", 3);
    let urls = client_urls(&c);
    let base = first_backup(&env, "lv");
    // 12 MiB in 48 revisions while no operator follows: catching up, etcd
    // sends them in one watch response far larger than 4 MiB.
    env.stop_operator();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let last = rt.block_on(async {
        let mut client = etcd_client::Client::connect(&urls, None)
            .await
            .expect("connect");
        let mut last = 0;
        for i in 0..48u8 {
            let r = client
                .put(format!("big/{i:02}"), vec![i; 256 << 10], None)
                .await
                .expect("put");
            last = r.header().expect("header").revision();
        }
        last
    });
    env.start_operator();
    env.wait_for("the large values in segments", || {
        (segments(&env, "lv", &base).last_revision() >= last).then_some(())
    });
    let chain = segments(&env, "lv", &base);
    assert_eq!(chain.cut, None, "{chain:?}");
    let log = std::fs::read_to_string(env.operator_log()).expect("log");
    assert!(
        !log.contains("decoded message length too large"),
        "the follower failed on a large watch response"
    );
}
