//! `KubePlatform` against a mocked API server, changes: upgrades, the
//! record and the status, retiring members, and the disruption budget.

use http::Method;
use serde_json::json;

use super::api::{ApiServer, core, core_list, list, mock};
use super::fixtures::{GENERATION, Seen, platform, platform_for, resource};
use super::scenario::{
    assert_owned, config_of, expect_graceful_delete, expect_member_read, expect_shared,
    expect_watched_gone, play,
};
use crate::crd::{EtcdClusterStatus, Phase, StoragePolicy};
use crate::member::{Settings, Tuning};
use crate::platform::kube::KubePlatform;
use crate::platform::{ClusterRecord, Platform};
use crate::version::Version;

fn settings(version: &str, tuning: Tuning) -> Settings {
    Settings {
        version: version.parse().expect("a version"),
        tuning,
        backend: Default::default(),
        pod: Default::default(),
    }
}

/// Plays `scenario` while `platform` restarts demo-0 with `wanted`, which
/// must succeed (`done` says how).
async fn restart_demo_0<S>(
    platform: KubePlatform,
    scenario: impl FnOnce(ApiServer) -> S,
    api: ApiServer,
    wanted: Settings,
    done: &str,
) where
    S: Future<Output = ApiServer> + Send + 'static,
{
    let call = |p: KubePlatform| async move {
        p.restart("demo", "demo-0", &wanted).await.expect(done);
        (p, ())
    };
    play(platform, scenario, call, api).await
}

/// The value of `flag` in a pod's etcd command line.
fn arg(pod: &serde_json::Value, flag: &str) -> Option<String> {
    let args = pod["spec"]["containers"][0]["args"].as_array()?;
    let i = args.iter().position(|a| a == flag)?;
    args.get(i + 1)?.as_str().map(str::to_string)
}

#[tokio::test]
async fn new_timing_re_creates_the_pod_with_its_flags_and_the_claim_waits() {
    let (client, api) = mock();
    let tuning = Tuning::new(Some(25), Some(250));
    let scenario = move |mut api: ApiServer| async move {
        let claim = Seen::claim("demo-0", "3.5.1").started();
        let pod = Seen::pod("demo-0", "3.5.1", StoragePolicy::Persistent).ready();
        expect_member_read(&mut api, Some(&claim), &pod).await;
        // The claim keeps the timing its data ran with until the member is
        // ready on the new one (members::Mark): no write to it here.
        expect_graceful_delete(&mut api, &pod).await;
        let new = api.expect_apply(&core("pods", "demo-0")).await;
        assert_eq!(
            arg(&new.body, "--heartbeat-interval").as_deref(),
            Some("25")
        );
        assert_eq!(arg(&new.body, "--election-timeout").as_deref(), Some("250"));
        let recorded = config_of(&new.body);
        assert_eq!(
            (recorded.version, recorded.tuning),
            (Version::new(3, 5, 1), tuning)
        );
        new.echo();
        api
    };
    let wanted = settings("3.5.1", tuning);
    restart_demo_0(platform(client), scenario, api, wanted, "restarted").await;
}

/// A raised quota and a new compaction go the way of new timing: the pod
/// is re-created with their flags and records them (they restarted
/// nothing before: the plan compared only version and tuning).
#[tokio::test]
async fn a_new_quota_and_compaction_re_create_the_pod_with_their_flags() {
    let (client, api) = mock();
    let mut wanted = settings("3.5.1", Tuning::default());
    wanted.backend.quota_backend_bytes = Some(64 << 20);
    wanted.backend.compaction = Some(crate::member::backend::Compaction {
        mode: crate::crd::CompactionMode::Revision,
        retention: "1000".into(),
    });
    let backend = wanted.backend.clone();
    let scenario = move |mut api: ApiServer| async move {
        let claim = Seen::claim("demo-0", "3.5.1").started();
        let pod = Seen::pod("demo-0", "3.5.1", StoragePolicy::Persistent).ready();
        expect_member_read(&mut api, Some(&claim), &pod).await;
        expect_graceful_delete(&mut api, &pod).await;
        let new = api.expect_apply(&core("pods", "demo-0")).await;
        assert_eq!(
            arg(&new.body, "--quota-backend-bytes").as_deref(),
            Some("67108864")
        );
        assert_eq!(
            arg(&new.body, "--auto-compaction-mode").as_deref(),
            Some("revision")
        );
        assert_eq!(
            arg(&new.body, "--auto-compaction-retention").as_deref(),
            Some("1000")
        );
        assert_eq!(config_of(&new.body).backend, backend);
        new.echo();
        api
    };
    restart_demo_0(platform(client), scenario, api, wanted, "restarted").await;
}

#[tokio::test]
async fn an_empty_dir_member_with_new_timing_is_deleted_to_be_replaced() {
    let (client, api) = mock();
    let r = resource(3, "3.5.1", StoragePolicy::Ephemeral);
    let scenario = |mut api: ApiServer| async move {
        let pod = Seen::pod("demo-0", "3.5.1", StoragePolicy::Ephemeral).ready();
        expect_member_read(&mut api, None, &pod).await;
        // A container's command line cannot change in place.
        let delete = api.expect(Method::DELETE, &core("pods", "demo-0")).await;
        assert_eq!(delete.body["preconditions"]["uid"], "pod-demo-0");
        delete.ok(&pod.clone().terminating().json());
        expect_watched_gone(&mut api, "demo-0").await;
        api
    };
    let tuning = Tuning::new(None, Some(3000));
    let wanted = settings("3.5.1", tuning);
    restart_demo_0(platform_for(client, &r), scenario, api, wanted, "deleted").await;
}

#[tokio::test]
async fn upgrade_recreates_the_pod_on_the_new_image_and_leaves_the_claim() {
    let (client, api) = mock();
    let scenario = |mut api: ApiServer| async move {
        let claim = Seen::claim("demo-0", "3.4.23").started();
        let pod = Seen::pod("demo-0", "3.4.23", StoragePolicy::Persistent).ready();
        expect_member_read(&mut api, Some(&claim), &pod).await;
        // The claim keeps 3.4.23 until the member runs 3.5.1.
        expect_graceful_delete(&mut api, &pod).await;
        let new = api.expect_apply(&core("pods", "demo-0")).await;
        let etcd = &new.body["spec"]["containers"][0];
        assert_eq!(etcd["image"], "quay.io/coreos/etcd:v3.5.1");
        assert_eq!(config_of(&new.body).version, Version::new(3, 5, 1));
        new.echo();
        api
    };
    let wanted = settings("3.5.1", Tuning::default());
    restart_demo_0(platform(client), scenario, api, wanted, "upgraded").await;
}

#[tokio::test]
async fn an_empty_dir_member_is_upgraded_in_place() {
    let (client, api) = mock();
    let r = resource(3, "3.5.1", StoragePolicy::Ephemeral);
    let scenario = |mut api: ApiServer| async move {
        let pod = Seen::pod("demo-0", "3.5.1", StoragePolicy::Ephemeral).ready();
        expect_member_read(&mut api, None, &pod).await;
        let patch = api
            .expect_patch("strategic-merge", &core("pods", "demo-0"))
            .await;
        assert_eq!(
            patch.body["spec"],
            json!({"containers": [{"name": "etcd", "image": "quay.io/coreos/etcd:v3.5.2"}]})
        );
        assert_eq!(config_of(&patch.body).version, Version::new(3, 5, 2));
        patch.ok(&pod.json());
        api
    };
    let wanted = settings("3.5.2", Tuning::default());
    restart_demo_0(platform_for(client, &r), scenario, api, wanted, "upgraded").await;
}

#[tokio::test]
async fn record_and_status_are_applied_to_owned_objects() {
    let (client, api) = mock();
    let record = ClusterRecord {
        token: "demo-token".into(),
        bootstrapped: true,
        next_index: 3,
        generation: 2,
        ..ClusterRecord::default()
    };
    let expected = record.clone();
    let scenario = move |mut api: ApiServer| async move {
        let cm_path = core("configmaps", "demo-etcd-operator");
        let cm = api.expect_apply(&cm_path).await;
        assert_owned(&cm.body);
        let json = cm.body["data"]["record.json"]
            .as_str()
            .expect("record json");
        let saved: ClusterRecord = serde_json::from_str(json).expect("a record");
        assert_eq!(saved, expected);
        let stored = cm.body.clone();
        cm.echo();
        api.expect(Method::GET, &cm_path).await.ok(&stored);
        // An earlier resource's record is not this cluster's.
        let mut foreign = stored.clone();
        foreign["metadata"]["ownerReferences"][0]["uid"] = json!("uid-0");
        api.expect(Method::GET, &cm_path).await.ok(&foreign);
        let status_path =
            "/apis/etcdoperator.dev/v1alpha1/namespaces/default/etcdclusters/demo/status";
        let status = api.expect_apply(status_path).await;
        assert_eq!(status.body["apiVersion"], "etcdoperator.dev/v1alpha1");
        assert_eq!(status.body["kind"], "EtcdCluster");
        assert_eq!(status.body["status"]["phase"], "Running");
        assert_eq!(status.body["status"]["observedGeneration"], GENERATION);
        assert!(status.body.get("spec").is_none(), "status only");
        // The server answers with the whole resource.
        let mut whole = serde_json::to_value(resource(3, "3.5.1", StoragePolicy::Persistent))
            .expect("resource json");
        whole["status"] = status.body["status"].clone();
        status.ok(&whole);
        api
    };
    let loaded = play(
        platform(client),
        scenario,
        |p| async move {
            p.save_record("demo", &record).await.expect("saved");
            let loaded = p.load_record("demo").await.expect("loaded");
            let foreign = p.load_record("demo").await.expect("loaded");
            let mut r = resource(3, "3.5.1", StoragePolicy::Persistent);
            r.status = Some(EtcdClusterStatus {
                phase: Phase::Running,
                observed_generation: Some(2),
                ..EtcdClusterStatus::default()
            });
            p.save_status("demo", &r).await.expect("status");
            (p, (loaded, foreign))
        },
        api,
    )
    .await;
    assert_eq!(loaded.0.map(|r| r.next_index), Some(3));
    assert_eq!(loaded.1, None);
}

#[tokio::test]
async fn retiring_keeps_the_claims_aside_and_deletes_the_pods() {
    let (client, api) = mock();
    let scenario = |mut api: ApiServer| async move {
        let pods = vec![Seen::pod("demo-0", "3.5.1", StoragePolicy::Persistent).json()];
        api.expect(Method::GET, &core_list("pods"))
            .await
            .ok(&list("PodList", pods));
        let claims = vec![
            Seen::claim("demo-0", "3.5.1").started().json(),
            Seen::claim("demo-9", "3.5.1").owned_by("uid-0").json(),
        ];
        let claims = list("PersistentVolumeClaimList", claims);
        api.expect(Method::GET, &core_list("persistentvolumeclaims"))
            .await
            .ok(&claims);
        let relabel = api
            .expect_patch("merge", &core("persistentvolumeclaims", "demo-0-data"))
            .await;
        assert_eq!(
            relabel.body["metadata"]["labels"],
            json!({
                "etcdoperator.dev/cluster": null,
                "etcdoperator.dev/retired": "2026-01-01T000000Z",
                "etcdoperator.dev/retired-from": "demo",
            })
        );
        relabel.ok(&Seen::claim("demo-0", "3.5.1").json());
        let delete = api.expect(Method::DELETE, &core("pods", "demo-0")).await;
        assert_eq!(delete.body["gracePeriodSeconds"], 0);
        delete.deleted();
        api
    };
    let place = play(
        platform(client),
        scenario,
        |p| async move {
            let place = p
                .retire_members("demo", "2026-01-01T000000Z")
                .await
                .expect("retired");
            (p, place)
        },
        api,
    )
    .await;
    assert!(
        place.contains("etcdoperator.dev/retired=2026-01-01T000000Z"),
        "{place}"
    );
}

#[tokio::test]
async fn the_budget_protects_the_members_still_there_during_a_scale_down() {
    let (client, api) = mock();
    let one = resource(1, "3.5.1", StoragePolicy::Persistent);
    let p = platform_for(client, &one);
    let scenario = |mut api: ApiServer| async move {
        // Three voters left while the spec asks for one: still 2 of 3.
        expect_shared(&mut api, 2).await;
        // Scaled down: all of the one (no eviction loses it).
        expect_shared(&mut api, 1).await;
        api
    };
    play(
        p,
        scenario,
        |p| async move {
            p.prepare("demo", &one, 3, true).await.expect("applied");
            let again = p.prepare("demo", &one, 3, true).await;
            again.expect("nothing new to apply");
            p.prepare("demo", &one, 1, true).await.expect("applied");
            (p, ())
        },
        api,
    )
    .await;
}

/// An emptyDir member whose upgrade needs a new pod (3.4 -> 3.5.99: another
/// readiness path) loses its data with its pod: the new image is tried in
/// a short-lived Job first, and a version whose image cannot be pulled
/// deletes nothing.
#[tokio::test]
async fn an_empty_dir_member_is_not_given_up_for_an_image_that_does_not_run() {
    let (client, api) = mock();
    let r = resource(3, "3.4.23", StoragePolicy::Ephemeral);
    let jobs = "/apis/batch/v1/namespaces/default/jobs";
    let scenario = move |mut api: ApiServer| async move {
        let pod = Seen::pod("demo-0", "3.4.23", StoragePolicy::Ephemeral).ready();
        expect_member_read(&mut api, None, &pod).await;
        let create = api.expect(Method::POST, jobs).await;
        let job = create.body.clone();
        let name = job["metadata"]["name"]
            .as_str()
            .expect("a name")
            .to_string();
        let container = &job["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "quay.io/coreos/etcd:v3.5.99");
        assert_eq!(container["command"], json!(["etcd", "--version"]));
        create.reply(201, &job);
        api.expect(Method::GET, &format!("{jobs}/{name}"))
            .await
            .ok(&json!({"metadata": {"name": name}, "status": {}}));
        let pod_name = format!("{name}-abcde");
        api.expect(Method::GET, &core_list("pods")).await.ok(&list(
            "PodList",
            vec![json!({
                "metadata": {"name": pod_name, "namespace": "default"},
                "status": {"containerStatuses": [{
                    "name": "etcd-version", "image": "quay.io/coreos/etcd:v3.5.99",
                    "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"waiting": {"reason": "ErrImagePull", "message": "not found"}},
                }]},
            })],
        ));
        api.expect(Method::GET, &format!("{}/log", core("pods", &pod_name)))
            .await
            .text("");
        api.expect(Method::DELETE, &format!("{jobs}/{name}"))
            .await
            .deleted();
        // And no DELETE of the member's pod.
        api
    };
    let err = play(
        platform_for(client, &r),
        scenario,
        |p| async move {
            let e = p
                .restart("demo", "demo-0", &settings("3.5.99", Tuning::default()))
                .await
                .expect_err("refused");
            (p, e)
        },
        api,
    )
    .await;
    let m = err.to_string();
    assert!(
        m.contains("quay.io/coreos/etcd:v3.5.99 does not run etcd"),
        "{m}"
    );
    assert!(
        m.contains("ErrImagePull") && m.contains("set spec.version back"),
        "{m}"
    );
}

/// A replica that may have lost the Lease (its fence closed: paused past
/// its renew deadline) sends no write at all: no status, no pod change, no
/// Job, no member added in etcd. (Seen on a real node: a resumed replica
/// created a backup Job 8 s after another replica held the Lease.)
#[tokio::test]
async fn a_deposed_replica_sends_no_write() {
    crate::fence::elect();
    let (client, api) = mock();
    let for_jobs = client.clone();
    let scenario = |api: ApiServer| async move { api };
    let errors = play(
        platform(client),
        scenario,
        |p| async move {
            let r = resource(3, "3.5.1", StoragePolicy::Persistent);
            let status = p.save_status("demo", &r).await.expect_err("refused");
            let jobs = crate::platform::kube::jobs::Jobs::new(for_jobs, "default");
            let job = crate::platform::kube::image_check::image_check_job(
                "demo-image-check-x",
                "demo",
                "quay.io/coreos/etcd",
                Version::new(3, 5, 1),
                None,
                &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference::default(),
            );
            let job = jobs.run(&job, "etcd-version").await.expect_err("refused");
            (p, vec![status.to_string(), job.to_string()])
        },
        api,
    )
    .await;
    for e in errors {
        assert!(e.contains("may have lost its leadership"), "{e}");
    }
    let clients = crate::etcd::Clients::new(std::time::Duration::from_millis(200));
    let e = clients
        .add_learner("http://127.0.0.1:1", "http://127.0.0.2:2380")
        .await
        .expect_err("refused");
    assert!(
        e.to_string().contains("may have lost its leadership"),
        "{e}"
    );
}
