//! One `Cluster<KubePlatform>` pass for a new cluster against the mocked
//! API server: no member runs yet, so etcd is never asked, and the pass
//! bootstraps every member.

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use serde_json::Value;

use super::api::{ApiServer, core, core_list, list, mock};
use super::fixtures::{platform_for, resource};
use crate::controller::Cluster;
use crate::controller::kube::spec_state;
use crate::crd::StoragePolicy;
use crate::etcd::Clients;
use crate::plan::Step;
use crate::platform::ClusterRecord;

fn record_of(cm: &Value) -> ClusterRecord {
    let json = cm["data"]["record.json"].as_str().expect("record json");
    serde_json::from_str(json).expect("a record")
}

async fn scenario(mut api: ApiServer) -> ApiServer {
    // Cluster::new hands the platform the resource first (Platform::prepare):
    // its spec is valid and not paused, so the Services and the budget are
    // applied before anything else, as the controller did before it took
    // the cluster over; the members' creates find them applied.
    let pdb = "/apis/policy/v1/namespaces/default/poddisruptionbudgets/demo";
    let shared = [
        core("services", "demo"),
        core("services", "demo-client"),
        pdb.into(),
    ];
    for path in &shared {
        api.expect(Method::GET, path).await.not_found();
    }
    for path in &shared {
        api.expect_apply(path).await.echo();
    }
    let cm = core("configmaps", "demo-etcd-operator");
    // Then no record yet; the new spec is saved (generation 1).
    api.expect(Method::GET, &cm).await.not_found();
    let first = api.expect_apply(&cm).await;
    assert_eq!(record_of(&first.body).generation, 1);
    first.echo();
    // Observe: nothing on the platform.
    api.expect(Method::GET, &core_list("pods"))
        .await
        .ok(&list("PodList", vec![]));
    let claims = list("PersistentVolumeClaimList", vec![]);
    api.expect(Method::GET, &core_list("persistentvolumeclaims"))
        .await
        .ok(&claims);
    // The status says what is about to happen.
    let path = "/apis/etcdoperator.dev/v1alpha1/namespaces/default/etcdclusters/demo/status";
    let status = api.expect_apply(path).await;
    assert_eq!(status.body["status"]["phase"], "Creating");
    status.echo();
    // Bootstrap: names, URLs and token are recorded before anything starts.
    let planned = api.expect_apply(&cm).await;
    let record = record_of(&planned.body);
    planned.echo();
    let names: Vec<&str> = record.initial.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["demo-0", "demo-1", "demo-2"]);
    assert_eq!(
        record.initial[2].peer_url,
        "http://demo-2.demo.default.svc:2380"
    );
    let initial_cluster = "demo-0=http://demo-0.demo.default.svc:2380,\
                           demo-1=http://demo-1.demo.default.svc:2380,\
                           demo-2=http://demo-2.demo.default.svc:2380";
    for member in names {
        let claim = format!("{member}-data");
        api.expect(Method::GET, &core("pods", member))
            .await
            .not_found();
        api.expect(Method::GET, &core("persistentvolumeclaims", &claim))
            .await
            .not_found();
        api.expect_apply(&core("persistentvolumeclaims", &claim))
            .await
            .echo();
        let pod = api.expect_apply(&core("pods", member)).await;
        let args = pod.body["spec"]["containers"][0]["args"].clone();
        let args: Vec<String> = serde_json::from_value(args).expect("args");
        let flag = |f: &str| {
            args.iter()
                .position(|a| a == f)
                .map(|i| args[i + 1].clone())
        };
        assert_eq!(flag("--initial-cluster").as_deref(), Some(initial_cluster));
        assert_eq!(flag("--initial-cluster-state").as_deref(), Some("new"));
        assert_eq!(flag("--initial-cluster-token"), Some(record.token.clone()));
        pod.echo();
    }
    // The step begun, as a Normal Event on the resource.
    let event = api
        .expect(
            Method::POST,
            "/apis/events.k8s.io/v1/namespaces/default/events",
        )
        .await;
    assert_eq!(event.body["type"], "Normal");
    assert_eq!(event.body["reason"], "Creating");
    assert_eq!(event.body["regarding"]["name"], "demo");
    event.echo();
    api
}

#[tokio::test]
async fn a_new_cluster_is_bootstrapped_in_one_pass() {
    let (client, api) = mock();
    let r = resource(3, "3.5.1", StoragePolicy::Persistent);
    let platform = Arc::new(platform_for(client, &r));
    let server = tokio::spawn(scenario(api));
    let clients = Arc::new(Clients::new(Duration::from_millis(200)));
    let mut cluster = Cluster::new("demo", platform.clone(), clients, spec_state(&r))
        .await
        .expect("the cluster");
    let out = cluster.reconcile().await;
    assert_eq!(out.step, Some(Step::Bootstrap));
    assert_eq!(
        out.next,
        Duration::ZERO,
        "comes back at once to watch the members start"
    );
    drop(cluster);
    drop(platform);
    let api = server.await.expect("the scenario passed");
    api.done().await;
}
