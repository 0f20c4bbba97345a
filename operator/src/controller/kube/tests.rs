//! The controller's checks, timing rules and glue, the glue against a
//! mocked API server.

use super::*;
use crate::crd::{BackupSpec, EtcdClusterSpec, RestoreSpec};

fn resource(size: i64, version: &str) -> EtcdCluster {
    let spec: EtcdClusterSpec =
        serde_json::from_value(serde_json::json!({"size": size, "version": version}))
            .expect("spec");
    EtcdCluster::new("demo", spec)
}

fn message(state: SpecState) -> String {
    match state {
        SpecState::Invalid { message, .. } => message,
        SpecState::Valid { .. } => panic!("expected an invalid spec"),
    }
}

#[test]
fn a_plain_spec_is_valid() {
    assert!(matches!(
        spec_state(&resource(3, "3.5.1")),
        SpecState::Valid { .. }
    ));
}

#[test]
fn backups_and_restores_are_taken_where_kubernetes_can_do_them() {
    let mut r = resource(3, "3.5.1");
    r.spec.backup = Some(BackupSpec {
        interval: "30m".into(),
        max_backups: 3,
        location: None,
        restore_check: None,
        continuous: None,
    });
    r.spec.restore = Some(RestoreSpec {
        backup: "demo-20260101-000000-000".into(),
        cluster: None,
        location: None,
        to_revision: None,
        to_time: None,
    });
    assert!(matches!(spec_state(&r), SpecState::Valid { .. }));
    // Restore checks run in backup Jobs.
    if let Some(b) = r.spec.backup.as_mut() {
        b.restore_check = Some(crate::crd::RestoreCheckSpec {
            interval: "1h".into(),
        });
    }
    assert!(matches!(spec_state(&r), SpecState::Valid { .. }));
    // So do continuous backups (a follower Deployment, restores replaying
    // the chain in a backup Job).
    if let Some(b) = r.spec.backup.as_mut() {
        b.continuous = Some(crate::crd::ContinuousSpec {
            segment_interval: "1s".into(),
            max_events: None,
        });
    }
    assert!(matches!(spec_state(&r), SpecState::Valid { .. }));
    // So are an object store (with its credentials Secret) and a restore
    // up to a point (the backup Job replays the chain up to it).
    let mut in_bucket = r.clone();
    if let Some(b) = in_bucket.spec.backup.as_mut() {
        b.location = serde_json::from_value(serde_json::json!({"objectStore": {
            "url": "s3://bkt", "credentialsSecret": "s3-keys",
        }}))
        .expect("a location");
    }
    if let Some(r) = in_bucket.spec.restore.as_mut() {
        r.to_revision = Some(5);
    }
    assert!(matches!(spec_state(&in_bucket), SpecState::Valid { .. }));
    // A folder, a file path and Ephemeral members are refused by field.
    r.spec.backup = Some(
        serde_json::from_value(serde_json::json!({
            "interval": "30m", "maxBackups": 3, "location": {"path": "/backups"},
        }))
        .expect("a backup spec"),
    );
    r.spec.restore = Some(RestoreSpec {
        backup: "/tmp/x.db".into(),
        cluster: None,
        location: None,
        to_revision: None,
        to_time: None,
    });
    r.spec.storage.policy = crate::crd::StoragePolicy::Ephemeral;
    if let Some(b) = r.spec.backup.as_mut() {
        b.restore_check = Some(crate::crd::RestoreCheckSpec {
            interval: "1h".into(),
        });
        b.continuous = Some(crate::crd::ContinuousSpec {
            segment_interval: "1s".into(),
            max_events: None,
        });
    }
    let m = message(spec_state(&r));
    assert!(
        !m.contains("restoreCheck"),
        "restore checks run on Kubernetes too: {m}"
    );
    assert!(
        !m.contains("spec.backup.continuous"),
        "continuous backups run on Kubernetes too: {m}"
    );
    for field in [
        "spec.backup.location.path:",
        "spec.restore.backup:",
        "storage.policy:",
    ] {
        assert!(m.contains(field), "{field} in {m}");
    }
}

#[test]
fn backups_of_a_tls_cluster_are_taken_on_kubernetes() {
    let spec: EtcdClusterSpec = serde_json::from_value(serde_json::json!({
        "size": 3, "version": "3.5.1",
        "backup": {"interval": "30m", "maxBackups": 3, "continuous": {"segmentInterval": "1s"},
                   "restoreCheck": {"interval": "1h"}},
    }))
    .expect("spec");
    let mut r = EtcdCluster::new("demo", spec);
    assert!(matches!(spec_state(&r), SpecState::Valid { .. }));
    // The Jobs and the follower mount the cluster's client certificate.
    for side in ["client", "peer"] {
        r.spec.tls =
            Some(serde_json::from_value(serde_json::json!({side: {"mode": "Auto"}})).expect("tls"));
        assert!(matches!(spec_state(&r), SpecState::Valid { .. }), "{side}");
    }
}

#[test]
fn versions_without_an_image_and_other_errors_together() {
    let m = message(spec_state(&resource(0, "3.6.0")));
    assert!(m.contains("spec.size"), "{m}");
    assert!(
        m.contains("spec.version: etcd 3.6.0 has no known image"),
        "{m}"
    );
}

fn context(client: Client) -> Arc<Context> {
    Arc::new(Context {
        client: client.clone(),
        image: crate::platform::kube::pod::DEFAULT_IMAGE.into(),
        backup_image: None,
        handover: true,
        scratch: None,
        metrics: Arc::default(),
        clients: Arc::new(Clients::new(Duration::from_millis(100))),
        recorder: Recorder::new(client, Reporter::from(MANAGER)),
        platforms: Mutex::default(),
        clusters: Mutex::default(),
        failures: Mutex::default(),
        watched: Arc::default(),
    })
}

/// A look at the platform: nothing there.
async fn observe(api: &mut crate::platform::kube::tests::api::ApiServer) {
    use crate::platform::kube::tests::api::{core_list, list};
    let claims = list("PersistentVolumeClaimList", vec![]);
    for (path, answer) in [
        (core_list("pods"), list("PodList", vec![])),
        (core_list("persistentvolumeclaims"), claims),
    ] {
        api.expect(http::Method::GET, &path).await.ok(&answer);
    }
}

#[tokio::test]
async fn an_invalid_spec_gets_one_event_and_an_invalid_status_and_nothing_else() {
    use crate::platform::kube::tests::api::{core, mock};
    use crate::platform::kube::tests::fixtures;
    use http::Method;
    let (client, api) = mock();
    let mut r = fixtures::resource(3, "3.5.1", crate::crd::StoragePolicy::Persistent);
    r.spec.backup = Some(
        serde_json::from_value(serde_json::json!({
            "interval": "30m", "maxBackups": 3, "location": {"path": "/backups"},
        }))
        .expect("a backup spec"),
    );
    let server = tokio::spawn(async move {
        let mut api = api;
        let event = "/apis/events.k8s.io/v1/namespaces/default/events";
        let e = api.expect(Method::POST, event).await;
        assert_eq!(e.body["type"], "Warning");
        assert_eq!(e.body["reason"], "InvalidSpec");
        assert_eq!(e.body["regarding"]["name"], "demo");
        let note = e.body["note"].as_str().unwrap_or_default().to_string();
        assert!(
            note.starts_with("spec.backup.location.path: a folder is where the local platform"),
            "{note}"
        );
        e.echo();
        let cm = core("configmaps", "demo-etcd-operator");
        api.expect(Method::GET, &cm).await.not_found();
        observe(&mut api).await;
        let path = "/apis/etcdoperator.dev/v1alpha1/namespaces/default/etcdclusters/demo/status";
        let status = api.expect_apply(path).await;
        assert_eq!(status.body["status"]["phase"], "Invalid");
        let mut whole = serde_json::to_value(fixtures::resource(
            3,
            "3.5.1",
            crate::crd::StoragePolicy::Persistent,
        ))
        .expect("json");
        whole["status"] = status.body["status"].clone();
        status.ok(&whole);
        // The second pass only looks: same message, same status.
        observe(&mut api).await;
        api
    });
    let ctx = context(client);
    let obj = Arc::new(r);
    for _ in 0..2 {
        let action = reconcile(obj.clone(), ctx.clone())
            .await
            .expect("reconciled");
        assert_eq!(action, Action::requeue(super::super::PROBLEM_INTERVAL));
    }
    // Deleted (foreground): forgotten, nothing asked.
    let mut gone = (*obj).clone();
    gone.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    let action = reconcile(Arc::new(gone), ctx.clone())
        .await
        .expect("forgotten");
    assert_eq!(action, Action::await_change());
    assert!(lock(&ctx.clusters).is_empty());
    drop(ctx);
    let api = server.await.expect("the scenario passed");
    api.done().await;
}

/// A name the API server takes (a DNS subdomain of up to 253 characters)
/// but no Service, pod or member could carry gets nothing named after it:
/// no record read, no pod listed, no object applied; only an Event and its
/// own status, once.
#[tokio::test]
async fn an_invalid_name_gets_its_status_and_an_event_and_nothing_named_after_it() {
    use crate::platform::kube::tests::api::mock;
    use crate::platform::kube::tests::fixtures;
    use http::Method;
    for name in ["a.b", &"x".repeat(60), "1abc"] {
        let (client, api) = mock();
        let mut r = fixtures::resource(3, "3.5.1", crate::crd::StoragePolicy::Persistent);
        r.metadata.name = Some(name.to_string());
        let resource = r.clone();
        let server = tokio::spawn(async move {
            let mut api = api;
            let event = "/apis/events.k8s.io/v1/namespaces/default/events";
            let e = api.expect(Method::POST, event).await;
            assert_eq!(e.body["reason"], "InvalidSpec");
            let note = e.body["note"].as_str().unwrap_or_default().to_string();
            assert!(note.starts_with("metadata.name: "), "{note}");
            assert!(note.contains("NAME-N"), "{note}");
            e.echo();
            let path = format!(
                "/apis/etcdoperator.dev/v1alpha1/namespaces/default/etcdclusters/{}/status",
                resource.metadata.name.as_deref().unwrap_or_default()
            );
            let status = api.expect_apply(&path).await;
            assert_eq!(status.body["status"]["phase"], "Invalid");
            let degraded = &status.body["status"]["conditions"][2];
            assert_eq!(degraded["reason"], "InvalidSpec");
            assert!(
                degraded["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("not a valid cluster name")),
                "{degraded}"
            );
            let mut whole = serde_json::to_value(&resource).expect("json");
            whole["status"] = status.body["status"].clone();
            status.ok(&whole);
            api
        });
        let ctx = context(client);
        let obj = Arc::new(r);
        for _ in 0..2 {
            let action = reconcile(obj.clone(), ctx.clone())
                .await
                .expect("reconciled");
            assert_eq!(action, Action::await_change());
        }
        assert!(
            lock(&ctx.clusters)
                .values()
                .all(|(_, m)| m.try_lock().is_ok_and(|m| m.cluster.is_none())),
            "no cluster for {name}"
        );
        drop(ctx);
        let api = server.await.expect("the scenario passed");
        api.done().await;
    }
}

#[test]
fn requeue_and_backoff_are_bounded() {
    assert_eq!(requeue_after(Duration::ZERO), AFTER_STEP);
    assert_eq!(requeue_after(Duration::from_millis(50)), MIN_POLL);
    assert_eq!(
        requeue_after(Duration::from_secs(2)),
        Duration::from_secs(2)
    );
    assert_eq!(backoff(1), Duration::from_millis(500));
    assert_eq!(backoff(2), Duration::from_secs(1));
    assert_eq!(backoff(100), Duration::from_secs(30));
}

#[test]
fn outside_the_cluster_it_says_members_cannot_be_reached() {
    assert_eq!(outside_cluster_warning(Some("10.96.0.1")), None);
    for host in [None, Some(""), Some(" ")] {
        let w = outside_cluster_warning(host).expect("a warning");
        assert!(w.contains("pod IP"), "{w}");
        assert!(w.contains("deploy/base/operator.yaml"), "{w}");
        // Not every member looks down from outside: where pod IPs are
        // routed it works, and the warning says how to tell.
        assert!(!w.contains("every member will look down"), "{w}");
        assert!(w.contains("curl http://POD_IP:2379/health"), "{w}");
    }
}

#[test]
fn event_notes_fit_the_api_servers_limit_in_bytes() {
    assert_eq!(event_note("short"), "short");
    let wide = "é".repeat(1000);
    let note = event_note(&wide);
    assert!(note.len() <= NOTE_MAX_BYTES, "{}", note.len());
    assert!(note.len() >= NOTE_MAX_BYTES - 1);
    assert!(note.chars().all(|c| c == 'é'));
    assert_eq!(event_note(&"a".repeat(2000)).len(), NOTE_MAX_BYTES);
}

/// After an API server restart, a watch that expired ("too old resource
/// version") is listed again at once, not after the backoff the outage's
/// errors had grown (seen: a deleted pod noticed 5.7 s late). Time is
/// tokio's paused clock: virtual, so the comparison is exact.
#[tokio::test(start_paused = true)]
async fn an_expired_watch_is_listed_again_at_once() {
    use crate::platform::kube::tests::fake::fake;
    let (client, fake) = fake();
    fake.expire_next_watch("/api/v1/pods");
    let opts = Options {
        namespace: None,
        image: crate::platform::kube::pod::DEFAULT_IMAGE.into(),
        backup_image: None,
        handover: true,
        scratch: None,
        metrics: Default::default(),
        health: Default::default(),
    };
    run(client, opts, tokio::time::sleep(Duration::from_secs(5)))
        .await
        .expect("the controller ran");
    let pods: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|s| s.path == "/api/v1/pods")
        .collect();
    let watch = |s: &crate::platform::kube::tests::fake::Seen| s.query.contains_key("watch");
    let expired = pods.iter().position(watch).expect("a watch of pods");
    let relist = pods[expired + 1..]
        .iter()
        .find(|s| !watch(s))
        .unwrap_or_else(|| panic!("no list after the expired watch: {pods:#?}"));
    let waited = relist.at - pods[expired].at;
    assert!(
        waited < Duration::from_millis(100),
        "listed again after {waited:?}"
    );
}
