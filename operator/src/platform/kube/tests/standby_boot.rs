//! A standby's bootstrap on Kubernetes, for real: the source's full
//! backup is in a real S3 bucket (moto); `Cluster<KubePlatform>` on the
//! fake API server creates the standby the way a restore is created, its
//! Jobs run by the stand-in kubelet with the credentials Secret the spec
//! names as their environment: the source's newest good backup found and
//! set aside in the standby's own claim, the member's claim restored from
//! it before its pod exists, the source's uid and revision pinned in the
//! record, the auth Secret made before the pod that mounts its key.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::chain_restore::snapshot_revision;
use super::continuous::write;
use super::etcd_pods::EtcdPods;
use super::fixtures::{UID, resource_from};
use super::rbac::collection;
use super::standby::{SOURCE_UID, secret, source_location, spec};
use super::trouble::resource_path;
use crate::backup::object::client::StoreEnv;
use crate::backup::{BackupStore, Source};
use crate::controller::Cluster;
use crate::controller::kube::spec_state;
use crate::etcd::Clients;
use crate::platform::kube::jobs::LABEL_JOB;
use crate::platform::kube::objects::claim_name;
use crate::platform::kube::restore::ANNOTATION_RESTORED;
use crate::platform::local::backups::LocalBackups;
use crate::platform::local::binaries::Binaries;
use crate::standby::state;
use crate::testing::s3::S3Server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kube_standby_is_created_from_the_sources_newest_backup_in_the_bucket() {
    let s3 = S3Server::start();
    s3.create_bucket(super::standby::BUCKET);

    // The source: 20 writes, then its full backup in the bucket.
    let source = EtcdPods::start("kube-standby-boot-source", "3.5.1", 1).await;
    let mut kv = etcd_client::Client::connect([source.url(0)], None)
        .await
        .expect("a client");
    let last = write(&mut kv, "key", 20).await;
    let state_dir = tempfile::tempdir().expect("a folder");
    let binaries = Arc::new(Binaries::new(vec![crate::testing::binaries()]));
    let writer = LocalBackups::new(state_dir.path(), binaries)
        .with_store_env(StoreEnv::new(s3.credentials()));
    let src = source_location(&s3);
    let url = source.url(0);
    let base = writer
        .save(
            &src,
            Source {
                member: "src-0",
                url: &url,
                tls: None,
            },
        )
        .await
        .expect("the source's full backup");
    assert_eq!(base.revision, last);

    // The standby, a new cluster of one member.
    let r = resource_from(spec(&s3, false));
    let (platform, fake, kubelet) = source
        .backup_platform_with(&r, |fake| fake.put(&collection("secrets"), secret(&s3)))
        .await;
    let platform = Arc::new(platform);
    let clients = Arc::new(Clients::new(Duration::from_millis(300)));
    let mut cluster = Cluster::new("demo", platform, clients, spec_state(&r))
        .await
        .expect("the cluster");
    let pod_path = format!("{}/demo-0", collection("pods"));
    // Bounded: a pass per step, each bounded by its Jobs' deadlines.
    for _ in 0..8 {
        cluster.reconcile().await;
        if fake.get(&pod_path).is_some() {
            break;
        }
    }
    let pod = fake.get(&pod_path).unwrap_or_else(|| {
        panic!(
            "no member pod; status {:#}",
            fake.get(&resource_path()).unwrap_or_default()["status"]
        )
    });

    // The Jobs: the bucket read with the Secret as the environment.
    let jobs = kubelet.jobs();
    let chain = jobs
        .iter()
        .find(|j| {
            j["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("demo-open-chain-"))
        })
        .unwrap_or_else(|| panic!("no open-chain Job: {:?}", kubelet.ran()));
    let c = &chain["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["envFrom"][0]["secretRef"]["name"], "s3-keys", "{c:#}");
    let restores: Vec<&Value> = jobs
        .iter()
        .filter(|j| j["metadata"]["labels"][LABEL_JOB] == "restore")
        .collect();
    assert_eq!(restores.len(), 1, "one restore Job for the one member");

    // The member's claim holds the source's data at its backup's revision.
    let claim = claim_name("demo-0");
    let stored = fake
        .get(&format!("{}/{claim}", collection("persistentvolumeclaims")))
        .expect("the claim");
    assert!(
        stored["metadata"]["annotations"][ANNOTATION_RESTORED].is_string(),
        "{stored:#}"
    );
    let db = kubelet.claim(&claim).join("data/member/snap/db");
    assert_eq!(snapshot_revision(&db), last);

    // Its pod signs tokens with the key of the Secret made before it.
    let args: Vec<&str> = pod["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(args.contains(&"--auth-token"), "{args:?}");
    let made = fake
        .get(&format!("{}/demo-standby-auth", collection("secrets")))
        .expect("the auth Secret");
    assert_eq!(made["metadata"]["ownerReferences"][0]["uid"], UID);

    // The source's identity and revision are pinned.
    let record = cluster.record();
    let pinned = record.standby.as_ref().expect("a standby");
    assert_eq!(pinned.source, "src");
    assert_eq!(pinned.source_uid.as_deref(), Some(SOURCE_UID));
    assert_eq!(pinned.applied_revision, last);
    assert_eq!(pinned.state, state::FOLLOWING);
    assert_eq!(
        record.restored.as_ref().map(|r| r.backup.as_str()),
        Some(base.name.as_str())
    );
    drop(cluster);
    drop(kubelet);
    drop(source);
}
