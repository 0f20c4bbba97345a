//! The committed CRD in deploy/ matches the Rust types (run `make crds`).

use etcd_operator::crd::EtcdCluster;
use kube::CustomResourceExt;

#[test]
fn committed_crd_matches_the_types() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/base/crd.yaml");
    let committed = std::fs::read_to_string(&path).expect("deploy/base/crd.yaml");
    let generated = serde_saphyr::to_string(&EtcdCluster::crd()).expect("crd yaml");
    assert!(
        committed == generated,
        "deploy/base/crd.yaml is out of date with operator/src/crd.rs: run `make crds` and commit it"
    );
    // Read back, it is the same schema (its patterns and CEL rules, folded
    // over lines, keep every character).
    let read: serde_json::Value = serde_saphyr::from_str(&committed).expect("crd yaml");
    let generated = serde_json::to_value(EtcdCluster::crd()).expect("crd json");
    assert_eq!(read, generated);
}

#[test]
fn every_schema_field_has_a_description() {
    let crd = serde_json::to_value(EtcdCluster::crd()).expect("crd json");
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let mut missing = Vec::new();
    walk(schema, "", &mut missing);
    assert!(
        missing.is_empty(),
        "fields without a doc comment: {missing:?}"
    );
}

fn walk(schema: &serde_json::Value, path: &str, missing: &mut Vec<String>) {
    // An embedded Kubernetes type: described on top, its insides are
    // Kubernetes' own (left out of the CRD to keep it small).
    let spec_path = path.trim_start_matches('.');
    if etcd_operator::crd::KUBERNETES_TYPES.contains(&spec_path) {
        return;
    }
    let Some(props) = schema.get("properties").and_then(|p| p.as_object()) else {
        if let Some(items) = schema.get("items") {
            walk(items, &format!("{path}[]"), missing);
        }
        return;
    };
    for (name, field) in props {
        let here = format!("{path}.{name}");
        let top_level =
            path.is_empty() && ["apiVersion", "kind", "metadata"].contains(&name.as_str());
        if !top_level && field.get("description").is_none() {
            missing.push(here.clone());
        }
        walk(field, &here, missing);
    }
}

/// The guide's page on admission names every rule the CRD carries.
#[test]
fn the_admission_page_names_every_rule() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/admission.md");
    let page = std::fs::read_to_string(&path).expect("docs/src/admission.md");
    let missing: Vec<String> = etcd_operator::crd::admission::rules()
        .into_iter()
        .map(|r| r.name)
        .filter(|name| !page.contains(&format!("`{name}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/src/admission.md does not name {missing:?}"
    );
}

#[test]
fn committed_spec_reference_matches_the_types() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/reference/spec.md");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == etcd_operator::crd::reference::markdown(),
        "docs/src/reference/spec.md is out of date with operator/src/crd.rs: run `make crds` \
         and commit it"
    );
}
