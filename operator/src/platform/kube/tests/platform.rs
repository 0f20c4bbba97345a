//! `KubePlatform` against a mocked API server: the exact requests of each
//! call, in order, and nothing else.

use std::future::Future;

use http::Method;
use serde_json::{Value, json};

use super::api::{ApiServer, Call, core, core_list, list, mock};
use super::fixtures::{GENERATION, Seen, UID, config, platform, platform_for, resource, stored};
use crate::crd::{EtcdClusterStatus, Phase, StoragePolicy};
use crate::platform::kube::{KubePlatform, StoredConfig};
use crate::platform::{ClusterRecord, Platform};
use crate::version::Version;

/// Runs `call` on a platform while `scenario` plays the server, then
/// checks that nothing else was asked.
async fn play<S, F, T>(
    platform: KubePlatform,
    scenario: impl FnOnce(ApiServer) -> S,
    call: impl FnOnce(KubePlatform) -> F,
    api: ApiServer,
) -> T
where
    S: Future<Output = ApiServer> + Send + 'static,
    F: Future<Output = (KubePlatform, T)>,
{
    let server = tokio::spawn(scenario(api));
    let (platform, out) = call(platform).await;
    drop(platform);
    let api = server.await.expect("the scenario passed");
    api.done().await;
    out
}

fn config_of(object: &Value) -> StoredConfig {
    let json = object["metadata"]["annotations"]["etcdoperator.dev/member-config"]
        .as_str()
        .expect("config annotation");
    serde_json::from_str(json).expect("config json")
}

fn assert_owned(object: &Value) {
    let owner = &object["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["uid"].as_str()),
        (Some("EtcdCluster"), Some(UID))
    );
}

/// The Services and the budget, applied before the first member.
async fn expect_shared(api: &mut ApiServer, min_available: i64) {
    let pdb = "/apis/policy/v1/namespaces/default/poddisruptionbudgets/demo";
    // Looked for first: never taken over when not this resource's.
    for path in [
        core("services", "demo"),
        core("services", "demo-client"),
        pdb.into(),
    ] {
        api.expect(Method::GET, &path).await.not_found();
    }
    let peer = api.expect_apply(&core("services", "demo")).await;
    assert_eq!(peer.body["spec"]["clusterIP"], "None");
    assert_owned(&peer.body);
    peer.echo();
    let client = api.expect_apply(&core("services", "demo-client")).await;
    assert_eq!(client.body["spec"]["ports"][0]["port"], 2379);
    client.echo();
    let pdb = api.expect_apply(pdb).await;
    assert_eq!(pdb.body["spec"]["minAvailable"], min_available);
    assert_owned(&pdb.body);
    pdb.echo();
}

async fn expect_new_member(api: &mut ApiServer, member: &str) -> (Value, Value) {
    api.expect(Method::GET, &core("pods", member))
        .await
        .not_found();
    let claim = format!("{member}-data");
    api.expect(Method::GET, &core("persistentvolumeclaims", &claim))
        .await
        .not_found();
    let c: Call = api
        .expect_apply(&core("persistentvolumeclaims", &claim))
        .await;
    let claim_body = c.body.clone();
    c.echo();
    let p = api.expect_apply(&core("pods", member)).await;
    let pod_body = p.body.clone();
    p.echo();
    (claim_body, pod_body)
}

#[tokio::test]
async fn creating_a_new_cluster_applies_services_claims_and_pods() {
    let (client, api) = mock();
    let scenario = |mut api: ApiServer| async move {
        expect_shared(&mut api, 2).await;
        for member in ["demo-0", "demo-1"] {
            let (claim, pod) = expect_new_member(&mut api, member).await;
            assert_owned(&claim);
            assert_owned(&pod);
            assert_eq!(config_of(&claim), stored(member, "3.5.1"));
            assert_eq!(config_of(&pod), stored(member, "3.5.1"));
            assert_eq!(
                claim["metadata"]["labels"]["etcdoperator.dev/member"],
                member
            );
            assert_eq!(
                pod["metadata"]["labels"]["etcdoperator.dev/cluster"],
                "demo"
            );
            assert_eq!(
                pod["spec"]["containers"][0]["image"],
                "quay.io/coreos/etcd:v3.5.1"
            );
            let claim_name = format!("{member}-data");
            assert_eq!(
                pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
                claim_name
            );
        }
        // demo-0 again: its pod runs, nothing to do.
        let running = Seen::pod("demo-0", "3.5.1", StoragePolicy::Persistent).ready();
        api.expect(Method::GET, &core("pods", "demo-0"))
            .await
            .ok(&running.json());
        api
    };
    play(
        platform(client),
        scenario,
        |p| async move {
            for member in ["demo-0", "demo-1", "demo-0"] {
                p.create("demo", &config(member, "3.5.1"))
                    .await
                    .expect("created");
            }
            (p, ())
        },
        api,
    )
    .await;
}

#[tokio::test]
async fn a_deleted_pod_is_recreated_from_its_surviving_claim() {
    let (client, api) = mock();
    let claim = Seen::claim("demo-0", "3.5.1").started();
    let scenario = move |mut api: ApiServer| async move {
        // members(): the claim is there, the pod is not.
        api.expect(Method::GET, &core_list("pods"))
            .await
            .ok(&list("PodList", vec![]));
        let claims = api
            .expect(Method::GET, &core_list("persistentvolumeclaims"))
            .await;
        assert_eq!(
            claims.query.get("labelSelector").map(String::as_str),
            Some(
                "etcdoperator.dev%2Fcluster%3Ddemo%2Capp.kubernetes.io%2Fmanaged-by%3Detcd-operator"
            )
        );
        claims.ok(&list("PersistentVolumeClaimList", vec![claim.json()]));
        // start(): from the claim's config, no new claim.
        let got = api
            .expect(Method::GET, &core("persistentvolumeclaims", "demo-0-data"))
            .await;
        got.ok(&claim.json());
        api.expect(Method::GET, &core("pods", "demo-0"))
            .await
            .not_found();
        expect_shared(&mut api, 2).await;
        let pod = api.expect_apply(&core("pods", "demo-0")).await;
        assert_eq!(config_of(&pod.body), stored("demo-0", "3.5.1"));
        assert_eq!(
            pod.body["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
            "demo-0-data"
        );
        pod.echo();
        api
    };
    let members = play(
        platform(client),
        scenario,
        |p| async move {
            let members = p.members("demo").await.expect("members");
            p.start("demo", "demo-0").await.expect("started");
            (p, members)
        },
        api,
    )
    .await;
    assert_eq!(members.len(), 1);
    assert!(!members[0].running && members[0].has_data);
}

#[tokio::test]
async fn a_ready_member_is_marked_started_once() {
    let (client, api) = mock();
    let scenario = |mut api: ApiServer| async move {
        let pod = Seen::pod("demo-0", "3.5.1", StoragePolicy::Persistent).ready();
        api.expect(Method::GET, &core_list("pods"))
            .await
            .ok(&list("PodList", vec![pod.json()]));
        let claim = Seen::claim("demo-0", "3.5.1");
        let claims = list("PersistentVolumeClaimList", vec![claim.json()]);
        api.expect(Method::GET, &core_list("persistentvolumeclaims"))
            .await
            .ok(&claims);
        let mark = api
            .expect_patch("merge", &core("persistentvolumeclaims", "demo-0-data"))
            .await;
        assert!(mark.body["metadata"]["annotations"]["etcdoperator.dev/started"].is_string());
        mark.ok(&claim.started().json());
        api
    };
    let members = play(
        platform(client),
        scenario,
        |p| async move {
            let m = p.members("demo").await.expect("members");
            (p, m)
        },
        api,
    )
    .await;
    assert!(members[0].running && members[0].has_data);
}

#[tokio::test]
async fn deleting_a_member_deletes_its_pod_at_once_and_its_claim() {
    let (client, api) = mock();
    let scenario = |mut api: ApiServer| async move {
        let pod = api.expect(Method::DELETE, &core("pods", "demo-2")).await;
        assert_eq!(pod.body["gracePeriodSeconds"], 0);
        pod.deleted();
        // Already gone is fine.
        api.expect(
            Method::DELETE,
            &core("persistentvolumeclaims", "demo-2-data"),
        )
        .await
        .not_found();
        api
    };
    play(
        platform(client),
        scenario,
        |p| async move {
            p.delete("demo", "demo-2").await.expect("deleted");
            (p, ())
        },
        api,
    )
    .await;
}

#[tokio::test]
async fn upgrade_records_the_version_then_recreates_the_pod_on_the_new_image() {
    let (client, api) = mock();
    let scenario = |mut api: ApiServer| async move {
        let claim = Seen::claim("demo-0", "3.4.23").started();
        api.expect(Method::GET, &core("persistentvolumeclaims", "demo-0-data"))
            .await
            .ok(&claim.json());
        let pod = Seen::pod("demo-0", "3.4.23", StoragePolicy::Persistent).ready();
        api.expect(Method::GET, &core("pods", "demo-0"))
            .await
            .ok(&pod.json());
        let note = api
            .expect_patch("merge", &core("persistentvolumeclaims", "demo-0-data"))
            .await;
        assert_eq!(config_of(&note.body).version, Version::new(3, 5, 1));
        note.ok(&claim.json());
        let delete = api.expect(Method::DELETE, &core("pods", "demo-0")).await;
        assert_eq!(delete.body["preconditions"]["uid"], "pod-demo-0");
        assert!(delete.body.get("gracePeriodSeconds").is_none(), "graceful");
        delete.ok(&pod.clone().terminating().json());
        api.expect(Method::GET, &core("pods", "demo-0"))
            .await
            .not_found();
        let new = api.expect_apply(&core("pods", "demo-0")).await;
        let etcd = &new.body["spec"]["containers"][0];
        assert_eq!(etcd["image"], "quay.io/coreos/etcd:v3.5.1");
        assert_eq!(config_of(&new.body).version, Version::new(3, 5, 1));
        new.echo();
        api
    };
    play(
        platform(client),
        scenario,
        |p| async move {
            p.upgrade("demo", "demo-0", Version::new(3, 5, 1))
                .await
                .expect("upgraded");
            (p, ())
        },
        api,
    )
    .await;
}

#[tokio::test]
async fn an_empty_dir_member_is_upgraded_in_place() {
    let (client, api) = mock();
    let r = resource(3, "3.5.1", StoragePolicy::Ephemeral);
    let scenario = |mut api: ApiServer| async move {
        api.expect(Method::GET, &core("persistentvolumeclaims", "demo-0-data"))
            .await
            .not_found();
        let pod = Seen::pod("demo-0", "3.5.1", StoragePolicy::Ephemeral).ready();
        api.expect(Method::GET, &core("pods", "demo-0"))
            .await
            .ok(&pod.json());
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
    play(
        platform_for(client, &r),
        scenario,
        |p| async move {
            p.upgrade("demo", "demo-0", Version::new(3, 5, 2))
                .await
                .expect("upgraded");
            (p, ())
        },
        api,
    )
    .await;
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
            p.save_status(&r).await.expect("status");
            (p, (loaded, foreign))
        },
        api,
    )
    .await;
    assert_eq!(loaded.0.map(|r| r.next_index), Some(3));
    assert_eq!(loaded.1, None);
}

#[tokio::test]
async fn objects_of_an_earlier_resource_are_waited_for_not_adopted() {
    let (client, api) = mock();
    let scenario = |mut api: ApiServer| async move {
        expect_shared(&mut api, 2).await;
        let old = Seen::pod("demo-0", "3.5.1", StoragePolicy::Persistent)
            .ready()
            .owned_by("uid-0");
        api.expect(Method::GET, &core("pods", "demo-0"))
            .await
            .ok(&old.json());
        api
    };
    let err = play(
        platform(client),
        scenario,
        |p| async move {
            let e = p
                .create("demo", &config("demo-0", "3.5.1"))
                .await
                .expect_err("busy");
            (p, e)
        },
        api,
    )
    .await;
    assert!(
        err.to_string()
            .contains("pod demo-0 is not this EtcdCluster demo's"),
        "{err}"
    );
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
async fn a_service_of_the_same_name_that_is_not_ours_is_left_alone() {
    let (client, api) = mock();
    let scenario = |mut api: ApiServer| async move {
        let theirs = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "demo", "namespace": "default", "uid": "svc-1"},
            "spec": {"ports": [{"port": 80}]},
        });
        api.expect(Method::GET, &core("services", "demo"))
            .await
            .ok(&theirs);
        api
    };
    let err = play(
        platform(client),
        scenario,
        |p| async move {
            let e = p.ensure_shared("demo").await.expect_err("busy");
            (p, e)
        },
        api,
    )
    .await;
    assert_eq!(err.category(), "busy");
    assert!(
        err.to_string()
            .starts_with("service demo is not this EtcdCluster"),
        "{err}"
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
            p.register(&one, 3).expect("registered");
            p.ensure_shared("demo").await.expect("applied");
            p.ensure_shared("demo").await.expect("nothing new to apply");
            p.register(&one, 1).expect("registered");
            p.ensure_shared("demo").await.expect("applied");
            (p, ())
        },
        api,
    )
    .await;
}
