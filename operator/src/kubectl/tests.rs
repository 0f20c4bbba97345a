//! `kubectl etcd` against the stand-in API server: the exact requests
//! each command makes (method, path, body) and what it makes of the
//! answers.

use std::future::Future;
use std::time::SystemTime;

use http::Method;
use serde_json::{Value, json};

use super::restore::{FIELD_MANAGER, Request, build};
use super::{Error, Plugin, backups_text, status_text};
use crate::backup::job::Report;
use crate::backup::tests::meta;
use crate::cli::status::{STALE_LIVE, table};
use crate::crd::{EtcdCluster, EtcdClusterStatus, MemberStatus, Phase};
use crate::platform::kube::tests::api::{ApiServer, core, list, mock};
use crate::platform::kube::tests::backup_jobs::{expect_job, expect_job_end};
use crate::platform::kube::tests::fixtures::{UID, resource_from};

const CLUSTERS: &str = "/apis/etcdoperator.dev/v1alpha1/namespaces/default/etcdclusters";

fn member(name: &str, leader: bool, ready: bool) -> MemberStatus {
    MemberStatus {
        name: name.into(),
        id: Some(format!("{name}-id")),
        client_url: format!("http://{name}.demo.default.svc:2379"),
        peer_url: format!("http://{name}.demo.default.svc:2380"),
        ready,
        leader,
        learner: false,
        version: Some("3.5.1".into()),
        volume_size: None,
        storage_class_name: None,
    }
}

/// `default/demo`, 3 members (demo-0 leads, demo-2 is not ready), with
/// `spec.backup` as `backup` says (JSON) when given.
fn demo(backup: Option<Value>) -> EtcdCluster {
    let mut spec = json!({"size": 3, "version": "3.5.1", "storage": {"policy": "Persistent"}});
    if let Some(b) = backup {
        spec["backup"] = b;
    }
    let mut c = resource_from(spec);
    c.status = Some(EtcdClusterStatus {
        phase: Phase::Running,
        ready_members: 2,
        leader: Some("demo-0".into()),
        revision: Some(42),
        members: vec![
            member("demo-0", true, true),
            member("demo-1", false, true),
            member("demo-2", false, false),
        ],
        ..EtcdClusterStatus::default()
    });
    c
}

fn to_json(c: &EtcdCluster) -> Value {
    serde_json::to_value(c).expect("JSON")
}

/// Plays `scenario` on the server side while `call` runs on a plugin in
/// `default`; asserts no other request came.
async fn play<S, F, T>(scenario: impl FnOnce(ApiServer) -> S, call: impl FnOnce(Plugin) -> F) -> T
where
    S: Future<Output = ApiServer> + Send + 'static,
    F: Future<Output = T>,
{
    let (client, api) = mock();
    let server = tokio::spawn(scenario(api));
    let out = call(Plugin::new(client, "default")).await;
    let api = server.await.expect("the scenario passed");
    api.done().await;
    out
}

#[tokio::test]
async fn status_of_one_cluster_is_the_local_commands_screen() {
    let c = demo(None);
    let body = to_json(&c);
    let clusters = play(
        move |mut api| async move {
            api.expect(Method::GET, &format!("{CLUSTERS}/demo"))
                .await
                .ok(&body);
            api
        },
        |p| async move { p.status(Some("demo")).await.expect("the cluster") },
    )
    .await;
    let now = SystemTime::now();
    let text = status_text(&clusters, true, "default", now);
    // The same rendering as `etcd-operator status demo`, then the source.
    let local = table(&[c], true, now, STALE_LIVE);
    assert!(text.starts_with(&local), "{text}");
    for needle in [
        "demo-1-id",
        "http://demo-2.demo.default.svc:2379",
        "revision: 42",
    ] {
        assert!(text.contains(needle), "{needle} in\n{text}");
    }
    assert!(
        text.ends_with("source: the EtcdCluster resources in namespace default, as the operator last wrote their status\n"),
        "{text}"
    );
}

#[tokio::test]
async fn status_without_a_name_lists_the_namespace() {
    let items = vec![to_json(&demo(None))];
    let clusters = play(
        move |mut api| async move {
            api.expect(Method::GET, CLUSTERS)
                .await
                .ok(&list("EtcdClusterList", items));
            api
        },
        |p| async move { p.status(None).await.expect("the list") },
    )
    .await;
    let text = status_text(&clusters, false, "default", SystemTime::now());
    assert!(text.contains("demo     Running  2/3"), "{text}");
}

#[tokio::test]
async fn an_unknown_cluster_names_the_ones_there() {
    let there = vec![to_json(&demo(None))];
    let e = play(
        move |mut api| async move {
            api.expect(Method::GET, &format!("{CLUSTERS}/nope"))
                .await
                .not_found();
            api.expect(Method::GET, CLUSTERS)
                .await
                .ok(&list("EtcdClusterList", there));
            api
        },
        |p| async move { p.cluster("nope").await.expect_err("no such cluster") },
    )
    .await;
    assert!(matches!(e, Error::NoCluster { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "no EtcdCluster nope in namespace default (there: demo); pass -n NAMESPACE for another \
         namespace"
    );
}

#[tokio::test]
async fn a_missing_crd_says_to_install_it() {
    let e = play(
        move |mut api| async move {
            let gone = json!({
                "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                "code": 404, "message": "the server could not find the requested resource",
            });
            api.expect(Method::GET, &format!("{CLUSTERS}/demo"))
                .await
                .reply(404, &gone);
            api.expect(Method::GET, CLUSTERS).await.reply(404, &gone);
            api
        },
        |p| async move { p.cluster("demo").await.expect_err("no CRD") },
    )
    .await;
    let said = e.to_string();
    assert!(
        said.starts_with("cannot list EtcdClusters in namespace default: ")
            && said.ends_with("(is the EtcdCluster CRD installed? kubectl apply -k deploy/)"),
        "{said}"
    );
}

#[tokio::test]
async fn a_backup_now_is_the_operators_save_job_from_a_follower() {
    let c = demo(Some(json!({"interval": "1h", "maxBackups": 3})));
    let body = to_json(&c);
    let saved = meta("demo-20261206-100000-000", 1, "ab".repeat(32));
    let report = Report {
        backups: vec![saved.clone()],
        saved: Some(saved.clone()),
        ..Report::default()
    };
    let log = format!("{}\n", report.line());
    let got = play(
        move |mut api| async move {
            api.expect(Method::GET, &format!("{CLUSTERS}/demo"))
                .await
                .ok(&body);
            let claim = core("persistentvolumeclaims", "demo-backups");
            let existing = json!({"metadata": {"name": "demo-backups", "namespace": "default"}});
            api.expect(Method::GET, &claim).await.ok(&existing);
            let (name, job) = expect_job(&mut api).await;
            assert!(name.starts_with("demo-save-"), "{name}");
            assert_eq!(job["metadata"]["ownerReferences"][0]["uid"], UID);
            let c = &job["spec"]["template"]["spec"]["containers"][0];
            assert_eq!(c["image"], "operator:1");
            assert_eq!(
                c["args"],
                json!([
                    "backup-job",
                    "--cluster",
                    "demo",
                    "--uid",
                    UID,
                    "save",
                    "--member",
                    "demo-1",
                    "--url",
                    "http://demo-1.demo.default.svc:2379"
                ])
            );
            expect_job_end(&mut api, &name, json!({"succeeded": 1}), &log).await;
            api
        },
        |p| async move { p.backup_now("demo", "operator:1").await },
    )
    .await;
    assert_eq!(got.expect("a backup"), saved);
}

#[tokio::test]
async fn a_cluster_without_backups_or_ready_members_is_refused_before_any_job() {
    let plain = to_json(&demo(None));
    let mut down = demo(Some(json!({"interval": "1h", "maxBackups": 3})));
    if let Some(s) = down.status.as_mut() {
        s.members.iter_mut().for_each(|m| m.ready = false);
    }
    let down = to_json(&down);
    let (a, b) = play(
        move |mut api| async move {
            for body in [plain, down] {
                api.expect(Method::GET, &format!("{CLUSTERS}/demo"))
                    .await
                    .ok(&body);
            }
            api
        },
        |p| async move {
            let a = p.backup_now("demo", "operator:1").await;
            let b = p.backup_now("demo", "operator:1").await;
            (a.expect_err("no spec.backup"), b.expect_err("no member"))
        },
    )
    .await;
    assert!(a.to_string().contains("demo has no spec.backup"), "{a}");
    assert!(b.to_string().contains("demo has no ready member"), "{b}");
}

#[tokio::test]
async fn the_operators_image_is_read_from_its_deployment() {
    let deployment = |env: Value| {
        json!({
            "metadata": {"name": "etcd-operator", "namespace": "etcd-operator-system"},
            "spec": {
                "selector": {"matchLabels": {"app.kubernetes.io/name": "etcd-operator"}},
                "template": {"spec": {"containers": [{
                    "name": "etcd-operator", "image": "registry/etcd-operator:0.1.0", "env": env,
                }]}},
            },
        })
    };
    let with_env = deployment(json!([{"name": "ETCD_OPERATOR_BACKUP_IMAGE", "value": "jobs:1"}]));
    let without = deployment(json!([]));
    let (a, b, c) = play(
        move |mut api| async move {
            for items in [vec![with_env], vec![without], vec![]] {
                let call = api.expect(Method::GET, "/apis/apps/v1/deployments").await;
                assert_eq!(
                    call.query.get("labelSelector").map(String::as_str),
                    Some("app.kubernetes.io%2Fname%3Detcd-operator")
                );
                call.ok(&list("DeploymentList", items));
            }
            api
        },
        |p| async move {
            (
                p.operator_image().await,
                p.operator_image().await,
                p.operator_image().await,
            )
        },
    )
    .await;
    assert_eq!(a.expect("from the variable"), "jobs:1");
    assert_eq!(b.expect("its own image"), "registry/etcd-operator:0.1.0");
    let none = c.expect_err("no operator").to_string();
    assert!(none.contains("pass --image IMAGE"), "{none}");
}

fn request(into: &str) -> Request {
    Request {
        backup: "demo.uid-1-20261206-100000-000".into(),
        into: into.into(),
        to_revision: Some(40),
        to_time: None,
    }
}

#[tokio::test]
async fn restore_apply_creates_a_new_cluster_restoring_the_backup_where_the_source_keeps_it() {
    let store = json!({"interval": "1h", "maxBackups": 3, "location": {
        "objectStore": {"url": "s3://backups/prod", "region": "eu-west-1"}}});
    let body = to_json(&demo(Some(store)));
    let created = play(
        move |mut api| async move {
            api.expect(Method::GET, &format!("{CLUSTERS}/demo"))
                .await
                .ok(&body);
            let call = api.expect(Method::POST, CLUSTERS).await;
            assert_eq!(
                call.query.get("fieldManager").map(String::as_str),
                Some(FIELD_MANAGER)
            );
            let new = call.body.clone();
            assert_eq!(new["metadata"]["name"], "demo-restored");
            assert!(new["metadata"].get("uid").is_none() && new.get("status").is_none());
            assert_eq!(new["spec"]["size"], 3);
            assert_eq!(
                new["spec"]["restore"],
                json!({
                    "backup": "demo.uid-1-20261206-100000-000",
                    "cluster": "demo",
                    "location": {"objectStore": {"url": "s3://backups/prod", "region": "eu-west-1"}},
                    "toRevision": 40,
                })
            );
            call.reply(201, &new);
            api.expect(Method::GET, &format!("{CLUSTERS}/demo"))
                .await
                .ok(&body);
            let conflict = json!({
                "kind": "Status", "apiVersion": "v1", "status": "Failure",
                "reason": "AlreadyExists", "code": 409, "message": "exists",
            });
            api.expect(Method::POST, CLUSTERS).await.reply(409, &conflict);
            api
        },
        |p| async move {
            let first = p.restore("demo", &request("demo-restored"), true).await;
            let again = p.restore("demo", &request("demo-restored"), true).await;
            (first, again)
        },
    )
    .await;
    assert_eq!(
        created.0.expect("created").metadata.name.as_deref(),
        Some("demo-restored")
    );
    let e = created.1.expect_err("exists").to_string();
    assert!(
        e.contains("an EtcdCluster demo-restored exists already"),
        "{e}"
    );
}

#[test]
fn a_restore_is_checked_as_the_operator_checks_a_spec() {
    let source = demo(Some(json!({"interval": "1h", "maxBackups": 3})));
    // Its default claim: no location named, the operator finds demo-backups.
    let new = build(&source, "default", &request("demo-restored")).expect("a cluster");
    let restore = new.spec.restore.as_ref().expect("spec.restore");
    assert_eq!(restore.location, None);
    assert_eq!(restore.cluster.as_deref(), Some("demo"));
    assert_eq!(new.metadata.namespace.as_deref(), Some("default"));

    let same = build(&source, "default", &request("demo")).expect_err("itself");
    assert!(same.to_string().contains("makes a new cluster"), "{same}");
    let bad_time = Request {
        to_revision: None,
        to_time: Some("yesterday".into()),
        ..request("demo-restored")
    };
    let e = build(&source, "default", &bad_time).expect_err("not a time");
    assert!(e.to_string().contains("spec.restore.toTime"), "{e}");
    let bad_name = build(&source, "default", &request("Demo_2")).expect_err("a bad name");
    assert!(bad_name.to_string().contains("metadata.name"), "{bad_name}");
}

#[test]
fn backups_say_what_the_status_says_and_where_they_are() {
    let mut c = demo(Some(json!({"interval": "1h", "maxBackups": 3})));
    if let Some(s) = c.status.as_mut() {
        s.backup = Some(crate::crd::BackupStatus {
            last_backup: Some("demo.uid-1-20261206-100000-000".into()),
            last_backup_time: Some("2026-12-06T10:00:00Z".into()),
            kept: 2,
            ..Default::default()
        });
    }
    let now = humantime::parse_rfc3339_weak("2026-12-06T10:05:00Z").expect("a time");
    let text = backups_text(&c, now);
    assert!(
        text.starts_with(
            "backups: newest demo.uid-1-20261206-100000-000 taken 2026-12-06T10:00:00Z (5m \
             ago); 2 kept\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("where: the volume claim demo-backups (folder backups/demo)"),
        "{text}"
    );
    let none = backups_text(&demo(None), now);
    assert_eq!(none, "demo takes no backups: spec.backup is not set\n");
}
