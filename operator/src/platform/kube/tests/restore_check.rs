//! Restore checks on Kubernetes, for real: an etcd member behind the fake
//! API server is backed up by a backup Job, and a restore check Job (run
//! by the stand-in kubelet with a folder for the claim) restores the
//! backup into a scratch member and compares its KV hash with the live
//! member's: a good backup is verified, a backup whose snapshot was
//! replaced by another cluster's at the same revision (its meta made to
//! match, so it checks out as a file) is a mismatch, and once the live
//! member compacted past a backup's revision the check says unverifiable.
//! Each result is kept in the backup's meta in the claim, as locally.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::etcd_pods::EtcdPods;
use super::fake::fake;
use super::fixtures::resource;
use super::kubelet::Kubelet;
use crate::backup::proof::Verdict;
use crate::backup::schedule::Schedule;
use crate::backup::{self, BackupMeta, BackupStore, Location, Source};
use crate::crd::StoragePolicy;
use crate::metrics::ClusterMetrics;
use crate::platform::Platform;
use crate::platform::kube::KubePlatform;
use crate::platform::kube::pod::DEFAULT_IMAGE;

/// Runs etcdctl 3.5.1 against `url`; its output as JSON.
fn etcdctl(url: &str, args: &[&str]) -> serde_json::Value {
    let out = std::process::Command::new(crate::testing::binaries().join("3.5.1/etcdctl"))
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", url, "--command-timeout", "5s", "-w", "json"])
        .args(args)
        .output()
        .expect("etcdctl runs");
    assert!(out.status.success(), "etcdctl {args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or_default()
}

/// Puts `key` and returns the revision etcd answered with.
fn put(url: &str, key: &str, value: &str) -> i64 {
    let v = etcdctl(url, &["put", key, value]);
    v["header"]["revision"].as_i64().expect("a revision")
}

/// Replaces the snapshot of `b` (in `dir`) with one of another cluster at
/// the same revision, other keys, and its meta's SHA-256 with the new
/// file's: a good etcd snapshot, not what the cluster held.
async fn replace_with_foreign(dir: &std::path::Path, b: &BackupMeta) -> BackupMeta {
    let foreign = EtcdPods::start("kube-restore-check/foreign", "3.5.1", 1).await;
    let url = foreign.url(0);
    let mut rev = 1;
    let mut i = 0;
    while rev < b.revision {
        rev = put(&url, &format!("other-{i}"), "not the cluster's");
        i += 1;
    }
    assert_eq!(rev, b.revision, "the foreign cluster overshot");
    let path = b.path(dir);
    let out = std::process::Command::new(crate::testing::binaries().join("3.5.1/etcdctl"))
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &url, "snapshot", "save"])
        .arg(&path)
        .output()
        .expect("etcdctl runs");
    assert!(out.status.success(), "snapshot save: {out:?}");
    let mut meta = b.clone();
    meta.sha256 = backup::check_file(&path, None).expect("a good file");
    backup::write_meta(dir, &meta).expect("meta");
    meta
}

/// The meta of `name` as the claim holds it.
fn recorded(dir: &std::path::Path, name: &str) -> BackupMeta {
    let list = backup::list(dir).expect("listed");
    list.into_iter()
        .find(|m| m.name == name)
        .expect("the backup is in the claim")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_check_job_verifies_a_backup_and_catches_a_foreign_snapshot() {
    let pods = EtcdPods::start("kube-restore-check", "3.5.1", 1).await;
    let live_url = pods.url(0);
    for i in 0..10 {
        put(&live_url, &format!("k{i:02}"), "v");
    }
    let (client, fake) = fake();
    let client_url = pods.configs[0].addr.client_url.clone();
    let dns = BTreeMap::from([(client_url.clone(), live_url.clone())]);
    let kubelet = Kubelet::start(fake.clone(), dns);
    let p = KubePlatform::new(client, "default", DEFAULT_IMAGE)
        .with_backup_image(Some("etcd-operator:test".into()));
    let r = resource(1, "3.5.1", StoragePolicy::Persistent);
    p.register("demo", &r, 0).expect("registered");
    let location = Location::of("demo", None);
    let store = p.backups();
    let live = Source {
        member: "demo-0",
        url: &client_url,
        tls: None,
    };
    let claim = kubelet.claim("demo-backups");
    let dir = claim.join("backups/demo");

    // A good backup restores to what the cluster held.
    let b1 = store.save(&location, live).await.expect("a backup");
    let check = store
        .restore_check(&location, &b1, live)
        .await
        .expect("the check ran");
    assert_eq!(check.result, Verdict::Verified, "{check:?}");
    assert!(check.live_hash.is_some(), "{check:?}");
    assert_eq!(check.backup_hash, check.live_hash);
    assert_eq!(check.revision, b1.revision);
    assert_eq!(check.live_member, "demo-0");
    assert_eq!(recorded(&dir, &b1.name).restore_check, Some(check));
    assert!(
        !claim.join("clusters/demo/restore-check").exists(),
        "the scratch member's folder is gone"
    );
    let listed = store.list(&location).await.expect("listed");
    assert!(
        listed.iter().any(|m| m.restore_check.is_some()),
        "the list kept from the Job's report shows the check: {listed:?}"
    );
    let job = kubelet
        .jobs()
        .into_iter()
        .find(|j| {
            j["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("demo-prove-"))
        })
        .expect("a restore check Job");
    let args = &job["spec"]["template"]["spec"]["containers"][0]["args"];
    assert_eq!(
        args,
        &serde_json::json!([
            "backup-job",
            "--cluster",
            "demo",
            "--uid",
            "uid-1",
            "prove",
            "--backup",
            b1.name,
            "--member",
            "demo-0",
            "--url",
            client_url
        ])
    );

    // Another cluster's snapshot at the same revision, under a backup's
    // name with a matching meta: it checks out as a file, but it is not
    // what the cluster held.
    for i in 0..5 {
        put(&live_url, &format!("later{i}"), "w");
    }
    let b2 = store.save(&location, live).await.expect("a backup");
    let b2 = replace_with_foreign(&dir, &b2).await;
    store.verify(&location, &b2).await.expect("a good file");
    let check = store
        .restore_check(&location, &b2, live)
        .await
        .expect("the check ran");
    assert_eq!(check.result, Verdict::Mismatch, "{check:?}");
    assert!(check.backup_hash.is_some() && check.live_hash.is_some());
    assert_ne!(check.backup_hash, check.live_hash);
    assert_eq!(recorded(&dir, &b2.name).restore_check, Some(check));

    // The live member compacts past the first backup's revision: nothing
    // to compare it with.
    let now = put(&live_url, "after", "x");
    etcdctl(&live_url, &["compact", &now.to_string()]);
    let check = store
        .restore_check(&location, &b1, live)
        .await
        .expect("the check ran");
    assert_eq!(check.result, Verdict::Unverifiable, "{check:?}");
    assert!(check.message.contains("compacted"), "{check:?}");

    // A TLS cluster's check waits for the client certificate Secret the
    // Job mounts: no Job before the operator has made it (a pod whose
    // Secret volume is missing would wait, unseen, for its deadline).
    let jobs = kubelet.ran().len();
    let tls = crate::tls::ClientTls {
        ca: "ca".into(),
        cert_key: crate::tls::CertKey {
            cert: "cert".into(),
            key: "key".into(),
        },
        server_name: None,
    };
    let https = Source {
        tls: Some(&tls),
        ..live
    };
    let e = store
        .restore_check(&location, &b1, https)
        .await
        .expect_err("no Secret yet");
    assert!(e.to_string().contains("secret demo-client-tls"), "{e}");
    assert_eq!(kubelet.ran().len(), jobs, "no Job without its Secret");
    assert!(!claim.join("clusters/demo/restore-check").exists());
}

/// `spec.backup.restoreCheck` on Kubernetes: the controller's backup
/// schedule, with the platform's store, takes a backup in a Job, then
/// proves it in another and shows the result in the status fields the
/// local platform fills, with the same words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_restore_check_shows_in_the_status() {
    let pods = EtcdPods::start("kube-restore-check-schedule", "3.5.1", 1).await;
    let live_url = pods.url(0);
    for i in 0..5 {
        put(&live_url, &format!("k{i}"), "v");
    }
    let (client, fake) = fake();
    let client_url = pods.configs[0].addr.client_url.clone();
    let dns = BTreeMap::from([(client_url.clone(), live_url)]);
    let kubelet = Kubelet::start(fake.clone(), dns);
    let p = KubePlatform::new(client, "default", DEFAULT_IMAGE)
        .with_backup_image(Some("etcd-operator:test".into()));
    let r = resource(1, "3.5.1", StoragePolicy::Persistent);
    p.register("demo", &r, 0).expect("registered");
    let policy = crate::validate::BackupPolicy {
        interval: Duration::from_secs(3600),
        max_backups: 2,
        path: None,
        persistent_volume_claim: None,
        claim_size: None,
        storage_class: None,
        object: None,
        restore_check: Some(Duration::from_secs(3600)),
        continuous: None,
    };
    let schedule = Schedule::start(
        policy,
        Location::of("demo", None),
        p.backups(),
        ClusterMetrics::detached("demo"),
        false,
    );
    schedule.offer(vec![("demo-0".into(), client_url, None)]);
    let since = Instant::now();
    let shown = loop {
        if let Some(c) = schedule.status().last_restore_check {
            break c;
        }
        assert!(
            since.elapsed() < Duration::from_secs(120),
            "no restore check within 2 minutes; Jobs: {:?}, status: {:?}",
            kubelet.ran(),
            schedule.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(shown.result, "verified", "{shown:?}");
    assert!(
        shown.message.starts_with("restored, and its KV hash"),
        "{shown:?}"
    );
    let status = schedule.status();
    assert_eq!(status.last_backup.as_deref(), Some(shown.backup.as_str()));
    assert_eq!(status.last_error, None);
    let dir = kubelet.claim("demo-backups").join("backups/demo");
    let kept = recorded(&dir, &shown.backup).restore_check.expect("kept");
    assert_eq!(kept.result, Verdict::Verified);
    assert_eq!(kept.time, shown.time);
    drop(schedule);
}
