//! The install as a user gets it: every kustomization under deploy/
//! renders and what it renders passes `kubernetes-validate --strict`; the
//! image has a registry and the workspace's version, set in one place,
//! and the backup Jobs run the same; the cluster-wide install lives in its
//! own namespace with aggregated roles for users; deploy/crds is the CRD
//! alone; the single-namespace overlay has a Role with the ClusterRole's
//! rules and no cluster-wide rights of the operator's; the kind overlay
//! runs the image `make kind-up` and the kind workflow load; the release
//! manifest and its workflow are what the docs say.

use std::path::PathBuf;

use serde_json::Value;

use super::tools::{kustomize, root, tool, validate};

/// Every folder under deploy/ with a kustomization.yaml, relative.
fn kustomizations() -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![root().join("deploy")];
    while let Some(dir) = dirs.pop() {
        if dir.join("kustomization.yaml").is_file() {
            let rel = dir.strip_prefix(root()).expect("below the root");
            out.push(rel.to_string_lossy().into_owned());
        }
        for entry in std::fs::read_dir(&dir).expect("a folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                dirs.push(path);
            }
        }
    }
    out.sort();
    out
}

fn of<'a>(docs: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
}

fn operator_container(docs: &[Value]) -> &Value {
    let deployment = of(docs, "Deployment", "etcd-operator").expect("the operator");
    &deployment["spec"]["template"]["spec"]["containers"][0]
}

fn env<'a>(container: &'a Value, name: &str) -> Option<&'a Value> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
}

/// The `images:` entry of the base: (newName, newTag).
fn base_image() -> (String, String) {
    let text = std::fs::read_to_string(root().join("deploy/base/kustomization.yaml"))
        .expect("deploy/base/kustomization.yaml");
    let k: Value = serde_saphyr::from_str(&text).expect("yaml");
    let image = &k["images"][0];
    (
        image["newName"].as_str().expect("newName").to_string(),
        image["newTag"].as_str().expect("newTag").to_string(),
    )
}

#[test]
fn every_kustomization_renders_and_validates() {
    let dirs = kustomizations();
    for expected in [
        "deploy",
        "deploy/crds",
        "deploy/overlays/single-namespace",
        "deploy/overlays/kind",
    ] {
        assert!(dirs.iter().any(|d| d == expected), "{expected}: {dirs:?}");
    }
    let tool = tool();
    let dir = tempfile::tempdir().expect("temp dir");
    for k in &dirs {
        let Some(docs) = kustomize(k) else { return };
        assert!(!docs.is_empty(), "{k} renders nothing");
        let Some(tool) = &tool else { continue };
        // Kinds with no schema in kubernetes-validate: the Prometheus
        // Operator's, and EtcdClusters (checked against the CRD elsewhere).
        let skipped = [
            "PrometheusRule",
            "ServiceMonitor",
            "PodMonitor",
            "EtcdCluster",
        ];
        let mut files: Vec<PathBuf> = Vec::new();
        for (i, doc) in docs.iter().enumerate() {
            if skipped.contains(&doc["kind"].as_str().unwrap_or("")) {
                continue;
            }
            let file = dir.path().join(format!("{}-{i}.yaml", k.replace('/', "_")));
            std::fs::write(&file, serde_saphyr::to_string(doc).expect("yaml")).expect("write");
            files.push(file);
        }
        if !files.is_empty() {
            validate(tool, &files);
        }
    }
}

#[test]
fn the_image_is_named_and_versioned_in_one_place() {
    let (name, tag) = base_image();
    assert_eq!(
        tag,
        env!("CARGO_PKG_VERSION"),
        "the image's tag is the workspace's version"
    );
    let parts: Vec<&str> = name.split('/').collect();
    assert!(
        parts.len() == 3 && parts[0].contains('.') && parts[2] == "etcd-operator",
        "REGISTRY/OWNER/etcd-operator, got {name}"
    );
    let raw = std::fs::read_to_string(root().join("deploy/base/operator.yaml")).expect("operator");
    assert!(
        !raw.contains(&name),
        "the image's name is set in the kustomization only"
    );
    // Every kustomization that runs the operator runs one image, which
    // its backup Jobs run too.
    for k in kustomizations() {
        let Some(docs) = kustomize(&k) else { return };
        if of(&docs, "Deployment", "etcd-operator").is_none() {
            continue;
        }
        let c = operator_container(&docs);
        let image = c["image"].as_str().expect("an image");
        let expected = if k == "deploy/overlays/kind" {
            "etcd-operator:soak".to_string()
        } else {
            format!("{name}:{tag}")
        };
        assert_eq!(image, expected, "{k}");
        let backup = env(c, "ETCD_OPERATOR_BACKUP_IMAGE").expect("the backup image");
        assert_eq!(backup["value"], image, "{k}: backup Jobs run another image");
    }
}

#[test]
fn the_install_has_its_own_namespace_and_roles_for_users() {
    let Some(docs) = kustomize("deploy") else {
        return;
    };
    let ns = "etcd-operator-system";
    assert!(of(&docs, "Namespace", ns).is_some(), "no Namespace {ns}");
    for d in &docs {
        let kind = d["kind"].as_str().unwrap_or("");
        let namespaced = [
            "ServiceAccount",
            "Deployment",
            "Service",
            "Role",
            "RoleBinding",
        ];
        if namespaced.contains(&kind) {
            assert_eq!(
                d["metadata"]["namespace"], ns,
                "{kind} {}",
                d["metadata"]["name"]
            );
        }
    }
    let binding = of(&docs, "ClusterRoleBinding", "etcd-operator").expect("the binding");
    assert_eq!(binding["subjects"][0]["namespace"], ns);
    assert!(env(operator_container(&docs), "ETCD_OPERATOR_NAMESPACE").is_none());
    for (role, label, writes) in [
        (
            "etcd-operator-etcdcluster-viewer",
            "aggregate-to-view",
            false,
        ),
        (
            "etcd-operator-etcdcluster-editor",
            "aggregate-to-edit",
            true,
        ),
    ] {
        let r = of(&docs, "ClusterRole", role).unwrap_or_else(|| panic!("no {role}"));
        let key = format!("rbac.authorization.k8s.io/{label}");
        assert_eq!(r["metadata"]["labels"][key.as_str()], "true", "{role}");
        let verbs: Vec<&str> = r["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|rule| rule["verbs"].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(verbs.contains(&"delete"), writes, "{role}: {verbs:?}");
        assert!(r["rules"].to_string().contains("etcdclusters"), "{role}");
        assert!(!r["rules"].to_string().contains("secrets"), "{role}");
    }
}

#[test]
fn the_crds_kustomization_is_the_crd_alone() {
    let Some(docs) = kustomize("deploy/crds") else {
        return;
    };
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(kinds, ["CustomResourceDefinition"]);
    let text = std::fs::read_to_string(root().join("deploy/base/crd.yaml")).expect("crd.yaml");
    let committed: Value = serde_saphyr::from_str(&text).expect("yaml");
    assert!(
        numbers_as_floats(&docs[0]) == numbers_as_floats(&committed),
        "deploy/crds renders another CRD than deploy/base/crd.yaml"
    );
}

/// `v` with every number a float (kustomize writes `1.0` as `1`).
fn numbers_as_floats(v: &Value) -> Value {
    match v {
        Value::Number(n) => n.as_f64().map_or(Value::Null, Value::from),
        Value::Array(a) => Value::Array(a.iter().map(numbers_as_floats).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), numbers_as_floats(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[test]
fn the_single_namespace_install_has_a_role_and_no_cluster_wide_rights() {
    let Some(docs) = kustomize("deploy/overlays/single-namespace") else {
        return;
    };
    let Some(cluster_wide) = kustomize("deploy") else {
        return;
    };
    let container = operator_container(&docs);
    let ns =
        of(&docs, "Deployment", "etcd-operator").expect("the operator")["metadata"]["namespace"]
            .clone();
    assert!(
        of(&docs, "Namespace", ns.as_str().unwrap_or("")).is_some(),
        "{ns}"
    );
    let watched = env(container, "ETCD_OPERATOR_NAMESPACE").expect("one namespace watched");
    assert_eq!(
        watched["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    assert!(of(&docs, "ClusterRole", "etcd-operator").is_none());
    assert!(of(&docs, "ClusterRoleBinding", "etcd-operator").is_none());
    let role = of(&docs, "Role", "etcd-operator").expect("the Role");
    let cluster_role = of(&cluster_wide, "ClusterRole", "etcd-operator").expect("ClusterRole");
    assert_eq!(
        role["rules"], cluster_role["rules"],
        "role.yaml drifted from rbac.yaml"
    );
    assert_eq!(role["metadata"]["namespace"], ns);
    let binding = of(&docs, "RoleBinding", "etcd-operator").expect("the RoleBinding");
    assert_eq!(binding["metadata"]["namespace"], ns);
    assert_eq!(binding["roleRef"]["kind"], "Role");
    assert_eq!(binding["subjects"][0]["namespace"], ns);
    // The only cluster-wide roles left are the users' (no Secrets), and
    // nothing binds the operator to them.
    for d in docs.iter().filter(|d| d["kind"] == "ClusterRole") {
        assert!(
            !d["rules"].to_string().contains("secrets"),
            "{}",
            d["metadata"]["name"]
        );
    }
    assert!(!docs.iter().any(|d| d["kind"] == "ClusterRoleBinding"));
}

#[test]
fn the_kind_overlay_runs_the_image_kind_up_loads_beside_the_soak() {
    let Some(docs) = kustomize("deploy/overlays/kind") else {
        return;
    };
    let makefile = std::fs::read_to_string(root().join("Makefile")).expect("Makefile");
    let loaded = makefile
        .lines()
        .find_map(|l| l.strip_prefix("OPERATOR_IMAGE ?= "))
        .expect("OPERATOR_IMAGE in the Makefile");
    let workflow = std::fs::read_to_string(root().join("ci/workflows/soak-kind.yml"))
        .expect("ci/workflows/soak-kind.yml");
    assert!(workflow.contains(&format!("kind load docker-image --name soak {loaded}")));
    assert!(workflow.contains("apply --server-side -k deploy/overlays/kind"));
    assert!(makefile.contains("apply --server-side -k deploy/overlays/kind"));
    assert_eq!(operator_container(&docs)["image"], loaded);
    let deployment = of(&docs, "Deployment", "etcd-operator").expect("the operator");
    assert_eq!(deployment["metadata"]["namespace"], "default");
    assert!(!docs.iter().any(|d| d["kind"] == "Namespace"));
    let text = std::fs::read_to_string(root().join("deploy/overlays/kind/kustomization.yaml"))
        .expect("the kind overlay");
    let k: Value = serde_saphyr::from_str(&text).expect("yaml");
    assert_eq!(
        k["images"][0]["name"],
        base_image().0.as_str(),
        "replaces the base's image"
    );
}

#[test]
fn the_service_monitor_is_beside_the_service_it_scrapes() {
    let Some(docs) = kustomize("deploy/overlays/monitoring") else {
        return;
    };
    let service = of(&docs, "Service", "etcd-operator-metrics").expect("the Service");
    let monitor = of(&docs, "ServiceMonitor", "etcd-operator").expect("the ServiceMonitor");
    let ns = &service["metadata"]["namespace"];
    assert_eq!(&monitor["metadata"]["namespace"], ns);
    assert_eq!(&monitor["spec"]["namespaceSelector"]["matchNames"][0], ns);
}

#[test]
fn the_release_manifest_and_its_workflow_are_as_documented() {
    let makefile = std::fs::read_to_string(root().join("Makefile")).expect("Makefile");
    assert!(makefile.contains("kubectl kustomize deploy > dist/install.yaml"));
    let ignore = std::fs::read_to_string(root().join(".gitignore")).expect(".gitignore");
    assert!(
        ignore.lines().any(|l| l == "/dist/"),
        "dist/ is not ignored"
    );
    let workflow = std::fs::read_to_string(root().join("ci/workflows/release.yml"))
        .expect("ci/workflows/release.yml");
    for needed in [
        "tags: [\"v*\"]",
        "make image BUILDER=docker",
        "docker push \"$IMAGE\"",
        "make release-manifest",
        "gh release upload",
    ] {
        assert!(workflow.contains(needed), "release.yml lacks {needed}");
    }
    let docs = std::fs::read_to_string(root().join("docs/src/install.md")).expect("install.md");
    for needed in [
        "kubectl apply --server-side -f",
        "rollout status deploy/etcd-operator",
        "deploy/crds",
        "deploy/overlays/single-namespace",
        "make image",
        "make release-manifest",
    ] {
        assert!(docs.contains(needed), "docs/src/install.md lacks {needed}");
    }
}
