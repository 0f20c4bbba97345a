//! Restores with continuous backups on Kubernetes, for real: a real etcd
//! member behind the fake API server, its follower Deployment (run by the
//! stand-in kubelet) writing delta segments into the folder standing in
//! for the backup claim; a restore's `open-chain` Job sets the backup
//! aside with the segments replayed, so the snapshot members restore from
//! holds revisions past the full backup's (read back with `etcdutl`); a
//! segment changed in the claim cuts the chain there: the restore replays
//! the segments before it and says why it stopped.

use std::path::Path;

use super::continuous::{chain_in, spec, wait_chain, write};
use super::etcd_pods::EtcdPods;
use super::fixtures::resource_from;
use crate::backup::{BackupStore, Location, Source};
use crate::platform::Platform;

/// The revision `etcdutl snapshot status` reads in `file` (a snapshot,
/// or a member's database).
pub(super) fn snapshot_revision(file: &Path) -> i64 {
    let out = std::process::Command::new(crate::testing::binaries().join("3.5.1/etcdutl"))
        .args(["snapshot", "status", "-w", "json"])
        .arg(file)
        .output()
        .expect("etcdutl runs");
    assert!(out.status.success(), "snapshot status: {out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    v["revision"].as_i64().expect("a revision")
}

/// Changes one byte in the middle of `file`.
fn damage(file: &Path) {
    let mut bytes = std::fs::read(file).expect("the segment");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(file, bytes).expect("written back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_job_replays_the_chain_and_stops_at_a_damaged_segment() {
    let etcd = EtcdPods::start("kube-chain-restore", "3.5.1", 1).await;
    let mut kv = etcd_client::Client::connect([etcd.url(0)], None)
        .await
        .expect("a client");
    write(&mut kv, "before", 3).await;
    let client_url = etcd.configs[0].addr.client_url.clone();
    let on = resource_from(spec(true));
    let (platform, _fake, kubelet) = etcd.backup_platform(&on).await;
    let location = Location::of("demo", None);
    let store = platform.backups();
    let source = Source {
        member: "demo-0",
        url: &client_url,
        tls: None,
    };
    let base = store.save(&location, source).await.expect("a full backup");

    // Two batches of writes after the backup; the second batch's segments
    // come after the one holding the first batch's last revision.
    let first = write(&mut kv, "first", 10).await;
    wait_chain(&kubelet, &base, first).await;
    let second = write(&mut kv, "second", 10).await;
    wait_chain(&kubelet, &base, second).await;
    // The follower stops: the chain stays as it is from here on.
    platform
        .prepare("demo", &resource_from(spec(false)), 1, true)
        .await
        .expect("prepared");
    let whole = chain_in(&kubelet, &base);
    assert_eq!(whole.cut, None);
    assert!(whole.last_revision() >= second && second > base.revision);

    // A restore (a rebuild's) replays every segment into the copy.
    let claim = kubelet.claim("demo-backups");
    let copy = claim.join("clusters/demo/restore.db");
    let restore = store
        .open_chain_for_restore(&location, &base)
        .await
        .expect("set aside with the chain");
    assert_eq!(
        restore.source.as_str(),
        "persistentvolumeclaims/demo-backups/clusters/demo/restore.db"
    );
    assert_eq!(restore.problem, None);
    assert_eq!(restore.replayed.segments, whole.segments.len());
    assert_eq!(restore.replayed.revision, whole.last_revision());
    assert_eq!(
        restore.replayed.last_unix_ms,
        whole.last_unix_ms(),
        "{restore:?}"
    );
    assert_eq!(snapshot_revision(&copy), whole.last_revision());
    assert!(
        !claim.join("clusters/demo/replay").exists(),
        "the scratch member's folder is gone"
    );
    store.close_restore(&restore.source).await;
    assert!(!copy.exists(), "the copy set aside is dropped");

    // The last segment is changed in the claim: the chain is cut there;
    // a restore of the backup by name (a new cluster's spec.restore)
    // replays the segments before it and says why it stopped.
    let last = claim
        .join("backups/demo")
        .join(crate::backup::chain::segment_file(
            &base.name,
            whole.segments.len() as u64,
        ));
    damage(&last);
    let cut = chain_in(&kubelet, &base);
    assert_eq!(cut.segments.len(), whole.segments.len() - 1);
    assert!(cut.last_revision() >= first && cut.last_revision() < second);
    let restore = store
        .open_named_for_restore(&location, &base.name)
        .await
        .expect("set aside with the intact start of the chain");
    let problem = restore.problem.clone().expect("the cut is said");
    assert!(problem.contains("damaged"), "{problem}");
    assert_eq!(Some(&problem), cut.cut.as_ref());
    assert_eq!(restore.replayed.segments, cut.segments.len());
    assert_eq!(restore.replayed.revision, cut.last_revision());
    assert_eq!(snapshot_revision(&copy), cut.last_revision());
    store.close_restore(&restore.source).await;

    let names = kubelet.ran();
    let chains = names
        .iter()
        .filter(|n| n.starts_with("demo-open-chain-"))
        .count();
    assert_eq!(chains, 2, "{names:?}");
    drop(kubelet);
    drop(etcd);
}
