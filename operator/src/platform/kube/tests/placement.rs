//! `spec.pod`, `spec.image` and `spec.storage` reach what the platform
//! builds, and a spec without them builds what the operator built before
//! them (the golden objects in `golden/`, written by the builders as they
//! were before issue 38): an operator upgrade restarts nothing.

use serde_json::{Value, json};

use super::fixtures::{Seen, config, resource_from};
use crate::controller::SpecState;
use crate::controller::kube::spec_state;
use crate::crd::{MemberPodSpec, StoragePolicy};
use crate::member::{MemberConfig, PodSettings};
use crate::plan::Desired;
use crate::platform::kube::config;
use crate::platform::kube::image_check::image_check_job;
use crate::platform::kube::jobs::restore_job;
use crate::platform::kube::objects::{ClaimWanted, data_claim};
use crate::platform::kube::pod::DEFAULT_IMAGE;
use crate::version::Version;

fn golden(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/platform/kube/tests/golden")
        .join(name);
    let text = std::fs::read_to_string(&path).expect("a golden object");
    serde_json::from_str(&text).expect("JSON")
}

fn owner() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
    use kube::Resource;
    let r = resource_from(json!({"size": 3, "version": "3.5.1"}));
    r.controller_owner_ref(&()).expect("owner")
}

/// The pod settings of a production cluster.
fn production() -> MemberPodSpec {
    serde_json::from_value(json!({
        "resources": {
            "requests": {"cpu": "2", "memory": "8Gi"},
            "limits": {"memory": "16Gi"}
        },
        "nodeSelector": {"node-role.example.com/etcd": "true"},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "etcd", "effect": "NoSchedule"}
        ],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "disk", "operator": "In", "values": ["ssd"]}
            ]}]
        }}},
        "topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule"
        }],
        "priorityClassName": "etcd-critical",
        "labels": {"team": "platform"},
        "annotations": {"example.com/owner": "platform team"},
        "imagePullSecrets": [{"name": "mirror-pull"}],
        "securityContext": {"fsGroup": 2000}
    }))
    .expect("pod settings")
}

fn placed(name: &str) -> MemberConfig {
    let mut c = config(name, "3.5.1");
    c.pod = PodSettings {
        repository: Some("mirror.example.com/etcd".into()),
        template: Some(Box::new(production())),
    };
    c
}

#[test]
fn a_spec_without_the_new_fields_builds_the_objects_built_before() {
    let claim = Seen::claim_of(&config("demo-1", "3.5.1")).json();
    assert_eq!(claim, golden("claim.json"), "the claim is unchanged");
    for (file, storage, member, version) in [
        (
            "pod-persistent.json",
            StoragePolicy::Persistent,
            "demo-1",
            "3.5.1",
        ),
        (
            "pod-ephemeral.json",
            StoragePolicy::Ephemeral,
            "demo-2",
            "3.4.23",
        ),
    ] {
        let mut pod = Seen::pod(member, version, storage).json();
        // The one addition: members prefer spreading across zones, then
        // nodes, a scheduling preference read only when a pod is created;
        // running pods are never re-created for it (the test below: the
        // settings their records say are the ones the spec asks for).
        let spread = pod["spec"]
            .as_object_mut()
            .and_then(|s| s.remove("topologySpreadConstraints"));
        let preference = |key: &str| {
            json!({
                "labelSelector": {"matchLabels": {
                    "app.kubernetes.io/name": "etcd", "etcdoperator.dev/cluster": "demo",
                }},
                "maxSkew": 1,
                "topologyKey": key,
                "whenUnsatisfiable": "ScheduleAnyway",
            })
        };
        assert_eq!(
            spread,
            Some(json!([
                preference("topology.kubernetes.io/zone"),
                preference("kubernetes.io/hostname"),
            ]))
        );
        assert_eq!(pod, golden(file), "{file}: everything else is as it was");
    }
}

/// What pods and claims written before `spec.pod` record is what a spec
/// without the new fields asks for: the plan has nothing to roll.
#[test]
fn members_recorded_before_the_new_fields_need_no_restart() {
    let r = resource_from(json!({"size": 3, "version": "3.5.1"}));
    let SpecState::Valid { spec, .. } = spec_state(&r) else {
        panic!("a valid spec");
    };
    let wanted = Desired::from(&*spec).settings();
    for (file, at) in [
        ("pod-persistent.json", "/metadata/annotations"),
        ("claim.json", "/metadata/annotations"),
    ] {
        let object = golden(file);
        let annotations = object
            .pointer(at)
            .cloned()
            .and_then(|a| serde_json::from_value(a).ok());
        let recorded = config::read(file, annotations.as_ref())
            .expect("readable")
            .expect("a recorded config");
        assert_eq!(recorded.settings(), wanted, "{file}");
        assert!(recorded.settings().changed(&wanted).is_empty());
        // Written back, the record is the same text: no field appears.
        let json = object.pointer(&format!("{at}/etcdoperator.dev~1member-config"));
        assert_eq!(json, Some(&json!(config::to_json(&recorded))), "{file}");
    }
}

#[test]
fn each_pod_setting_reaches_the_member_pod() {
    let pod = Seen::pod_of(&placed("demo-1"), StoragePolicy::Persistent).json();
    let spec = &pod["spec"];
    let etcd = &spec["containers"][0];
    assert_eq!(etcd["image"], "mirror.example.com/etcd:v3.5.1");
    assert_eq!(
        etcd["resources"],
        json!({"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "16Gi"}})
    );
    assert_eq!(
        spec["nodeSelector"],
        json!({"node-role.example.com/etcd": "true"})
    );
    assert_eq!(spec["tolerations"][0]["key"], "dedicated");
    assert_eq!(spec["priorityClassName"], "etcd-critical");
    assert_eq!(spec["imagePullSecrets"], json!([{"name": "mirror-pull"}]));
    // The user's node affinity, beside the default anti-affinity (kept
    // as the user gave none).
    let affinity = &spec["affinity"];
    assert_eq!(
        affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"][0]["key"],
        "disk"
    );
    assert!(affinity["podAntiAffinity"].is_object(), "{affinity:#}");
    // The user's spread replaces the default, selecting the members.
    let spread = &spec["topologySpreadConstraints"];
    assert_eq!(spread.as_array().map(Vec::len), Some(1));
    assert_eq!(spread[0]["whenUnsatisfiable"], "DoNotSchedule");
    assert_eq!(
        spread[0]["labelSelector"]["matchLabels"]["etcdoperator.dev/cluster"],
        "demo"
    );
    // The volume's group is the user's; the rest stays the operator's.
    let security = &spec["securityContext"];
    assert_eq!(security["fsGroup"], 2000);
    assert_eq!(security["runAsUser"], 65532);
    assert_eq!(security["runAsNonRoot"], true);
    // Extra labels and annotations beside the operator's own.
    let meta = &pod["metadata"];
    assert_eq!(meta["labels"]["team"], "platform");
    assert_eq!(meta["labels"]["etcdoperator.dev/member"], "demo-1");
    assert_eq!(meta["annotations"]["example.com/owner"], "platform team");
    let recorded = config::read(
        "pods/demo-1",
        serde_json::from_value(meta["annotations"].clone())
            .ok()
            .as_ref(),
    )
    .expect("readable");
    assert_eq!(recorded, Some(placed("demo-1")), "the pod records them");
}

#[test]
fn an_empty_spread_list_drops_the_default_and_affinity_replaces_it_field_by_field() {
    let mut c = config("demo-1", "3.5.1");
    c.pod.template = Some(
        serde_json::from_value(json!({
            "topologySpreadConstraints": [],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "topologyKey": "kubernetes.io/hostname",
                "labelSelector": {"matchLabels": {"etcdoperator.dev/cluster": "demo"}}
            }]}}
        }))
        .expect("pod settings"),
    );
    let pod = Seen::pod_of(&c, StoragePolicy::Persistent).json();
    assert!(pod["spec"].get("topologySpreadConstraints").is_none());
    let anti = &pod["spec"]["affinity"]["podAntiAffinity"];
    assert!(
        anti["requiredDuringSchedulingIgnoredDuringExecution"].is_array()
            && anti
                .get("preferredDuringSchedulingIgnoredDuringExecution")
                .is_none(),
        "{anti:#}"
    );
}

#[test]
fn claims_take_the_size_and_class() {
    let wanted = ClaimWanted {
        size: Some("20Gi".into()),
        class: Some("fast-ssd".into()),
    };
    let claim = data_claim("demo", &config("demo-1", "3.5.1"), &wanted, &owner());
    let claim = serde_json::to_value(claim).expect("json");
    assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "20Gi");
    assert_eq!(claim["spec"]["storageClassName"], "fast-ssd");
}

#[test]
fn jobs_that_run_the_members_image_pull_and_schedule_as_members() {
    let c = placed("demo-1");
    let job = restore_job(
        "demo-restore-x",
        "demo",
        &c,
        "demo-1-data",
        ("demo-backups", "snap.db"),
        c.pod.repository_or(DEFAULT_IMAGE),
        &owner(),
    );
    let check = image_check_job(
        "demo-image-check-x",
        "demo",
        "mirror.example.com/etcd",
        Version::new(3, 5, 1),
        c.pod.template.as_deref(),
        &owner(),
    );
    for job in [job, check] {
        let job = serde_json::to_value(job).expect("json");
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(
            pod["containers"][0]["image"],
            "mirror.example.com/etcd:v3.5.1"
        );
        assert_eq!(pod["imagePullSecrets"], json!([{"name": "mirror-pull"}]));
        assert_eq!(pod["nodeSelector"]["node-role.example.com/etcd"], "true");
        assert_eq!(pod["tolerations"][0]["key"], "dedicated");
        assert_eq!(pod["priorityClassName"], "etcd-critical");
        assert_eq!(pod["securityContext"]["fsGroup"], 2000);
        let node = &pod["affinity"]["nodeAffinity"];
        assert!(node.is_object(), "{pod:#}");
        // Still beside the follower (backup claim), no member's spread.
        assert!(pod["affinity"]["podAffinity"].is_object(), "{pod:#}");
        assert!(pod.get("topologySpreadConstraints").is_none());
    }
}
