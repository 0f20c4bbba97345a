//! Helpers of the mocked-API scenarios: run a call while the server
//! plays, and the requests every member creation makes.

use std::future::Future;

use http::Method;
use serde_json::Value;

use super::api::{ApiServer, Call, core, core_list, list};
use super::fixtures::{Seen, UID};
use crate::member::MemberConfig;
use crate::platform::kube::KubePlatform;

/// Runs `call` on a platform while `scenario` plays the server, then
/// checks that nothing else was asked.
pub async fn play<S, F, T>(
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

pub fn config_of(object: &Value) -> MemberConfig {
    let json = object["metadata"]["annotations"]["etcdoperator.dev/member-config"]
        .as_str()
        .expect("config annotation");
    serde_json::from_str(json).expect("config json")
}

pub fn assert_owned(object: &Value) {
    let owner = &object["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["uid"].as_str()),
        (Some("EtcdCluster"), Some(UID))
    );
}

/// The Services and the budget, applied before the first member.
pub async fn expect_shared(api: &mut ApiServer, min_available: i64) {
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

pub async fn expect_new_member(api: &mut ApiServer, member: &str) -> (Value, Value) {
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

/// The reads of a member before a change: its claim (`None`: not found),
/// then its pod.
pub async fn expect_member_read(api: &mut ApiServer, claim: Option<&Seen>, pod: &Seen) {
    let name = pod.json()["metadata"]["name"]
        .as_str()
        .expect("a pod name")
        .to_string();
    let get = api
        .expect(
            Method::GET,
            &core("persistentvolumeclaims", &format!("{name}-data")),
        )
        .await;
    match claim {
        Some(c) => get.ok(&c.json()),
        None => get.not_found(),
    }
    api.expect(Method::GET, &core("pods", &name))
        .await
        .ok(&pod.json());
}

/// A graceful delete of `pod` (no grace period given, its uid as the
/// precondition), answered as terminating, then the read that finds it
/// gone.
pub async fn expect_graceful_delete(api: &mut ApiServer, pod: &Seen) {
    let name = pod.json()["metadata"]["name"]
        .as_str()
        .expect("a pod name")
        .to_string();
    let delete = api.expect(Method::DELETE, &core("pods", &name)).await;
    assert_eq!(delete.body["preconditions"]["uid"], format!("pod-{name}"));
    assert!(delete.body.get("gracePeriodSeconds").is_none(), "graceful");
    delete.ok(&pod.clone().terminating().json());
    expect_watched_gone(api, &name).await;
}

/// A deleted pod `name` is waited for on a watch of that pod (here its
/// first list, which finds it gone), not on a series of gets.
pub async fn expect_watched_gone(api: &mut ApiServer, name: &str) {
    let watch = api.expect(Method::GET, &core_list("pods")).await;
    let by_name = format!("metadata.name%3D{name}");
    assert_eq!(watch.query.get("fieldSelector"), Some(&by_name), "that pod");
    watch.ok(&list("PodList", vec![]));
}
