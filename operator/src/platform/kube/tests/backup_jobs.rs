//! The Kubernetes backup store's requests against the mocked API server:
//! a backup creates the claim when it does not exist (the spec's size and
//! class, no ownerReference: backups outlive the cluster), then a Job of
//! the operator's image with the claim at /state, waits for it, reads the
//! report from its pod's log and deletes it; a Job that fails says why;
//! the list a Job reported is kept, so listing again costs no Job.

use http::Method;
use serde_json::{Value, json};

use super::api::{ApiServer, Call, core, core_list, list, mock};
use super::fixtures::{platform, resource};
use super::scenario::play;
use crate::backup::job::Report;
use crate::backup::tests::meta;
use crate::backup::{BackupStore, Location, Source};
use crate::crd::StoragePolicy;
use crate::platform::Platform;
use crate::platform::kube::KubePlatform;
use crate::platform::kube::jobs::jobs_selector;
use crate::platform::kube::objects::selector_labels;
use crate::platform::kube::pod::DEFAULT_IMAGE;

pub(crate) const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";
const IMAGE: &str = "etcd-operator:test";

fn location() -> Location {
    Location {
        claim_size: Some("20Gi".into()),
        storage_class: Some("fast".into()),
        source: None,
        ..Location::of("demo", None)
    }
}

/// A platform whose backups run as Jobs of [`IMAGE`], demo registered.
fn with_image(client: kube::Client) -> KubePlatform {
    let r = resource(3, "3.5.1", StoragePolicy::Persistent);
    let p =
        KubePlatform::new(client, "default", DEFAULT_IMAGE).with_backup_image(Some(IMAGE.into()));
    p.register("demo", &r, 0).expect("a resource with a uid");
    p
}

/// The Job is created; returns its name and body.
pub(crate) async fn expect_job(api: &mut ApiServer) -> (String, Value) {
    let create: Call = api.expect(Method::POST, JOBS).await;
    let body = create.body.clone();
    let name = body["metadata"]["name"]
        .as_str()
        .expect("a name")
        .to_string();
    create.reply(201, &body);
    (name, body)
}

/// The Job `name` is read with `status`, its pod found, its log read (it
/// says `log`), and it is deleted.
pub(crate) async fn expect_job_end(api: &mut ApiServer, name: &str, status: Value, log: &str) {
    api.expect(Method::GET, &format!("{JOBS}/{name}"))
        .await
        .ok(&json!({"metadata": {"name": name}, "status": status}));
    let pods = api.expect(Method::GET, &core_list("pods")).await;
    let pod = format!("{name}-abcde");
    pods.ok(&list(
        "PodList",
        vec![json!({"metadata": {"name": pod, "namespace": "default"}})],
    ));
    api.expect(Method::GET, &format!("{}/log", core("pods", &pod)))
        .await
        .text(log);
    api.expect(Method::DELETE, &format!("{JOBS}/{name}"))
        .await
        .deleted();
}

#[tokio::test]
async fn a_backup_creates_the_claim_then_a_job_and_reads_its_report() {
    let (client, api) = mock();
    let saved = meta("demo-20260101-000000-000", 1, "ab".repeat(32));
    let report = Report {
        backups: vec![saved.clone()],
        saved: Some(saved.clone()),
        ..Report::default()
    };
    let log = format!("INFO streaming\n{}\n", report.line());
    let scenario = move |mut api: ApiServer| async move {
        let claim = core("persistentvolumeclaims", "demo-backups");
        api.expect(Method::GET, &claim).await.not_found();
        let created = api.expect_apply(&claim).await;
        let c = &created.body;
        assert!(
            c["metadata"].get("ownerReferences").is_none(),
            "outlives the cluster"
        );
        assert_eq!(
            c["metadata"]["labels"]["etcdoperator.dev/backups-of"],
            "demo"
        );
        assert_eq!(c["spec"]["resources"]["requests"]["storage"], "20Gi");
        assert_eq!(c["spec"]["storageClassName"], "fast");
        created.echo();
        let (name, job) = expect_job(&mut api).await;
        assert!(name.starts_with("demo-save-"), "{name}");
        assert_eq!(job["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(job["spec"]["backoffLimit"], 0);
        // The Job's pod is found by the cluster's Job selector but is not
        // one of the member pods the client Service and the
        // PodDisruptionBudget select.
        let labels = &job["spec"]["template"]["metadata"]["labels"];
        let selected = selector_labels("demo")
            .iter()
            .all(|(k, v)| labels[k.as_str()] == v.as_str());
        assert!(
            !selected,
            "a member selector matches the Job's pod: {labels}"
        );
        for pair in jobs_selector("demo").split(',') {
            let (k, v) = pair.split_once('=').expect("key=value");
            assert_eq!(labels[k], v, "{labels}");
        }
        assert_eq!(labels["etcdoperator.dev/job"], "backup");
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Never");
        let c = &pod["containers"][0];
        assert_eq!(c["image"], IMAGE);
        assert_eq!(
            c["args"],
            json!([
                "backup-job",
                "--cluster",
                "demo",
                "--uid",
                "uid-1",
                "save",
                "--member",
                "demo-1",
                "--url",
                "http://demo-1.demo.default.svc:2379"
            ])
        );
        assert_eq!(c["volumeMounts"][0]["mountPath"], "/state");
        assert_eq!(
            pod["volumes"][0]["persistentVolumeClaim"]["claimName"],
            "demo-backups"
        );
        expect_job_end(&mut api, &name, json!({"succeeded": 1}), &log).await;
        api
    };
    let got = play(
        with_image(client),
        scenario,
        |p| async move {
            let store = p.backups();
            let url = "http://demo-1.demo.default.svc:2379";
            let source = Source {
                member: "demo-1",
                url,
                tls: None,
            };
            let m = store.save(&location(), source).await.expect("a backup");
            // Listed from the Job's report: no request.
            let listed = store.list(&location()).await.expect("a list");
            (p, (m, listed))
        },
        api,
    )
    .await;
    assert_eq!(got.0, saved);
    assert_eq!(got.1, vec![saved]);
}

#[tokio::test]
async fn a_failed_job_says_why_and_is_not_started_again_at_once() {
    let (client, api) = mock();
    let report = Report {
        error: Some("snapshot from demo-1 failed: connection refused".into()),
        ..Report::default()
    };
    let log = report.line();
    let scenario = move |mut api: ApiServer| async move {
        let claim = core("persistentvolumeclaims", "demo-backups");
        let existing = json!({"metadata": {"name": "demo-backups", "namespace": "default"}});
        api.expect(Method::GET, &claim).await.ok(&existing);
        let (name, _) = expect_job(&mut api).await;
        expect_job_end(&mut api, &name, json!({"failed": 1}), &log).await;
        api
    };
    let errors = play(
        with_image(client),
        scenario,
        |p| async move {
            let store = p.backups();
            let source = Source {
                member: "demo-1",
                url: "http://demo-1.demo.default.svc:2379",
                tls: None,
            };
            let first = store.save(&location(), source).await.expect_err("failed");
            let again = store.save(&location(), source).await.expect_err("held");
            (p, (first.to_string(), again.to_string()))
        },
        api,
    )
    .await;
    assert!(errors.0.contains("connection refused"), "{}", errors.0);
    assert_eq!(errors.0, errors.1);
}

#[tokio::test]
async fn without_the_operators_image_backups_say_how_to_set_it() {
    let (client, api) = mock();
    let e = play(
        platform(client),
        |api: ApiServer| async move { api },
        |p| async move {
            let e = p.backups().list(&location()).await.expect_err("no image");
            (p, e)
        },
        api,
    )
    .await;
    assert_eq!(e.category(), "unsupported");
    assert!(e.to_string().contains("--backup-image"), "{e}");
}

/// A TLS cluster's backup Job mounts the client certificate Secret: until
/// the operator has made it, no Job is created (its pod could not mount
/// the Secret and would wait, unseen, for its deadline).
#[tokio::test]
async fn a_tls_clusters_backup_waits_for_its_client_certificate_secret() {
    let (client, api) = mock();
    let tls = crate::tls::ClientTls {
        ca: "ca".into(),
        cert_key: crate::tls::CertKey {
            cert: "cert".into(),
            key: "key".into(),
        },
        server_name: None,
    };
    let e = play(
        with_image(client),
        |mut api: ApiServer| async move {
            let claim = core("persistentvolumeclaims", "demo-backups");
            api.expect(Method::GET, &claim)
                .await
                .ok(&json!({"metadata": {"name": "demo-backups"}}));
            api.expect(Method::GET, &core("secrets", "demo-client-tls"))
                .await
                .not_found();
            api
        },
        |p| async move {
            let source = Source {
                member: "demo-1",
                url: "https://demo-1.demo.default.svc:2379",
                tls: Some(&tls),
            };
            let e = p.backups().save(&location(), source).await;
            (p, e.expect_err("no Secret yet"))
        },
        api,
    )
    .await;
    assert!(e.to_string().contains("secret demo-client-tls"), "{e}");
}

/// A new cluster restoring another cluster's backup: the Job mounts the
/// claim the spec names (`ex-backups`) and is told whose backups to read
/// (`--source example`); a claim that does not exist is an error naming
/// it, and no claim is created.
#[tokio::test]
async fn a_restore_reads_the_named_claim_and_never_creates_one() {
    let (client, api) = mock();
    let backup = "example-20261205-012308-950";
    let report = Report {
        source: Some("clusters/demo/restore.db".into()),
        ..Report::default()
    };
    let log = format!("{}\n", report.line());
    let scenario = move |mut api: ApiServer| async move {
        let claim = core("persistentvolumeclaims", "ex-backups");
        api.expect(Method::GET, &claim)
            .await
            .ok(&json!({"metadata": {"name": "ex-backups", "namespace": "default"}}));
        let (name, job) = expect_job(&mut api).await;
        assert!(name.starts_with("demo-"), "run by the new cluster: {name}");
        let pod = &job["spec"]["template"]["spec"];
        let args = &pod["containers"][0]["args"];
        assert_eq!(
            args,
            &json!([
                "backup-job",
                "--cluster",
                "demo",
                "--uid",
                "uid-1",
                "--source",
                "example",
                "open",
                "--backup",
                backup
            ])
        );
        assert_eq!(
            pod["volumes"][0]["persistentVolumeClaim"]["claimName"],
            "ex-backups"
        );
        expect_job_end(&mut api, &name, json!({"succeeded": 1}), &log).await;
        // The second restore names a claim that is not there: read, never
        // created.
        let missing = core("persistentvolumeclaims", "nowhere");
        api.expect(Method::GET, &missing).await.not_found();
        api
    };
    let from = |claim: &str| crate::validate::RestoreFrom {
        claim: Some(claim.into()),
        ..Default::default()
    };
    let (opened, missing) = play(
        with_image(client),
        scenario,
        move |p| async move {
            let store = p.backups();
            let opened = store
                .open_for_restore(
                    &Location::restore("demo", backup, &from("ex-backups")),
                    backup,
                )
                .await;
            let missing = store
                .open_for_restore(&Location::restore("demo", backup, &from("nowhere")), backup)
                .await;
            (p, (opened, missing))
        },
        api,
    )
    .await;
    let source = opened.expect("set aside");
    assert_eq!(
        source.as_str(),
        "persistentvolumeclaims/ex-backups/clusters/demo/restore.db"
    );
    let e = missing.expect_err("no such claim").to_string();
    assert!(
        e.contains("persistentvolumeclaim nowhere") && e.contains("example"),
        "{e}"
    );
}
