//! Backups in an object store on Kubernetes, for real: a real S3 server
//! (moto, started by the test), a real etcd member behind the fake API
//! server, the backup Jobs and the follower Deployment run by the stand-in
//! kubelet with the environment Kubernetes would give them (the
//! credentials Secret the spec names, through `envFrom`). A full backup
//! and the delta segments land in the bucket, not the claim (the claim is
//! the Jobs' working space); a restore up to a revision before a deleted
//! prefix replays the chain from the bucket exactly to it; a point past
//! the chain is refused; a Secret that is not there fails the Job naming
//! it; no Job carries the secret.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::chain_restore::snapshot_revision;
use super::continuous::{spec, write};
use super::etcd_pods::EtcdPods;
use super::fixtures::resource_from;
use super::kubelet::DEPLOYMENTS;
use super::rbac::collection;
use crate::backup::chain::{self, Chain};
use crate::backup::object::ObjectLocation;
use crate::backup::object::client::StoreEnv;
use crate::backup::point::PointInTime;
use crate::backup::{BackupMeta, BackupStore, Location, Source};
use crate::platform::Platform;
use crate::platform::local::backups::LocalBackups;
use crate::platform::local::binaries::Binaries;
use crate::testing::s3::{S3Server, SECRET_KEY};
use crate::validate::RestoreFrom;

const BUCKET: &str = "etcd-backups";

/// The spec's objectStore block.
fn object_store(s3: &S3Server, secret: &str) -> serde_json::Value {
    json!({
        "url": format!("s3://{BUCKET}/kube"), "endpoint": s3.endpoint(),
        "credentialsSecret": secret, "serviceAccountName": "backup-writer",
    })
}

/// The chain of `base` as the bucket holds it (read with `reader`).
async fn bucket_chain(reader: &LocalBackups, location: &Location, base: &BackupMeta) -> Chain {
    let dir = tempfile::tempdir().expect("a folder");
    reader
        .object_segments_into(location, base, dir.path())
        .await
        .expect("segments read");
    chain::read(dir.path(), base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_keep_backups_in_the_bucket_and_restore_up_to_a_revision() {
    let s3 = S3Server::start();
    s3.create_bucket(BUCKET);
    let etcd = EtcdPods::start("kube-object-store", "3.5.1", 1).await;
    let mut kv = etcd_client::Client::connect([etcd.url(0)], None)
        .await
        .expect("a client");
    write(&mut kv, "before", 3).await;
    let mut on = spec(true);
    on["backup"]["location"] = json!({"objectStore": object_store(&s3, "s3-keys")});
    let mut off = spec(false);
    off["backup"]["location"] = on["backup"]["location"].clone();
    let credentials = s3.credentials();
    let secret = k8s_openapi::api::core::v1::Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("s3-keys".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        data: Some(
            credentials
                .iter()
                .map(|(k, v)| (k.clone(), k8s_openapi::ByteString(v.clone().into_bytes())))
                .collect(),
        ),
        ..Default::default()
    };
    let secret = serde_json::to_value(&secret).expect("a Secret");
    let (platform, fake, kubelet) = etcd
        .backup_platform_with(&resource_from(on.clone()), |fake| {
            fake.put(&collection("secrets"), secret);
        })
        .await;
    let spec_store = serde_json::from_value(object_store(&s3, "s3-keys")).expect("a spec");
    let object = ObjectLocation::parse(&spec_store, "objectStore").expect("a store");
    let location = Location {
        object: Some(object.clone()),
        ..Location::of("demo", None)
    };
    let store = platform.backups();
    let source = Source {
        member: "demo-0",
        url: &etcd.configs[0].addr.client_url,
        tls: None,
    };
    let base = store.save(&location, source).await.expect("a full backup");

    // The Job reached the bucket with the Secret as its environment; the
    // backup is in the bucket, the claim holds none.
    let save = kubelet.job("demo-save-").expect("the save Job");
    let c = &save["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["envFrom"][0]["secretRef"]["name"], "s3-keys", "{c:#}");
    // The service account the spec names (a workload identity), and still
    // no Kubernetes API token; the follower's pod the same.
    let follower = fake
        .get(&format!("{DEPLOYMENTS}/demo-backup-follow"))
        .expect("the follower");
    for pod in [
        &save["spec"]["template"]["spec"],
        &follower["spec"]["template"]["spec"],
    ] {
        assert_eq!(pod["serviceAccountName"], "backup-writer", "{pod:#}");
        assert_eq!(pod["automountServiceAccountToken"], false, "{pod:#}");
    }
    let args: Vec<&str> = c["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let at = args
        .iter()
        .position(|a| *a == "--object-store")
        .expect("--object-store");
    assert_eq!(args[at + 1], format!("s3://{BUCKET}/kube"));
    let reader = LocalBackups::new(
        tempfile::tempdir().expect("a folder").keep(),
        Arc::new(Binaries::new(vec![])),
    )
    .with_store_env(StoreEnv::new(credentials));
    let listed = reader.list(&location).await.expect("the bucket is listed");
    assert_eq!(
        listed.iter().map(|m| &m.name).collect::<Vec<_>>(),
        [&base.name]
    );
    let claim = kubelet.claim("demo-backups");
    assert!(
        !claim
            .join("backups/demo")
            .join(format!("{}.db", base.name))
            .exists()
    );

    // Keys written, then their prefix deleted: the follower's segments
    // reach the bucket.
    let kept = write(&mut kv, "kept", 10).await;
    let deleted = kv
        .delete(
            "kept",
            Some(etcd_client::DeleteOptions::new().with_prefix()),
        )
        .await
        .expect("deleted");
    let deleted = deleted.header().map_or(0, |h| h.revision());
    assert_eq!(deleted, kept + 1);
    let last = write(&mut kv, "later", 5).await;
    let since = Instant::now();
    while bucket_chain(&reader, &location, &base)
        .await
        .last_revision()
        < last
    {
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "no segment up to {last} in the bucket"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    platform
        .prepare("demo", &resource_from(off), 1, true)
        .await
        .expect("the follower stops");
    let follower = kubelet.jobs();
    assert!(
        follower.iter().all(|j| !j.to_string().contains(SECRET_KEY)),
        "no Job carries the secret"
    );

    // A restore up to the revision before the delete: the open-chain Job
    // replays the bucket's chain exactly to it.
    let from = |until: i64| RestoreFrom {
        object: Some(object.clone()),
        until: Some(PointInTime::Revision(until)),
        ..RestoreFrom::default()
    };
    let point = Location::restore("demo", &base.name, &from(kept));
    let restore = store
        .open_named_for_restore(&point, &base.name)
        .await
        .expect("set aside up to the point");
    assert_eq!(restore.replayed.revision, kept, "{restore:?}");
    assert_eq!(
        snapshot_revision(&claim.join("clusters/demo/restore.db")),
        kept
    );
    store.close_restore(&restore.source).await;
    let past = Location::restore("demo", &base.name, &from(last + 100));
    let e = store
        .open_named_for_restore(&past, &base.name)
        .await
        .expect_err("past the chain");
    assert!(e.to_string().contains("past what the chain holds"), "{e}");

    // A Secret that is not there: the Job fails and says which.
    let spec_nope = serde_json::from_value(object_store(&s3, "nope")).expect("a spec");
    let nope = Location {
        object: Some(ObjectLocation::parse(&spec_nope, "objectStore").expect("a store")),
        ..Location::of("demo", None)
    };
    let e = store.newest_good(&nope).await.expect_err("no credentials");
    assert!(e.to_string().contains("\"nope\""), "{e}");
    drop(kubelet);
    drop(fake);
    drop(etcd);
}
