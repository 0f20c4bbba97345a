//! The committed CRD (deploy/base/crd.yaml) refuses bad specs by its own
//! schema, as an API server would before the operator sees them: each
//! bad EtcdCluster below fails the schema (with kubernetes-validate's
//! python and jsonschema, which check bounds, patterns and lengths; CEL
//! rules are an API server's), naming its field, while the same spec with
//! a good value passes; and the operator refuses the bad one too, naming
//! the same field.

// The checks' tools, shared with kube_manifests.rs (not all used here).
#[allow(dead_code)]
#[path = "kube_manifests/tools.rs"]
mod tools;

use etcd_operator::controller::SpecState;
use etcd_operator::controller::kube::spec_state;
use etcd_operator::crd::EtcdCluster;
use serde_json::{Value, json};
use tools::{crd_schema_verdict, tool};

/// An EtcdCluster named `demo` whose spec is `spec` with `field` set.
fn cluster(field: &str, value: Value) -> Value {
    let mut spec = json!({
        "size": 3,
        "version": "3.5.13",
        "backup": {"interval": "1h", "maxBackups": 3},
        "tls": {"peer": {"mode": "Provided", "secretName": "certs"}},
        "defrag": {"fragmentationPercent": 50},
    });
    let mut node = &mut spec;
    let parts: Vec<&str> = field.split('.').skip(1).collect();
    for part in &parts[..parts.len() - 1] {
        node = &mut node[*part];
    }
    node[parts[parts.len() - 1]] = value;
    json!({
        "apiVersion": "etcdoperator.dev/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": spec,
    })
}

/// (field, a value the schema refuses, a value it takes).
fn cases() -> Vec<(&'static str, Value, Value)> {
    vec![
        ("spec.size", json!(0), json!(1)),
        ("spec.size", json!(10), json!(9)),
        ("spec.version", json!("latest"), json!("v3.5.13")),
        ("spec.backup.interval", json!("soon"), json!("30m")),
        ("spec.backup.interval", json!("1h-5m"), json!(" 1h30m ")),
        ("spec.backup.maxBackups", json!(0), json!(10_000)),
        ("spec.quotaBackendBytes", json!(1), json!(1_048_576)),
        ("spec.defrag.fragmentationPercent", json!(100), json!(99)),
        (
            "spec.tls.peer.secretName",
            json!("Certs!"),
            json!("certs.v2"),
        ),
        (
            "spec.restore",
            json!({"backup": "x", "cluster": "Demo"}),
            json!({"backup": "x", "cluster": "demo"}),
        ),
        (
            "spec.backup.location",
            json!({"persistentVolumeClaim": "a..b"}),
            json!({"persistentVolumeClaim": "a.b"}),
        ),
    ]
}

#[test]
fn the_crd_refuses_bad_values_and_the_operator_does_too() {
    let dir = tempfile::tempdir().expect("temp dir");
    let python = tool().map(|(python, _)| python);
    for (i, (field, bad, good)) in cases().into_iter().enumerate() {
        let bad_doc = cluster(field, bad.clone());
        let resource: EtcdCluster =
            serde_json::from_value(bad_doc.clone()).expect("an EtcdCluster");
        match spec_state(&resource) {
            SpecState::Invalid { message, .. } => {
                assert!(message.contains(field), "{field}: {bad}: {message}")
            }
            SpecState::Valid { .. } => panic!("the operator takes {field}: {bad}"),
        }
        let Some(python) = &python else { continue };
        let file = |name: &str, doc: &Value| {
            let path = dir.path().join(format!("{i}-{name}.yaml"));
            std::fs::write(&path, serde_saphyr::to_string(doc).expect("yaml")).expect("write");
            path
        };
        let refused = crd_schema_verdict(python, &file("bad", &bad_doc))
            .expect_err(&format!("the CRD's schema takes {field}: {bad}"));
        let leaf = field.rsplit('.').next().unwrap_or(field);
        assert!(
            refused.contains(leaf) || refused.contains(&bad.to_string()),
            "{field}: {refused}"
        );
        let good_doc = cluster(field, good.clone());
        if let Err(e) = crd_schema_verdict(python, &file("good", &good_doc)) {
            panic!("the CRD's schema refuses {field}: {good}: {e}");
        }
    }
}
