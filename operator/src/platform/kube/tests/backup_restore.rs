//! A backup and a restore on Kubernetes, for real: an etcd member behind
//! the fake API server is backed up by a backup Job (run by the stand-in
//! kubelet with a folder for the claim), the backup is found good, set
//! aside for a restore, and a new member's data claim is restored from it
//! by a restore Job (the image's `etcdutl`); etcd then starts on the
//! restored data and serves the key written before the backup.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::etcd_pods::{EtcdPods, config};
use super::fake::fake;
use super::fixtures::resource;
use super::kubelet::Kubelet;
use crate::backup::{BackupStore, Location, Source};
use crate::crd::StoragePolicy;
use crate::platform::Platform;
use crate::platform::kube::KubePlatform;
use crate::platform::kube::objects::claim_name;
use crate::platform::kube::pod::DEFAULT_IMAGE;
use crate::testing::{etcd_binary, free_loopback};

fn etcdctl(url: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(crate::testing::binaries().join("3.5.1/etcdctl"))
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", url, "--command-timeout", "5s"])
        .args(args)
        .output()
        .expect("etcdctl runs");
    assert!(out.status.success(), "etcdctl {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_job_saves_and_a_restore_job_restores_a_members_data() {
    let pods = EtcdPods::start("kube-backup-restore", "3.5.1", 1).await;
    etcdctl(&pods.url(0), &["put", "kept", "before-the-backup"]);
    let (client, fake) = fake();
    let dns = BTreeMap::from([(pods.configs[0].addr.client_url.clone(), pods.url(0))]);
    let kubelet = Kubelet::start(fake.clone(), dns);
    let p = KubePlatform::new(client, "default", DEFAULT_IMAGE)
        .with_backup_image(Some("etcd-operator:test".into()));
    let r = resource(1, "3.5.1", StoragePolicy::Persistent);
    p.register("demo", &r, 0).expect("registered");
    let location = Location::of("demo", None);
    let store = p.backups();

    let source = Source {
        member: "demo-0",
        url: &pods.configs[0].addr.client_url,
        tls: None,
    };
    let saved = store.save(&location, source).await.expect("a backup");
    assert!(saved.revision > 1, "{saved:?}");
    let file = kubelet
        .claim("demo-backups")
        .join("backups/demo")
        .join(format!("{}.db", saved.name));
    assert!(file.is_file(), "{} in the claim", file.display());
    let (newest, skipped) = store.newest_good(&location).await.expect("checked");
    assert_eq!(newest.as_ref(), Some(&saved));
    assert!(skipped.is_empty(), "{skipped:?}");
    let restore = store
        .open_for_restore(&location, &saved.name)
        .await
        .expect("set aside");
    assert_eq!(
        restore.as_str(),
        "persistentvolumeclaims/demo-backups/clusters/demo/restore.db"
    );

    // A new member, restored into its claim before its pod exists.
    let ip = free_loopback(
        "kube-backup-restore/new",
        &pods.ips.iter().copied().collect(),
    );
    let peer = format!("http://{ip}:2380");
    let member = config("demo-0", ip, &format!("demo-0={peer}"), "3.5.1");
    p.create("demo", &member, Some(&restore))
        .await
        .expect("restored and created");
    let data = kubelet.claim(&claim_name("demo-0")).join("data");
    assert!(data.join("member/snap/db").is_file(), "{}", data.display());
    store.close_restore(&restore).await;
    assert!(
        !kubelet
            .claim("demo-backups")
            .join("clusters/demo/restore.db")
            .exists(),
        "the copy set aside is dropped"
    );
    drop(pods);

    let client_url = format!("http://{ip}:2379");
    let mut etcd = tokio::process::Command::new(etcd_binary("3.5.1"))
        .args(["--name", "demo-0", "--data-dir"])
        .arg(&data)
        .args(["--listen-peer-urls", &peer])
        .args(["--initial-advertise-peer-urls", &peer])
        .args(["--listen-client-urls", &client_url])
        .args(["--advertise-client-urls", &client_url])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("etcd starts");
    let since = Instant::now();
    let clients = crate::etcd::Clients::new(Duration::from_secs(1));
    while !clients
        .status(&client_url)
        .await
        .is_ok_and(|s| s.leader != 0)
    {
        assert!(since.elapsed() < Duration::from_secs(30), "no leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let got = etcdctl(&client_url, &["get", "kept", "--print-value-only"]);
    assert_eq!(got.trim(), "before-the-backup");
    etcd.kill().await.expect("stopped");
    let names = kubelet.ran();
    for kind in ["save", "newest-good", "open", "restore", "close"] {
        assert!(
            names
                .iter()
                .any(|n| n.starts_with(&format!("demo-{kind}-"))),
            "{kind} in {names:?}"
        );
    }
}
