//! An operator that restarts adopts what runs: the controller creates a
//! cluster against the fake API server, the pods become ready, and a second
//! controller (a restarted operator, which cannot reach etcd here) leaves
//! every pod and claim as it is.

use std::time::Duration;

use http::Method;

use super::fake::{Seen, Target, fake};
use super::fixtures::resource;
use super::rbac::{all_ready, clusters_path, collection, stored};
use crate::crd::StoragePolicy;
use crate::platform::kube::pod::DEFAULT_IMAGE;

async fn run_for(client: kube::Client, secs: u64) {
    let opts = crate::controller::kube::Options {
        namespace: None,
        image: DEFAULT_IMAGE.into(),
        backup_image: None,
        handover: true,
        scratch: None,
        metrics: Default::default(),
        health: Default::default(),
    };
    let stop = tokio::time::sleep(Duration::from_secs(secs));
    crate::controller::kube::run(client, opts, stop)
        .await
        .expect("the controller ran");
}

fn changes_a_member(seen: &Seen) -> bool {
    let member = Target::parse(&seen.path)
        .is_some_and(|t| t.resource == "pods" || t.resource == "persistentvolumeclaims");
    let apply = seen.content_type.starts_with("application/apply-patch");
    member && (seen.method == Method::DELETE || (seen.method == Method::PATCH && apply))
}

#[tokio::test]
async fn a_restarted_operator_adopts_the_pods_and_restarts_none() {
    let (client, fake) = fake();
    let demo = resource(3, "3.5.1", StoragePolicy::Persistent);
    fake.put(clusters_path(), stored(&demo));
    run_for(client.clone(), 2).await;
    let pods = (0..3)
        .filter(|i| fake.has(&format!("{}/demo-{i}", collection("pods"))))
        .count();
    assert_eq!(pods, 3, "the first operator created the members");
    all_ready(&fake);
    let before = fake.requests().len();
    run_for(client, 3).await;
    let after = fake.requests();
    let touched: Vec<String> = after[before..]
        .iter()
        .filter(|s| changes_a_member(s))
        .map(|s| format!("{} {}", s.method, s.path))
        .collect();
    assert!(
        touched.is_empty(),
        "the restarted operator changed members: {touched:#?}"
    );
    assert!(
        after[before..]
            .iter()
            .any(|s| s.path.ends_with("/pods") && s.method == Method::GET),
        "it looked at the members"
    );
}
