//! `KubePlatform` against a mocked API server, members: the exact requests
//! of creating, looking at, re-creating and deleting them, in order, and
//! nothing else.

use http::Method;
use serde_json::json;

use super::api::{ApiServer, core, core_list, list, mock};
use super::fixtures::{Seen, config, platform, resource};
use super::scenario::{assert_owned, config_of, expect_new_member, expect_shared, play};
use crate::crd::StoragePolicy;
use crate::platform::Platform;

#[tokio::test]
async fn creating_a_new_cluster_applies_services_claims_and_pods() {
    let (client, api) = mock();
    let scenario = |mut api: ApiServer| async move {
        expect_shared(&mut api, 2).await;
        for member in ["demo-0", "demo-1"] {
            let (claim, pod) = expect_new_member(&mut api, member).await;
            assert_owned(&claim);
            assert_owned(&pod);
            assert_eq!(config_of(&claim), config(member, "3.5.1"));
            assert_eq!(config_of(&pod), config(member, "3.5.1"));
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
                p.create("demo", &config(member, "3.5.1"), None)
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
        assert_eq!(config_of(&pod.body), config("demo-0", "3.5.1"));
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
async fn an_ephemeral_member_is_not_restored_from_a_snapshot() {
    let (client, api) = mock();
    let r = super::fixtures::resource(3, "3.5.1", crate::crd::StoragePolicy::Ephemeral);
    let err = play(
        super::fixtures::platform_for(client, &r),
        |api: ApiServer| async move { api },
        |p| async move {
            let snapshot = crate::backup::RestoreSource::new(
                "persistentvolumeclaims/demo-backups/clusters/demo/restore.db",
            );
            let config = config("demo-0", "3.5.1");
            let e = p.create("demo", &config, Some(&snapshot)).await;
            (p, e.expect_err("unsupported"))
        },
        api,
    )
    .await;
    assert_eq!(err.category(), "unsupported");
    assert!(
        err.to_string()
            .contains("needs storage.policy Persistent on Kubernetes"),
        "{err}"
    );
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
        // Its TLS Secret, if it had one.
        api.expect(Method::DELETE, &core("secrets", "demo-2-tls"))
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
                .create("demo", &config("demo-0", "3.5.1"), None)
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
            let demo = resource(3, "3.5.1", StoragePolicy::Persistent);
            let e = p.prepare("demo", &demo, 0, true).await.expect_err("busy");
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
