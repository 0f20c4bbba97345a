//! Backups of a cluster whose clients use TLS, on Kubernetes, for real: a
//! real etcd member serving clients over TLS only (client certificates
//! required) behind the fake API server; the backup Job, the restore
//! check's Job and the continuous-backup follower mount the cluster's
//! client certificate Secret (`CLUSTER-client-tls`, as the operator
//! makes it) and reach the member with it.

use std::time::{Duration, Instant};

use serde_json::json;

use super::continuous::{spec, wait_chain};
use super::etcd_pods::EtcdPods;
use super::fixtures::resource_from;
use super::kubelet::DEPLOYMENTS;
use super::rbac::collection;
use crate::backup::proof::Verdict;
use crate::backup::{BackupStore, Location, Source};
use crate::platform::Platform;
use crate::platform::kube::follow::follower_name;
use crate::platform::kube::tls::client_secret;
use crate::platform::tls_store::ClientFiles;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_and_the_follower_reach_a_tls_cluster_with_its_client_certificate() {
    let etcd = EtcdPods::start_tls("kube-tls-backups", "3.5.1", 1).await;
    let tls = etcd.tls.clone().expect("TLS");
    let options = etcd_client::ConnectOptions::new().with_tls(tls.options());
    let mut kv = etcd_client::Client::connect([etcd.url(0)], Some(options))
        .await
        .expect("a TLS client");
    for i in 0..5 {
        kv.put(format!("k{i}"), "v", None).await.expect("a write");
    }
    let mut on = spec(true);
    on["tls"] = json!({"client": {"mode": "Auto"}});
    let r = resource_from(on);
    let files = ClientFiles {
        ca: tls.ca.clone(),
        cert_key: tls.cert_key.clone(),
    };
    let owner = kube::Resource::controller_owner_ref(&r, &()).expect("an owner");
    let secret = serde_json::to_value(client_secret("demo", &files, &owner)).expect("a Secret");
    let (platform, fake, kubelet) = etcd
        .backup_platform_with(&r, |fake| fake.put(&collection("secrets"), secret))
        .await;
    let location = Location::of("demo", None);
    let store = platform.backups();
    let live = Source {
        member: "demo-0",
        url: &etcd.configs[0].addr.client_url,
        tls: Some(&tls),
    };
    let saved = store
        .save(&location, live)
        .await
        .expect("a backup over TLS");
    assert!(saved.revision >= 6, "{saved:?}");

    // The Job mounted the Secret and was told where.
    let save = kubelet.job("demo-save-").expect("the save Job");
    let pod = &save["spec"]["template"]["spec"];
    let volume = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == "client-tls");
    assert_eq!(
        volume.map(|v| &v["secret"]["secretName"]),
        Some(&json!("demo-client-tls"))
    );
    let args = pod["containers"][0]["args"].to_string();
    assert!(args.contains(r#""--tls-dir","/tls""#), "{args}");

    // The restore check's Job reaches the live member the same way.
    let check = store
        .restore_check(&location, &saved, live)
        .await
        .expect("the check ran");
    assert_eq!(check.result, Verdict::Verified, "{check:?}");

    // The follower follows the client Service over https with it.
    let d = fake
        .get(&format!("{DEPLOYMENTS}/{}", follower_name("demo")))
        .expect("the follower");
    let args = d["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(
        args.contains("https://demo-client.default.svc:2379"),
        "{args}"
    );
    assert!(args.contains(r#""--tls-dir","/tls""#), "{args}");
    let mut last = 0;
    for i in 0..10 {
        let r = kv
            .put(format!("after-{i}"), "v", None)
            .await
            .expect("a write");
        last = r.header().map_or(last, |h| h.revision());
    }
    let since = Instant::now();
    let chain = wait_chain(&kubelet, &saved, last).await;
    assert!(!chain.segments.is_empty() && since.elapsed() < Duration::from_secs(60));
    drop(kubelet);
    drop(etcd);
}
