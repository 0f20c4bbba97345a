//! A standby on Kubernetes, for real: the source writes its full backup
//! and its delta segments into a real S3 bucket (moto), the standby's
//! member is real etcd behind the fake API server, and `Cluster<KubePlatform>`
//! follows the source from the bucket with the credentials Secret the spec
//! names (read through the API, as the operator's pod would), through the
//! member's pod IP. The standby's auth Secret is made and owned by the
//! cluster, status names it, a write without credentials is refused, the
//! standby's revision and `HashKV` become the source's, and promoting
//! turns auth off.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::continuous::write;
use super::etcd_pods::EtcdPods;
use super::fake::fake;
use super::fixtures::{UID, platform_for, resource_from};
use super::rbac::collection;
use super::trouble::{condition, formed, put_record_of, put_resource, resource_path};
use crate::backup::object::ObjectLocation;
use crate::backup::object::client::StoreEnv;
use crate::backup::{BackupStore, Location, Source};
use crate::controller::Cluster;
use crate::controller::kube::spec_state;
use crate::crd::{StandbyStatus, StoragePolicy};
use crate::platform::Platform;
use crate::platform::kube::standby::{AUTH_MOUNT, auth_secret_name};
use crate::platform::local::backups::LocalBackups;
use crate::platform::local::binaries::Binaries;
use crate::platform::local::follow_job::{self, Members};
use crate::standby::{VIA_STORE, state};
use crate::testing::s3::S3Server;
use crate::validate::ContinuousPolicy;

pub(super) const BUCKET: &str = "standby-source";
/// The source's uid, as its backups carry it.
pub(super) const SOURCE_UID: &str = "source-uid-1";

/// The standby's spec: a standby of `src` through the bucket.
pub(super) fn spec(s3: &S3Server, promote: bool) -> Value {
    json!({
        "size": 1, "version": "3.5.1", "storage": {"policy": "Persistent"},
        "backup": {"interval": "1h", "maxBackups": 3},
        "standby": {
            "cluster": "src",
            "promote": promote,
            "location": {"objectStore": {
                "url": format!("s3://{BUCKET}/dr"), "endpoint": s3.endpoint(),
                "credentialsSecret": "s3-keys",
            }},
        },
    })
}

/// The credentials Secret in the namespace.
pub(super) fn secret(s3: &S3Server) -> Value {
    let secret = k8s_openapi::api::core::v1::Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("s3-keys".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        data: Some(
            s3.credentials()
                .into_iter()
                .map(|(k, v)| (k, k8s_openapi::ByteString(v.into_bytes())))
                .collect(),
        ),
        ..Default::default()
    };
    serde_json::to_value(&secret).expect("a Secret")
}

/// The source's backups in the bucket, under its uid.
pub(super) fn source_location(s3: &S3Server) -> Location {
    let object: ObjectLocation = ObjectLocation::parse(
        &serde_json::from_value(spec(s3, false)["standby"]["location"]["objectStore"].clone())
            .expect("an objectStore"),
        "objectStore",
    )
    .expect("a store");
    Location {
        object: Some(object),
        ..Location::of("src", None)
    }
    .with_uid(Some(SOURCE_UID))
}

/// The text of `key` in the Secret `value` (as the fake server keeps it).
fn secret_text(value: &Value, key: &str) -> String {
    let secret: k8s_openapi::api::core::v1::Secret =
        serde_json::from_value(value.clone()).expect("a Secret");
    let data = secret.data.unwrap_or_default();
    String::from_utf8(data.get(key).expect("the key").0.clone()).expect("text")
}

/// Aborts the task when dropped (also when the test fails).
struct Abort(tokio::task::JoinHandle<()>);

impl Drop for Abort {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Revision and `HashKV` at `rev` of the member at `url`, as `user`.
async fn revision_and_hash(url: &str, user: Option<(&str, &str)>, rev: i64) -> (i64, u32) {
    let options = user.map(|(u, p)| etcd_client::ConnectOptions::new().with_user(u, p));
    let mut c = etcd_client::Client::connect([url], options)
        .await
        .expect("a client");
    let got = c.get("\0", None).await.expect("a read");
    let now = got.header().map_or(0, |h| h.revision());
    let hash = c.hash_kv(rev).await.expect("HashKV").hash();
    (now, hash)
}

/// Reconcile passes until the published status satisfies `done` (within
/// `secs`); returns that status.
async fn passes_until(
    cluster: &mut Cluster<crate::platform::kube::KubePlatform>,
    fake: &super::fake::Fake,
    secs: u64,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let since = Instant::now();
    loop {
        let out = cluster.reconcile().await;
        let status = fake.get(&resource_path()).expect("the resource")["status"].clone();
        if done(&status) {
            return status;
        }
        assert!(
            since.elapsed() < Duration::from_secs(secs),
            "no {what} within {secs} s: {:#}",
            status["standby"]
        );
        tokio::time::sleep(
            out.next
                .clamp(Duration::from_millis(50), Duration::from_millis(300)),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kube_standby_follows_the_bucket_refuses_writes_and_is_promoted() {
    let s3 = S3Server::start();
    s3.create_bucket(BUCKET);
    let credentials = StoreEnv::new(s3.credentials());

    // The source: one real etcd; its full backup (at revision 1, before
    // any write) and its follower's segments in the bucket.
    let source = EtcdPods::start("kube-standby-source", "3.5.1", 1).await;
    let src = source_location(&s3);
    let state = tempfile::tempdir().expect("a folder");
    let binaries = Arc::new(Binaries::new(vec![crate::testing::binaries()]));
    let writer =
        LocalBackups::new(state.path(), binaries.clone()).with_store_env(credentials.clone());
    let base = writer
        .save(
            &src,
            Source {
                member: "src-0",
                url: &source.url(0),
                tls: None,
            },
        )
        .await
        .expect("the source's full backup");
    let follower = {
        let (dir, location, url) = (state.path().to_path_buf(), src.clone(), source.url(0));
        let env = credentials.clone();
        tokio::spawn(async move {
            let members = Members {
                urls: vec![url],
                ..Members::default()
            };
            let policy = ContinuousPolicy {
                segment_interval: Duration::from_millis(200),
                max_events: 1000,
            };
            follow_job::run(&dir, location, members, policy, binaries, env, &|_| {}).await;
        })
    };
    let _stop_follower = Abort(follower);

    // The standby: one real etcd, fresh (revision 1, as the source was at
    // its backup), seated as a formed standby of src at that revision.
    let mut standby = EtcdPods::start("kube-standby", "3.5.1", 1).await;
    for c in &mut standby.configs {
        c.backend.standby = true;
    }
    let (client, fake) = fake();
    fake.put(&collection("secrets"), secret(&s3));
    let r = resource_from(spec(&s3, false));
    standby.seat(&fake, &r, StoragePolicy::Persistent, "3.5.1");
    let mut record = formed(&r, standby.configs.iter().map(|c| c.addr.clone()).collect());
    record.next_index = 1;
    record.standby = Some(StandbyStatus {
        state: state::FOLLOWING.into(),
        source: "src".into(),
        source_uid: base.uid.clone(),
        applied_revision: base.revision,
        source_revision: base.revision,
        ..StandbyStatus::default()
    });
    put_record_of(&fake, &r, record);
    let scratch = tempfile::tempdir().expect("a folder");
    let platform =
        Arc::new(platform_for(client, &r).with_scratch(Some(scratch.path().to_path_buf())));
    let mut cluster = Cluster::new(
        "demo",
        platform.clone(),
        standby.clients.clone(),
        spec_state(&r),
    )
    .await
    .expect("the cluster");

    // Writes on the source; the standby follows them from the bucket.
    let mut kv = etcd_client::Client::connect([source.url(0)], None)
        .await
        .expect("a client");
    let last = write(&mut kv, "key", 30).await;
    let status = passes_until(
        &mut cluster,
        &fake,
        90,
        &format!("the standby at {last}"),
        |s| s["standby"]["appliedRevision"] == last,
    )
    .await;
    let st = &status["standby"];
    assert_eq!(st["state"], state::FOLLOWING, "{st:#}");
    assert_eq!(st["via"], VIA_STORE, "{st:#}");
    assert_eq!(st["readOnly"], true, "{st:#}");
    assert_eq!(st["readUser"], "reader", "{st:#}");
    let name = auth_secret_name("demo");
    assert_eq!(
        st["readPasswordSecret"],
        json!({"name": name, "key": "reader.password"}),
        "{st:#}"
    );
    assert!(st.get("readPasswordFile").is_none(), "{st:#}");
    // spec.backup waits for the promotion, and status says so.
    let backup = &status["backup"];
    assert!(
        backup["waiting"]
            .as_str()
            .is_some_and(|w| w.contains("promoted")),
        "{backup:#}"
    );
    assert!(backup.get("lastBackup").is_none(), "{backup:#}");
    let failing = condition(&fake, "BackupsFailing");
    assert_eq!(failing["status"], "False", "{failing:#}");
    assert_eq!(failing["reason"], "BackupsWaiting", "{failing:#}");

    // The auth Secret: the cluster's, with both passwords and the key pair.
    let made = fake
        .get(&format!("{}/{name}", collection("secrets")))
        .expect("the auth Secret");
    assert_eq!(
        made["metadata"]["ownerReferences"][0]["uid"], UID,
        "{made:#}"
    );
    let reader = secret_text(&made, "reader.password");
    let root = secret_text(&made, "root.password");
    assert!(secret_text(&made, "jwt.key").contains("PRIVATE KEY"));
    assert_eq!(reader.len(), 32);
    assert_ne!(reader, root);

    // Revision for revision: the standby's revision and hash are the
    // source's; the reader reads, a write without credentials is refused.
    let url = standby.url(0);
    let (rev, hash) = revision_and_hash(&url, Some(("root", &root)), last).await;
    let (src_rev, src_hash) = revision_and_hash(&source.url(0), None, last).await;
    assert_eq!((rev, hash), (src_rev, src_hash));
    let mut as_reader = etcd_client::Client::connect(
        [url.as_str()],
        Some(etcd_client::ConnectOptions::new().with_user("reader", reader.clone())),
    )
    .await
    .expect("the reader connects");
    let got = as_reader
        .get("key-29", None)
        .await
        .expect("the reader reads");
    assert_eq!(got.kvs()[0].value(), b"v29");
    let refused = as_reader.put("key-29", "mine", None).await;
    assert!(refused.is_err(), "the reader wrote: {refused:?}");
    let mut anyone = etcd_client::Client::connect([url.as_str()], None)
        .await
        .expect("a client");
    let refused = anyone.put("key-29", "mine", None).await;
    assert!(refused.is_err(), "a write without credentials: {refused:?}");

    // The credentials Secret changes (a rotation): the bucket is opened
    // again with it, and following goes on.
    let location = crate::backup::Location::restore(
        "demo",
        "src",
        &crate::validate::RestoreFrom {
            cluster: Some("src".into()),
            object: src.object.clone(),
            ..Default::default()
        },
    );
    let reads = || async {
        let store = platform
            .standby_reads("demo", &location)
            .await
            .expect("a store");
        Arc::as_ptr(&store) as usize
    };
    let before = reads().await;
    assert_eq!(
        reads().await,
        before,
        "the same store while the Secret is the same"
    );
    fake.put(&collection("secrets"), secret(&s3));
    let more = write(&mut kv, "rotated", 10).await;
    passes_until(
        &mut cluster,
        &fake,
        60,
        &format!("the standby at {more}"),
        |s| s["standby"]["appliedRevision"] == more,
    )
    .await;
    assert_ne!(
        reads().await,
        before,
        "opened again with the changed Secret"
    );

    // Promoted: auth off, a plain write is taken.
    let promoted = resource_from(spec(&s3, true));
    put_resource(&fake, &promoted);
    cluster
        .set_spec(spec_state(&promoted))
        .await
        .expect("the spec");
    let status = passes_until(&mut cluster, &fake, 60, "the standby promoted", |s| {
        s["standby"]["state"] == state::PROMOTED
    })
    .await;
    assert_eq!(status["standby"]["readOnly"], false, "{status:#}");
    // (The fake server merges applied status; a real one drops what an
    // apply no longer sets: read the record.)
    let kept = cluster.record().standby.clone().expect("the standby");
    assert_eq!(kept.read_password_secret, None, "{kept:?}");
    let taken = anyone.put("after", "promotion", None).await;
    assert!(taken.is_ok(), "{taken:?}");
    drop(cluster);
    drop(standby);
    drop(source);
}

/// A standby member's pod mounts the signing key pair (never the
/// passwords) and signs its tokens with it.
#[test]
fn a_standby_members_pod_signs_tokens_with_the_secrets_key() {
    let mut config = super::fixtures::config("demo-0", "3.5.1");
    config.backend.standby = true;
    let r = resource_from(json!({"size": 1, "version": "3.5.1"}));
    let owner = kube::Resource::controller_owner_ref(&r, &()).expect("owner");
    let pod = crate::platform::kube::pod::member_pod(
        "demo",
        &config,
        StoragePolicy::Persistent,
        crate::platform::kube::pod::DEFAULT_IMAGE,
        &owner,
    );
    let pod = serde_json::to_value(&pod).expect("json");
    let volume = pod["spec"]["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == "standby-auth")
        .cloned()
        .expect("the auth volume");
    assert_eq!(volume["secret"]["secretName"], "demo-standby-auth");
    let keys: Vec<&str> = volume["secret"]["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["key"].as_str())
        .collect();
    assert_eq!(keys, ["jwt.key", "jwt.pub"]);
    let c = &pod["spec"]["containers"][0];
    let mount = c["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|m| m["name"] == "standby-auth")
        .cloned()
        .expect("mounted");
    assert_eq!(mount["mountPath"], AUTH_MOUNT);
    assert_eq!(mount["readOnly"], true);
    let args: Vec<&str> = c["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let at = args
        .iter()
        .position(|a| *a == "--auth-token")
        .expect("--auth-token");
    assert_eq!(
        args[at + 1],
        format!(
            "jwt,pub-key={AUTH_MOUNT}/jwt.pub,priv-key={AUTH_MOUNT}/jwt.key,sign-method=ES256,ttl=10m"
        )
    );

    // Not a standby: none of it.
    config.backend.standby = false;
    let plain = crate::platform::kube::pod::member_pod(
        "demo",
        &config,
        StoragePolicy::Persistent,
        crate::platform::kube::pod::DEFAULT_IMAGE,
        &owner,
    );
    let plain = serde_json::to_string(&plain).expect("json");
    assert!(!plain.contains("standby-auth") && !plain.contains("--auth-token"));
}
