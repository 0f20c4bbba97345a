//! `KubePlatform` against a mocked API server, the seed of a rebuild after
//! a quorum loss: its pod re-created on its claim with
//! `--force-new-cluster` (recorded on the claim first) in a pod that runs
//! once; the flag then ended on the claim alone, the pod going on; an
//! ended seed started again without the flag; a seed pod restarted always
//! (an older operator's) re-created without it; an emptyDir member
//! refused; the Event that reports the rebuild.

use http::Method;
use serde_json::json;

use super::api::{ApiServer, core, mock};
use super::fixtures::{Seen, config, platform, platform_for, resource};
use super::scenario::{config_of, expect_graceful_delete, expect_member_read, expect_shared, play};
use crate::crd::StoragePolicy;
use crate::member::MemberConfig;
use crate::platform::Platform;

fn args(pod: &serde_json::Value) -> Vec<String> {
    serde_json::from_value(pod["spec"]["containers"][0]["args"].clone()).expect("args")
}

/// demo-0's config, with the flag set to `on`.
fn seed(on: bool) -> MemberConfig {
    let mut c = config("demo-0", "3.5.1");
    c.force_new_cluster = on;
    c
}

/// The claim's patch that records the flag as `on`, answered with the
/// claim that records it.
async fn expect_claim_flag(api: &mut ApiServer, on: bool) -> Seen {
    let note = api
        .expect_patch("merge", &core("persistentvolumeclaims", "demo-0-data"))
        .await;
    assert_eq!(config_of(&note.body).force_new_cluster, on, "claim first");
    let claim = Seen::claim_of(&seed(on)).started();
    note.ok(&claim.json());
    claim
}

/// demo-0's new pod: on its claim, with the flag `on` and the restart
/// policy that goes with it.
async fn expect_new_pod(api: &mut ApiServer, on: bool) {
    let new = api.expect_apply(&core("pods", "demo-0")).await;
    assert_eq!(config_of(&new.body).force_new_cluster, on);
    assert_eq!(
        args(&new.body).contains(&"--force-new-cluster=true".to_string()),
        on,
        "{:?}",
        args(&new.body)
    );
    let policy = if on { "Never" } else { "Always" };
    assert_eq!(new.body["spec"]["restartPolicy"], policy, "runs once: {on}");
    assert_eq!(
        new.body["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"], "demo-0-data",
        "the same data"
    );
    new.echo();
}

#[tokio::test]
async fn the_seed_runs_once_with_force_new_cluster_in_one_pod() {
    let (client, api) = mock();
    let scenario = |mut api: ApiServer| async move {
        // The survivor's pod, restarted always, is re-created with the flag.
        let claim = Seen::claim_of(&seed(false)).started();
        let pod = Seen::pod_of(&seed(false), StoragePolicy::Persistent).ready();
        expect_member_read(&mut api, Some(&claim), &pod).await;
        expect_claim_flag(&mut api, true).await;
        expect_graceful_delete(&mut api, &pod).await;
        expect_new_pod(&mut api, true).await;
        // The seed serves: the claim drops the flag, and nothing else
        // (no delete, no new pod: the seed's pod goes on).
        let seeded = Seen::pod_of(&seed(true), StoragePolicy::Persistent).ready();
        let claim = Seen::claim_of(&seed(true)).started();
        expect_member_read(&mut api, Some(&claim), &seeded).await;
        let settled = expect_claim_flag(&mut api, false).await;
        // Asked again: nothing to do.
        expect_member_read(&mut api, Some(&settled), &seeded).await;
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
async fn an_ended_seed_is_started_again_without_the_flag() {
    let (client, api) = mock();
    let scenario = |mut api: ApiServer| async move {
        // The claim no longer asks for the flag; the seed's pod, which ran
        // with it once, has ended.
        let claim = Seen::claim_of(&seed(false)).started();
        let ended = Seen::pod_of(&seed(true), StoragePolicy::Persistent).phase("Failed");
        expect_member_read(&mut api, Some(&claim), &ended).await;
        expect_graceful_delete(&mut api, &ended).await;
        expect_shared(&mut api, 2).await;
        expect_new_pod(&mut api, false).await;
        api
    };
    play(
        platform(client),
        scenario,
        |p| async move {
            p.start("demo", "demo-0").await.expect("started");
            (p, ())
        },
        api,
    )
    .await;
}

#[tokio::test]
async fn a_seed_pod_restarted_always_is_re_created_without_the_flag() {
    let (client, api) = mock();
    let scenario = |mut api: ApiServer| async move {
        // A seed pod an older operator made: the kubelet would restart its
        // etcd with the flag, so it goes.
        let claim = Seen::claim_of(&seed(true)).started();
        let mut pod = Seen::pod_of(&seed(true), StoragePolicy::Persistent).ready();
        pod.0["spec"]["restartPolicy"] = json!("Always");
        expect_member_read(&mut api, Some(&claim), &pod).await;
        expect_claim_flag(&mut api, false).await;
        expect_graceful_delete(&mut api, &pod).await;
        expect_new_pod(&mut api, false).await;
        api
    };
    play(
        platform(client),
        scenario,
        |p| async move {
            p.end_force_new_cluster("demo", "demo-0")
                .await
                .expect("settled");
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
                    type_: crate::platform::NoticeType::Warning,
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
                        type_: crate::platform::NoticeType::Warning,
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
