//! The whole rebuild from a backup on Kubernetes, against the fake API
//! server with the stand-in kubelet running the Jobs for real: a cluster
//! with `spec.recovery.restoreFromBackup` (and `fromSurvivor: false`) and a
//! verified backup in its backup claim loses two of its three members for
//! good (pods and claims gone) while the third runs silent; the operator
//! rebuilds from the backup: the old claim is labelled retired and kept,
//! the old pod deleted, each new member's claim restored by a restore Job
//! of the etcd image before its pod is created, and status and a Warning
//! Event say what was lost. With continuous backups (the follower
//! Deployment writing delta segments into the claim), the Job that sets
//! the backup aside replays them, and nothing written is lost.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::chain_restore::snapshot_revision;
use super::continuous::{wait_chain, write};
use super::etcd_pods::EtcdPods;
use super::fake::Fake;
use super::fixtures::{Seen, config, resource_from};
use super::rbac::collection;
use super::trouble::{formed, put_record_of, resource_path};
use crate::backup::{BackupStore, Location, Source};
use crate::controller::Cluster;
use crate::controller::kube::spec_state;
use crate::crd::{LABEL_CLUSTER, StoragePolicy};
use crate::etcd::Clients;
use crate::member::MemberConfig;
use crate::plan::Step;
use crate::platform::Platform;
use crate::platform::kube::jobs::{BACKUPS_MOUNT, LABEL_JOB};
use crate::platform::kube::objects::{LABEL_RETIRED, claim_name};
use crate::platform::kube::pod::{DATA_MOUNT, DEFAULT_IMAGE};
use crate::platform::kube::restore::ANNOTATION_RESTORED;
use crate::testing::free_loopback;

/// Revisions the old cluster wrote after its backup.
const AFTER_BACKUP: i64 = 7;

fn spec(continuous: bool) -> Value {
    let mut spec = json!({
        "size": 3, "version": "3.5.1", "storage": {"policy": "Persistent"},
        "backup": {"interval": "1h", "maxBackups": 3},
        "recovery": {"restoreFromBackup": true, "fromSurvivor": false},
    });
    if continuous {
        spec["backup"]["continuous"] = json!({"segmentInterval": "200ms"});
    }
    spec
}

/// The member pods in the store (not the Jobs' pods, nor the follower's),
/// by name.
fn member_pods(fake: &Fake) -> BTreeMap<String, Value> {
    fake.all(&format!("{}/", collection("pods")))
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| p["metadata"]["labels"][LABEL_CLUSTER] == "demo")
        .filter(|p| p["metadata"]["labels"][LABEL_JOB].is_null())
        .map(|p| (p["metadata"]["name"].as_str().unwrap_or("").to_string(), p))
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    serde_json::from_value(v.clone()).unwrap_or_default()
}

/// The value after `flag` (or in `flag=value`) in `args`.
fn flag(args: &[String], flag: &str) -> Option<String> {
    let eq = format!("{flag}=");
    args.iter().enumerate().find_map(|(i, a)| {
        if a == flag {
            args.get(i + 1).cloned()
        } else {
            a.strip_prefix(&eq).map(str::to_string)
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_lost_for_good_is_rebuilt_from_the_newest_backup() {
    rebuild(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_with_continuous_backups_replays_the_chain_and_loses_nothing() {
    rebuild(true).await;
}

/// The loss and the rebuild; `continuous`: with continuous backups.
async fn rebuild(continuous: bool) {
    // The cluster's data as it was at the backup: one real member.
    // Each variant on its own addresses: they run side by side.
    let seed = if continuous {
        "kube-rebuild-chain"
    } else {
        "kube-rebuild"
    };
    let etcd = EtcdPods::start(seed, "3.5.1", 1).await;
    let mut kv = etcd_client::Client::connect([etcd.url(0)], None)
        .await
        .expect("a client");
    kv.put("kept", "before-the-backup", None)
        .await
        .expect("a write");
    let r = resource_from(spec(continuous));
    // Registers the cluster, and applies the follower it asks for.
    let (platform, fake, kubelet) = etcd.backup_platform(&r).await;
    // The spec names no location: the default claim, as the controller uses.
    let location = Location::of("demo", None);
    let source = Source {
        member: "demo-0",
        url: &etcd.configs[0].addr.client_url,
        tls: None,
    };
    let saved = platform
        .backups()
        .save(&location, source)
        .await
        .expect("a verified backup");
    // Then writes, one revision each; with continuous backups they reach
    // the claim as delta segments before the loss.
    let last = write(&mut kv, "after", usize::try_from(AFTER_BACKUP).unwrap_or(0)).await;
    assert_eq!(last, saved.revision + AFTER_BACKUP);
    if continuous {
        wait_chain(&kubelet, &saved, last).await;
    }
    // What the rebuilt members hold: every write with continuous backups,
    // else the backup alone.
    let lost = if continuous { 0 } else { AFTER_BACKUP };
    let reached = last - lost;
    drop(kv);
    drop(etcd);

    // Then the loss: demo-1 and demo-2 are gone with their claims; demo-0's
    // pod runs but its etcd answers nothing; the record says the cluster
    // formed with the three and saw revisions past the backup.
    let old: Vec<MemberConfig> = (0..3)
        .map(|i| config(&format!("demo-{i}"), "3.5.1"))
        .collect();
    let mut record = formed(&r, old.iter().map(|c| c.addr.clone()).collect());
    record.last_revision = saved.revision + AFTER_BACKUP;
    put_record_of(&fake, &r, record);
    let silent = free_loopback(&format!("{seed}/silent"), &HashSet::new());
    fake.put(
        &collection("persistentvolumeclaims"),
        Seen::claim_of(&old[0]).started().json(),
    );
    let pod = Seen::pod_of(&old[0], StoragePolicy::Persistent)
        .ready()
        .runs("3.5.1")
        .started()
        .ip(&silent.to_string());
    fake.put(&collection("pods"), pod.json());

    let platform = Arc::new(platform);
    let clients = Arc::new(Clients::new(Duration::from_millis(300)));
    let mut cluster = Cluster::new("demo", platform.clone(), clients, spec_state(&r))
        .await
        .expect("the cluster");
    // Bounded: a pass per step, each bounded by its timeouts.
    let mut steps = Vec::new();
    for _ in 0..12 {
        let out = cluster.reconcile().await;
        steps.push(out.step);
        let pods = member_pods(&fake);
        if pods.len() == 3 && !pods.contains_key("demo-0") {
            break;
        }
    }
    assert!(
        steps.contains(&Some(Step::RestoreFromBackup)),
        "the operator rebuilds from the backup: {steps:?}"
    );
    assert!(
        !steps
            .iter()
            .any(|s| matches!(s, Some(Step::RebuildFromSurvivor { .. }))),
        "fromSurvivor is off: {steps:?}"
    );

    // The old data is kept aside, not deleted; its pod is gone.
    let old_claim = fake
        .get(&format!(
            "{}/{}",
            collection("persistentvolumeclaims"),
            claim_name("demo-0")
        ))
        .expect("the old claim is kept");
    let labels = &old_claim["metadata"]["labels"];
    assert!(labels[LABEL_RETIRED].is_string(), "{old_claim:#}");
    assert!(
        labels.get(LABEL_CLUSTER).is_none_or(Value::is_null),
        "no longer the cluster's: {old_claim:#}"
    );

    // New members on new claims, each restored by a Job before its pod.
    let pods = member_pods(&fake);
    let new: Vec<&String> = pods.keys().collect();
    assert_eq!(new.len(), 3, "{new:?}");
    assert!(!pods.contains_key("demo-0"), "the old pod is deleted");
    let restores: Vec<Value> = kubelet
        .jobs()
        .into_iter()
        .filter(|j| j["metadata"]["labels"][LABEL_JOB] == "restore")
        .collect();
    assert_eq!(restores.len(), 3, "one restore Job per member");
    let backup_claim = location
        .claim
        .clone()
        .unwrap_or_else(|| "demo-backups".into());
    for (name, pod) in &pods {
        let claim = claim_name(name);
        assert_ne!(claim, claim_name("demo-0"), "a new claim");
        assert_eq!(
            pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"], claim,
            "{name} runs on its own new claim"
        );
        let stored = fake
            .get(&format!("{}/{claim}", collection("persistentvolumeclaims")))
            .expect("the new claim");
        assert!(
            stored["metadata"]["annotations"][ANNOTATION_RESTORED].is_string(),
            "{stored:#}"
        );
        let data = kubelet.claim(&claim).join("data/member/snap/db");
        assert!(data.is_file(), "restored: {}", data.display());
        assert_eq!(snapshot_revision(&data), reached, "{name}'s data");

        let job = restores
            .iter()
            .find(|j| {
                let volumes = j["spec"]["template"]["spec"]["volumes"].as_array();
                volumes.into_iter().flatten().any(|v| {
                    v["name"] == "data" && v["persistentVolumeClaim"]["claimName"] == claim
                })
            })
            .unwrap_or_else(|| panic!("no restore Job for {claim}: {restores:#?}"));
        let spec = &job["spec"]["template"]["spec"];
        let c = &spec["containers"][0];
        assert_eq!(
            c["image"],
            format!("{DEFAULT_IMAGE}:v3.5.1"),
            "the etcd image"
        );
        let volumes = spec["volumes"].as_array().expect("volumes");
        let backups = volumes
            .iter()
            .find(|v| v["name"] == "backups")
            .expect("backups");
        assert_eq!(backups["persistentVolumeClaim"]["claimName"], backup_claim);
        assert_eq!(backups["persistentVolumeClaim"]["readOnly"], true);
        let mounts = c["volumeMounts"].as_array().expect("mounts");
        let mount = |v: &str| mounts.iter().find(|m| m["name"] == v).cloned();
        assert_eq!(
            mount("backups").expect("backups")["mountPath"],
            BACKUPS_MOUNT
        );
        assert_eq!(mount("data").expect("data")["mountPath"], DATA_MOUNT);
        // Its own DNS name resolves before its pod exists (etcdutl checks
        // the peer URL against --initial-cluster).
        assert_eq!(
            spec["hostAliases"][0]["hostnames"][0],
            format!("{name}.demo.default.svc"),
            "{spec:#}"
        );
        let command = strings(&c["command"]);
        assert!(command[0].ends_with("etcdutl"), "{command:?}");
        assert_eq!(command[1..3], ["snapshot", "restore"], "{command:?}");
        assert!(command[3].starts_with(BACKUPS_MOUNT), "{command:?}");
        assert_eq!(flag(&command, "--name").as_deref(), Some(name.as_str()));
        let data_dir = flag(&command, "--data-dir").expect("--data-dir");
        assert!(data_dir.starts_with(DATA_MOUNT), "{command:?}");
        let initial = flag(&command, "--initial-cluster").expect("--initial-cluster");
        for other in &new {
            assert!(initial.contains(&format!("{other}=")), "{initial}");
        }
    }

    // What was lost, in status and in a Warning Event.
    let status = fake.get(&resource_path()).expect("the resource")["status"].clone();
    let recovery = &status["lastRecovery"];
    assert_eq!(recovery["source"], "Backup", "{status:#}");
    assert_eq!(recovery["backup"], saved.name.as_str());
    assert_eq!(recovery["backupRevision"], saved.revision);
    assert_eq!(recovery["lastSeenRevision"], last);
    assert_eq!(recovery["lostRevisions"], lost, "{recovery:#}");
    assert_eq!(recovery["replayedRevision"], reached, "{recovery:#}");
    assert_eq!(recovery["seedRevision"], reached, "{recovery:#}");
    let segments = recovery["replayedSegments"].as_i64().unwrap_or(-1);
    assert_eq!(segments > 0, continuous, "{recovery:#}");
    assert!(recovery.get("replayProblem").is_none_or(Value::is_null));
    assert!(
        recovery["oldData"]
            .as_str()
            .is_some_and(|d| d.contains(LABEL_RETIRED)),
        "{recovery:#}"
    );
    let events = fake.all("/apis/events.k8s.io/v1/namespaces/default/events/");
    let event = events
        .iter()
        .map(|(_, e)| e)
        .find(|e| e["reason"] == "RestoredFromBackup")
        .unwrap_or_else(|| panic!("no RestoredFromBackup event: {events:#?}"));
    assert_eq!(event["type"], "Warning");
    assert!(
        event["note"].as_str().is_some_and(
            |n| n.contains(&saved.name) && n.contains(&format!("up to {lost} revisions"))
        ),
        "{event:#}"
    );
    drop(cluster);
    drop(kubelet);
}
