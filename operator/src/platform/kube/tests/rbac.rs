//! deploy/base/rbac.yaml allows every request the operator makes: the
//! controller runs against a fake API server (a new cluster, an invalid
//! one), then every platform call is made once more by hand (marks,
//! upgrades, re-creation, deletion, retiring, deleting a cluster, leader
//! election's Lease), and each request is checked against the ClusterRole's
//! rules. A request the role does not allow is a 403 on a real cluster.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::fake::{Fake, Seen, Target, fake, verbs};
use super::fixtures::{config, resource};
use super::kubelet::Kubelet;
use crate::backup::{BackupStore, Location, RestoreSource};
use crate::crd::{EtcdCluster, StoragePolicy};
use crate::platform::Platform;
use crate::platform::kube::KubePlatform;
use crate::platform::kube::pod::DEFAULT_IMAGE;
use crate::platform::tls_store::TlsStore;
use crate::version::Version;

fn deploy(file: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/base")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("a deploy manifest");
    serde_saphyr::from_multiple(&text).expect("YAML documents")
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// `(group, resource[/sub], verb)` the role allows.
fn allows(rules: &Value, group: &str, resource: &str, verb: &str) -> bool {
    rules.as_array().into_iter().flatten().any(|rule| {
        let any =
            |field: &str, want: &str| strings(&rule[field]).iter().any(|x| x == want || x == "*");
        any("apiGroups", group) && any("resources", resource) && any("verbs", verb)
    })
}

pub(crate) fn collection(resource: &str) -> String {
    format!("/api/v1/namespaces/default/{resource}")
}

pub(crate) fn clusters_path() -> &'static str {
    "/apis/etcdoperator.dev/v1alpha1/namespaces/default/etcdclusters"
}

pub(super) fn stored(r: &EtcdCluster) -> Value {
    let mut v = serde_json::to_value(r).expect("json");
    v["metadata"]["uid"] = json!(format!("uid-{}", r.metadata.name.as_deref().unwrap_or("")));
    v["metadata"]["generation"] = json!(1);
    v
}

fn with_name(mut r: EtcdCluster, name: &str) -> EtcdCluster {
    r.metadata.name = Some(name.into());
    r
}

/// Every pod of the store becomes ready.
pub(super) fn all_ready(fake: &Fake) {
    for i in 0..3 {
        for cluster in ["demo", "eph"] {
            let path = format!("{}/{cluster}-{i}", collection("pods"));
            fake.change(
                &path,
                &json!({"status": {
                    "phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}],
                }}),
            );
        }
    }
}

fn member(cluster: &str, name: &str) -> crate::member::MemberConfig {
    let mut c = config(&name.replace("demo", cluster), "3.5.1");
    c.addr.peer_url = c.addr.peer_url.replace(".demo.", &format!(".{cluster}."));
    c.addr.client_url = c.addr.client_url.replace(".demo.", &format!(".{cluster}."));
    c
}

async fn by_hand(client: kube::Client, fake: &Fake, demo: &EtcdCluster, eph: &EtcdCluster) {
    let p = KubePlatform::new(client, "default", DEFAULT_IMAGE)
        .with_backup_image(Some("etcd-operator:test".into()));
    let mut demo = demo.clone();
    demo.metadata.uid = Some("uid-demo".into());
    let mut eph = eph.clone();
    eph.metadata.uid = Some("uid-eph".into());
    p.prepare("demo", &demo, 3, false)
        .await
        .expect("registered");
    p.prepare("eph", &eph, 1, false).await.expect("registered");
    for i in 0..3 {
        // Created by the controller already: these find them running.
        p.create("demo", &member("demo", &format!("demo-{i}")), None)
            .await
            .expect("created");
    }
    p.create("eph", &member("eph", "demo-0"), None)
        .await
        .expect("created");
    all_ready(fake);
    // Ready: the started marks (claims; the emptyDir member's pod).
    p.members("demo").await.expect("members");
    p.members("eph").await.expect("members");
    let v = crate::member::Settings {
        version: Version::new(3, 5, 2),
        tuning: Default::default(),
        backend: Default::default(),
        pod: Default::default(),
    };
    p.restart("demo", "demo-0", &v).await.expect("upgraded");
    p.restart("eph", "eph-0", &v)
        .await
        .expect("upgraded in place");
    // The seed of a rebuild after a quorum loss, and its Event.
    p.force_new_cluster("demo", "demo-0").await.expect("seeded");
    all_ready(fake);
    p.end_force_new_cluster("demo", "demo-0")
        .await
        .expect("settled");
    p.announce(
        "demo",
        &crate::platform::Notice {
            type_: crate::platform::NoticeType::Warning,
            reason: "RebuiltFromSurvivor",
            message: "rebuilt from demo-0".into(),
        },
    )
    .await;
    // A pod gone: re-created from its claim.
    let pod = format!("{}/demo-1", collection("pods"));
    assert!(fake.remove(&pod).is_some(), "demo-1 has a pod");
    p.start("demo", "demo-1").await.expect("re-created");
    // TLS: the CA, a member's files, the tools' certificate, a restart with
    // TLS, a user's Secret read.
    let now = std::time::SystemTime::now();
    let ca = crate::tls::issue::new_ca("demo", Duration::from_secs(3600), now).expect("ca");
    let state = crate::tls::CaState {
        issuing: ca.clone(),
        next: None,
        retiring: None,
    };
    p.save_ca("demo", &state).await.expect("ca saved");
    p.load_ca("demo").await.expect("ca read");
    let files = crate::tls::MemberFiles {
        peer: Some(crate::tls::RoleFiles {
            cert_key: ca.clone(),
            ca: ca.cert.clone(),
        }),
        client: None,
    };
    p.install_member_files("demo", "demo-0", &files)
        .await
        .expect("member files");
    p.member_files("demo", "demo-0")
        .await
        .expect("member files read");
    let tools = crate::platform::tls_store::ClientFiles {
        ca: ca.cert.clone(),
        cert_key: ca.clone(),
    };
    p.install_client_files("demo", &tools)
        .await
        .expect("client files");
    let _ = p.provided("demo", "user-certs").await;
    let mut addr = member("demo", "demo-0").addr;
    addr.peer_url = addr.peer_url.replace("http://", "https://");
    let tls = crate::member::MemberTls {
        peer: true,
        ..Default::default()
    };
    p.reconfigure("demo", "demo-0", &addr, &tls)
        .await
        .expect("reconfigured");
    // spec.storage.size grown: the class read, a claim patched.
    assert_eq!(p.class_expands("standard").await, None, "no such class");
    p.expand_volume("demo", "demo-1", "10Gi")
        .await
        .expect("claim grown");
    p.delete("demo", "demo-2").await.expect("deleted");
    p.load_record("demo").await.expect("record");
    p.save_status("demo", &demo).await.expect("status");
    // Backup Jobs, run by the stand-in kubelet: the claim is created, a
    // Job lists the (empty) claim and checks a backup that is not there.
    let kubelet = Kubelet::start(fake.clone(), Default::default());
    let location = Location::of("demo", None);
    let store = p.backups();
    assert_eq!(store.list(&location).await.expect("listed"), vec![]);
    store
        .check_restorable(&location, "demo-20260101-000000-000")
        .await
        .expect_err("no such backup");
    // A restore Job for a new member (the snapshot is missing: it fails,
    // and the member's claim is deleted).
    let source = RestoreSource::new("persistentvolumeclaims/demo-backups/clusters/demo/restore.db");
    p.create("demo", &member("demo", "demo-5"), Some(&source))
        .await
        .expect_err("no snapshot to restore");
    assert_eq!(kubelet.ran().len(), 3, "{:?}", kubelet.ran());
    drop(kubelet);
    p.retire_members("demo", "2026-01-01T00:00:00Z")
        .await
        .expect("retired");
    p.delete_cluster("demo").await.expect("cluster deleted");
}

/// Leader election's requests: the Lease created, renewed, released.
async fn elect(client: kube::Client) {
    use crate::controller::kube::lease::{DEFAULT_NAME, Elector, Role, Timing};
    let elector = Elector::new(client, "default", DEFAULT_NAME, "op-0", Timing::default());
    let now = k8s_openapi::jiff::Timestamp::now();
    for step in ["acquire", "renew"] {
        assert_eq!(elector.step(now).await.expect(step), Role::Leader, "{step}");
    }
    elector.release().await.expect("release");
}

#[tokio::test]
async fn the_cluster_role_allows_every_request_the_operator_makes() {
    let (client, fake) = fake();
    let demo = resource(3, "3.5.1", StoragePolicy::Persistent);
    let eph = with_name(resource(1, "3.5.1", StoragePolicy::Ephemeral), "eph");
    let mut bad = with_name(resource(3, "3.5.1", StoragePolicy::Persistent), "bad");
    bad.spec.backup = Some(
        serde_json::from_value(json!({
            "interval": "30m", "maxBackups": 3, "location": {"path": "/backups"},
        }))
        .expect("a backup spec"),
    );
    for r in [&demo, &bad] {
        fake.put(clusters_path(), stored(r));
    }
    let opts = crate::controller::kube::Options {
        namespace: None,
        image: DEFAULT_IMAGE.into(),
        backup_image: None,
        handover: true,
        scratch: None,
        metrics: Default::default(),
        health: Default::default(),
    };
    let stop = tokio::time::sleep(Duration::from_secs(3));
    crate::controller::kube::run(client.clone(), opts, stop)
        .await
        .expect("the controller ran");
    by_hand(client.clone(), &fake, &demo, &eph).await;
    elect(client).await;

    let docs = deploy("rbac.yaml");
    let rules = &of_kind(&docs, "ClusterRole")["rules"];
    let mut denied = BTreeSet::new();
    let mut asked = BTreeSet::new();
    for seen in fake.requests() {
        let Some(t) = Target::parse(&seen.path) else {
            panic!("not a resource path: {} {}", seen.method, seen.path)
        };
        let resource = match &t.sub {
            Some(sub) => format!("{}/{sub}", t.resource),
            None => t.resource.clone(),
        };
        for verb in verbs(&seen, &t) {
            asked.insert(format!("{verb} {}/{resource}", t.group));
            if !allows(rules, &t.group, &resource, verb) {
                denied.insert(format!("{verb} {}/{resource} ({})", t.group, show(&seen)));
            }
        }
    }
    assert!(
        denied.is_empty(),
        "deploy/base/rbac.yaml does not allow:\n{}",
        denied.into_iter().collect::<Vec<_>>().join("\n")
    );
    // The run did go through the paths that matter.
    for needed in [
        "list etcdoperator.dev/etcdclusters",
        "watch etcdoperator.dev/etcdclusters",
        "watch /pods",
        "watch /persistentvolumeclaims",
        "get /services",
        "get policy/poddisruptionbudgets",
        "patch etcdoperator.dev/etcdclusters/status",
        "create events.k8s.io/events",
        "patch /persistentvolumeclaims",
        "delete /pods",
        "delete /services",
        "patch /secrets",
        "get /secrets",
        "delete /secrets",
        "create batch/jobs",
        "get batch/jobs",
        "delete batch/jobs",
        "get /pods/log",
        "get coordination.k8s.io/leases",
        "get storage.k8s.io/storageclasses",
        "create coordination.k8s.io/leases",
        "update coordination.k8s.io/leases",
    ] {
        assert!(asked.contains(needed), "never asked: {needed}\n{asked:#?}");
    }
}

fn show(seen: &Seen) -> String {
    format!("{} {}", seen.method, seen.path)
}

#[test]
fn the_operator_runs_as_the_bound_service_account() {
    let rbac = deploy("rbac.yaml");
    let operator = deploy("operator.yaml");
    let deployment = of_kind(&operator, "Deployment");
    let account = &deployment["spec"]["template"]["spec"]["serviceAccountName"];
    let namespace = &deployment["metadata"]["namespace"];
    let sa = of_kind(&rbac, "ServiceAccount");
    assert_eq!(
        (&sa["metadata"]["name"], &sa["metadata"]["namespace"]),
        (account, namespace)
    );
    let binding = of_kind(&rbac, "ClusterRoleBinding");
    assert_eq!(
        binding["roleRef"]["name"],
        of_kind(&rbac, "ClusterRole")["metadata"]["name"]
    );
    let subject = &binding["subjects"][0];
    assert_eq!(
        (&subject["kind"], &subject["name"], &subject["namespace"]),
        (&json!("ServiceAccount"), account, namespace)
    );
}
