//! `spec.pod` and `spec.image`: what is taken, and what is refused by
//! name.

use serde_json::{Value, json};

use super::*;

fn spec(pod: Value, image: Value) -> EtcdClusterSpec {
    serde_json::from_value(json!({
        "size": 3, "version": "3.5.1", "pod": pod, "image": image,
    }))
    .expect("a spec")
}

fn errors(pod: Value) -> Vec<String> {
    let mut out = Vec::new();
    check(&spec(pod, json!({})), &mut |f: &str, m: String| {
        out.push(format!("{f}: {m}"))
    });
    out
}

/// A pod spec a production cluster might give.
fn production() -> Value {
    json!({
        "resources": {
            "requests": {"cpu": "2", "memory": "8Gi"},
            "limits": {"memory": "16Gi", "hugepages-2Mi": "0"}
        },
        "nodeSelector": {"node-role.example.com/etcd": ""},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "etcd", "effect": "NoSchedule"},
            {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
        ],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b", "c"]}
            ]}]
        }}},
        "topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule", "minDomains": 3
        }],
        "priorityClassName": "etcd-critical",
        "labels": {"team": "platform"},
        "annotations": {"example.com/owner": "platform team"},
        "imagePullSecrets": [{"name": "mirror-pull"}],
        "securityContext": {"fsGroup": 2000, "fsGroupChangePolicy": "Always"}
    })
}

#[test]
fn a_production_pod_spec_is_taken_whole() {
    assert_eq!(errors(production()), Vec::<String>::new());
    let mut out = Vec::new();
    let s = spec(
        production(),
        json!({"repository": "mirror.local:5000/etcd"}),
    );
    let settings = check(&s, &mut |f: &str, m: String| out.push(format!("{f}: {m}")));
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(
        settings.repository.as_deref(),
        Some("mirror.local:5000/etcd")
    );
    assert_eq!(settings.template, s.pod);
}

#[test]
fn nothing_set_is_the_default() {
    let mut out = Vec::new();
    let s: EtcdClusterSpec =
        serde_json::from_value(json!({"size": 3, "version": "3.5.1"})).expect("a spec");
    let settings = check(&s, &mut |f: &str, m: String| out.push(format!("{f}: {m}")));
    assert!(out.is_empty() && settings.is_default(), "{out:?}");
    let empty = spec(json!({}), json!({}));
    assert!(check(&empty, &mut |_: &str, _: String| {}).is_default());
}

#[test]
fn what_etcds_pod_cannot_take_is_refused_by_name() {
    for (pod, field) in [
        (
            json!({"labels": {"app.kubernetes.io/name": "x"}}),
            "spec.pod.labels.app.kubernetes.io/name: is the operator's own label",
        ),
        (
            json!({"labels": {"etcdoperator.dev/member": "x"}}),
            "spec.pod.labels.etcdoperator.dev/member: is the operator's own label",
        ),
        (
            json!({"annotations": {"etcdoperator.dev/member-config": "{}"}}),
            "spec.pod.annotations.etcdoperator.dev/member-config: ",
        ),
        (
            json!({"resources": {"requests": {"nvidia.com/gpu": "1"}}}),
            "spec.pod.resources.requests.nvidia.com/gpu: etcd's container cannot use it",
        ),
        (
            json!({"resources": {"limits": {"memory": "lots"}}}),
            "spec.pod.resources.limits.memory: \"lots\" is not a quantity",
        ),
        (
            json!({"resources": {"limits": {"cpu": "0"}}}),
            "spec.pod.resources.limits.cpu: a limit of 0",
        ),
        (
            json!({"resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}}),
            "spec.pod.resources.requests.memory: is more than its limit (1Gi)",
        ),
        (
            json!({"securityContext": {"runAsUser": 0}}),
            "spec.pod.securityContext.runAsUser: 0: etcd's pod runs as a user other than root",
        ),
        (
            json!({"securityContext": {"fsGroup": -1}}),
            "spec.pod.securityContext.fsGroup: -1",
        ),
        (
            json!({"securityContext": {"fsGroupChangePolicy": "Sometimes"}}),
            "spec.pod.securityContext.fsGroupChangePolicy: \"Sometimes\"",
        ),
        (
            json!({"priorityClassName": "High"}),
            "spec.pod.priorityClassName: \"High\" is not a valid object name",
        ),
        (
            json!({"imagePullSecrets": [{"name": "a/b"}]}),
            "spec.pod.imagePullSecrets[0].name: ",
        ),
        (
            json!({"tolerations": [{"operator": "Equal", "value": "x"}]}),
            "spec.pod.tolerations[0]: no key",
        ),
        (
            json!({"tolerations": [{"key": "k", "operator": "Exists", "value": "x"}]}),
            "spec.pod.tolerations[0]: a value with operator Exists",
        ),
        (
            json!({"tolerations": [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]}),
            "spec.pod.tolerations[0]: tolerationSeconds is for effect NoExecute only",
        ),
        (
            json!({"topologySpreadConstraints": [
                {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "Sometimes"}
            ]}),
            "spec.pod.topologySpreadConstraints[0].maxSkew: 0",
        ),
        (
            json!({"topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Sometimes"}
            ]}),
            "spec.pod.topologySpreadConstraints[0].whenUnsatisfiable: \"Sometimes\"",
        ),
        (
            json!({"nodeSelector": {"disk": "fast ssd"}}),
            "spec.pod.nodeSelector.disk: \"fast ssd\" is not a label value",
        ),
    ] {
        let e = errors(pod.clone());
        assert!(
            e.iter().any(|e| e.starts_with(field)),
            "{pod}: want {field:?}, got {e:?}"
        );
    }
}

#[test]
fn a_field_the_pod_spec_does_not_have_is_refused_by_name() {
    for field in ["hostNetwork", "containers", "serviceAccountName", "volumes"] {
        let doc = json!({"size": 3, "version": "3.5.1", "pod": {field: true}});
        let e = serde_json::from_value::<EtcdClusterSpec>(doc)
            .expect_err(field)
            .to_string();
        assert!(e.contains(&format!("unknown field `{field}`")), "{e}");
    }
    let doc = json!({"size": 3, "version": "3.5.1", "pod": {"resources": {"claims": []}}});
    let e = serde_json::from_value::<EtcdClusterSpec>(doc).expect_err("claims");
    assert!(e.to_string().contains("unknown field `claims`"), "{e}");
    let doc = json!({"size": 3, "version": "3.5.1",
        "pod": {"securityContext": {"runAsNonRoot": false}}});
    let e = serde_json::from_value::<EtcdClusterSpec>(doc).expect_err("runAsNonRoot");
    assert!(
        e.to_string().contains("unknown field `runAsNonRoot`"),
        "{e}"
    );
}

#[test]
fn an_image_with_a_tag_is_refused() {
    let mut out = Vec::new();
    let s = spec(
        json!({}),
        json!({"repository": "quay.io/coreos/etcd:v3.5.1"}),
    );
    check(&s, &mut |f: &str, m: String| out.push(format!("{f}: {m}")));
    assert!(
        out.iter()
            .any(|e| e.starts_with("spec.image.repository: ") && e.contains("tag")),
        "{out:?}"
    );
}
