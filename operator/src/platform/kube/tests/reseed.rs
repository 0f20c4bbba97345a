//! `KubePlatform` against a mocked API server, the seed of a rebuild after
//! a quorum loss: its pod re-created on its claim with
//! `--force-new-cluster` (recorded on the claim first), then without it;
//! an emptyDir member refused; the Event that reports the rebuild.

use http::Method;

use super::api::{ApiServer, core, mock};
use super::fixtures::{Seen, config, platform, platform_for, resource};
use super::scenario::{config_of, expect_graceful_delete, expect_member_read, play};
use crate::crd::StoragePolicy;
use crate::platform::Platform;

fn args(pod: &serde_json::Value) -> Vec<String> {
    serde_json::from_value(pod["spec"]["containers"][0]["args"].clone()).expect("args")
}

/// The requests of re-creating demo-0's pod with the flag set to `on`,
/// from a claim and a running pod that record `before`.
async fn expect_recreated(api: &mut ApiServer, before: bool, on: bool) {
    let mut recorded = config("demo-0", "3.5.1");
    recorded.force_new_cluster = before;
    let claim = Seen::claim_of(&recorded).started();
    let pod = Seen::pod_of(&recorded, StoragePolicy::Persistent).ready();
    expect_member_read(api, Some(&claim), &pod).await;
    let note = api
        .expect_patch("merge", &core("persistentvolumeclaims", "demo-0-data"))
        .await;
    assert_eq!(config_of(&note.body).force_new_cluster, on, "claim first");
    note.ok(&claim.json());
    expect_graceful_delete(api, &pod).await;
    let new = api.expect_apply(&core("pods", "demo-0")).await;
    assert_eq!(config_of(&new.body).force_new_cluster, on);
    assert_eq!(
        args(&new.body).contains(&"--force-new-cluster=true".to_string()),
        on,
        "{:?}",
        args(&new.body)
    );
    assert_eq!(
        new.body["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"], "demo-0-data",
        "the same data"
    );
    new.echo();
}

#[tokio::test]
async fn the_seed_runs_once_with_force_new_cluster_then_without_it() {
    let (client, api) = mock();
    let scenario = |mut api: ApiServer| async move {
        expect_recreated(&mut api, false, true).await;
        expect_recreated(&mut api, true, false).await;
        // Asked again once settled: the pod already runs without the flag.
        let plain = config("demo-0", "3.5.1");
        let claim = Seen::claim_of(&plain).started();
        let pod = Seen::pod_of(&plain, StoragePolicy::Persistent).ready();
        expect_member_read(&mut api, Some(&claim), &pod).await;
        api
    };
    play(
        platform(client),
        scenario,
        |p| async move {
            p.force_new_cluster("demo", "demo-0").await.expect("seeded");
            p.end_force_new_cluster("demo", "demo-0")
                .await
                .expect("settled");
            p.end_force_new_cluster("demo", "demo-0")
                .await
                .expect("nothing to do");
            (p, ())
        },
        api,
    )
    .await;
}

#[tokio::test]
async fn a_member_without_a_claim_cannot_seed_a_rebuild() {
    let (client, api) = mock();
    let scenario = |mut api: ApiServer| async move {
        api.expect(Method::GET, &core("persistentvolumeclaims", "demo-0-data"))
            .await
            .not_found();
        api
    };
    let eph = resource(3, "3.5.1", StoragePolicy::Ephemeral);
    let err = play(
        platform_for(client, &eph),
        scenario,
        |p| async move {
            let e = p
                .force_new_cluster("demo", "demo-0")
                .await
                .expect_err("refused");
            (p, e)
        },
        api,
    )
    .await;
    assert_eq!(err.category(), "unsupported");
    assert!(err.to_string().contains("no volume claim"), "{err}");
}

#[tokio::test]
async fn a_rebuild_is_reported_as_a_warning_event_on_the_resource() {
    let (client, api) = mock();
    let scenario = |mut api: ApiServer| async move {
        let event = api
            .expect(
                Method::POST,
                "/apis/events.k8s.io/v1/namespaces/default/events",
            )
            .await;
        let body = event.body.clone();
        assert_eq!(body["type"], "Warning");
        assert_eq!(body["reason"], "RebuiltFromSurvivor");
        assert_eq!(body["regarding"]["kind"], "EtcdCluster");
        assert_eq!(body["regarding"]["name"], "demo");
        assert_eq!(body["regarding"]["uid"], "uid-1");
        assert!(
            body["note"].as_str().is_some_and(|n| n.contains("demo-0")),
            "{body}"
        );
        event.echo();
        api
    };
    play(
        platform(client),
        scenario,
        |p| async move {
            p.announce(
                "demo",
                &crate::platform::Notice {
                    reason: "RebuiltFromSurvivor",
                    message: "rebuilt from demo-0".into(),
                },
            )
            .await;
            (p, ())
        },
        api,
    )
    .await;
}

#[tokio::test]
async fn two_recoveries_are_two_events_each_with_its_own_words() {
    let (client, api) = mock();
    let scenario = |mut api: ApiServer| async move {
        for words in ["610 revisions lost", "0 revisions lost"] {
            let event = api
                .expect(
                    Method::POST,
                    "/apis/events.k8s.io/v1/namespaces/default/events",
                )
                .await;
            let body = event.body.clone();
            assert_eq!(body["reason"], "RestoredFromBackup");
            assert!(
                body["note"].as_str().is_some_and(|n| n.contains(words)),
                "{body}"
            );
            assert!(
                body["series"].is_null(),
                "a new Event, not a series: {body}"
            );
            event.echo();
        }
        api
    };
    play(
        platform(client),
        scenario,
        |p| async move {
            for words in ["610 revisions lost", "0 revisions lost"] {
                p.announce(
                    "demo",
                    &crate::platform::Notice {
                        reason: "RestoredFromBackup",
                        message: format!("rebuilt from a backup: {words}"),
                    },
                )
                .await;
            }
            (p, ())
        },
        api,
    )
    .await;
}
