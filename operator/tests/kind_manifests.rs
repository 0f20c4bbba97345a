//! What ci/workflows/soak-kind.yml applies to the kind cluster besides
//! deploy/: kind-config/s3.yaml (the S3 server, bucket and credentials
//! Secret of the object-store scenario) passes `kubernetes-validate
//! --strict`, and the scenario that uses it names that Service, that
//! Secret, and the bucket its Job makes.

// The checks' tools, shared with kube_manifests.rs (not all used here).
#[allow(dead_code)]
#[path = "kube_manifests/tools.rs"]
mod tools;

use serde_json::Value;
use tools::{root, tool, validate};

/// The YAML documents of `path` (relative to the workspace).
fn documents(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(root().join(path)).expect(path);
    text.split("\n---\n")
        .map(|d| serde_saphyr::from_str::<Value>(d).expect("a YAML document"))
        .collect()
}

fn named<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in kind-config/s3.yaml"))
}

#[test]
fn the_kind_s3_server_is_valid_and_is_what_the_s3_scenario_names() {
    let docs = documents("kind-config/s3.yaml");
    if let Some(tool) = tool() {
        validate(&tool, &[root().join("kind-config/s3.yaml")]);
    }
    let service = named(&docs, "Service");
    let secret = named(&docs, "Secret");
    let job = named(&docs, "Job");
    let port = &service["spec"]["ports"][0]["port"];
    let endpoint = format!(
        "http://{}.default.svc:{port}",
        service["metadata"]["name"].as_str().expect("a name")
    );
    let scenario = documents("scenarios/kill-one-every-30s-kube-s3.yaml");
    let store = &scenario[0]["cluster"]["backup"]["location"]["objectStore"];
    assert_eq!(store["endpoint"], endpoint.as_str(), "{store:#}");
    assert_eq!(store["credentialsSecret"], secret["metadata"]["name"]);
    let bucket = store["url"]
        .as_str()
        .and_then(|u| u.strip_prefix("s3://"))
        .and_then(|u| u.split('/').next())
        .expect("s3://BUCKET/...");
    let made = job["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .and_then(|a| a.last())
        .and_then(Value::as_str)
        .expect("the bucket's URL");
    assert_eq!(
        made,
        format!("{endpoint}/{bucket}"),
        "the Job makes the bucket"
    );
    let keys = secret["stringData"].as_object().expect("stringData");
    for key in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
        assert!(keys.contains_key(key), "{key} in {keys:?}");
    }
}
