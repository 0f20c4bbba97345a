//! Every manifest in deploy/, and the objects the Kubernetes platform
//! builds (serialized to YAML), pass `kubernetes-validate --strict` against
//! the newest Kubernetes schemas it ships and an older one (1.30, about what
//! kind runs). The example EtcdClusters (`deploy/example-*.yaml`, and the
//! `Provided` variant in the TLS example's comments) are checked against
//! the CRD's own schema and by the operator's validation; the objects a TLS
//! cluster adds (its pods' flags and volume, its Secrets) are validated too.
//!
//! Every kustomization renders and validates, and the install's image,
//! namespaces and roles are as documented (`kube_manifests/install.rs`).
//!
//! The tool comes from `bash ci/setup` (into .venv/). Without it the tests
//! fail when `CI` is set, and otherwise say how to install it and pass.

use std::path::PathBuf;

use etcd_operator::controller::SpecState;
use etcd_operator::controller::kube::spec_state;
use etcd_operator::crd::{StoragePolicy, TlsMode};
use etcd_operator::member::MemberTls;
use etcd_operator::platform::kube::objects::{
    ClaimWanted, client_service, data_claim, disruption_budget, peer_service, record_config_map,
};
use etcd_operator::platform::kube::pod::{DEFAULT_IMAGE, member_pod};
use etcd_operator::platform::kube::tls::{ca_secret, client_secret, member_secret};
use etcd_operator::platform::tls_store::ClientFiles;
use etcd_operator::tls::inspect::CertInfo;
use etcd_operator::tls::issue::{self, Usage};
use etcd_operator::tls::{CaState, MemberFiles, RoleFiles};
use kube::Resource;

// The helpers, in `kube_manifests/` beside this file: the tools the checks
// run and the fixtures they validate.
#[path = "kube_manifests/fixtures.rs"]
mod fixtures;
#[path = "kube_manifests/tools.rs"]
mod tools;
// The install: every kustomization, the image, the namespaces and roles.
#[path = "kube_manifests/install.rs"]
mod install;

use fixtures::{
    commented_block, config, example, examples, provided_variant, read_resource, resource,
    tls_example, write_yaml,
};
use tools::{kustomize, matches_crd_schema, root, this_machines_glibc, tool, validate};

#[test]
fn every_deploy_manifest_is_valid() {
    let Some(tool) = tool() else { return };
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("deploy/base"))
        .expect("deploy/base/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .filter(|p| !p.ends_with("kustomization.yaml") && !p.ends_with("kustomizeconfig.yaml"))
        .collect();
    files.sort();
    let names: Vec<_> = files.iter().filter_map(|f| f.file_name()).collect();
    for expected in [
        "crd.yaml",
        "namespace.yaml",
        "operator.yaml",
        "rbac.yaml",
        "user-roles.yaml",
    ] {
        assert!(
            names.iter().any(|n| *n == expected),
            "deploy/base/{expected} missing: {names:?}"
        );
    }
    validate(&tool, &files);
}

/// `kubectl apply -k` of the install and of each overlay renders what the
/// files hold: the base's objects pass strict validation as rendered, the
/// monitoring overlay adds the ServiceMonitor, the PrometheusRule and the
/// dashboard's ConfigMap (its JSON the committed dashboard), the TLS overlay
/// adds the example cluster.
#[test]
fn the_kustomize_install_and_overlays_render() {
    let Some(base) = kustomize("deploy") else {
        return;
    };
    let kinds = |docs: &[serde_json::Value]| -> Vec<String> {
        let mut k: Vec<String> = docs
            .iter()
            .map(|d| d["kind"].as_str().unwrap_or("").to_string())
            .collect();
        k.sort();
        k
    };
    assert_eq!(
        kinds(&base),
        [
            "ClusterRole",
            "ClusterRole",
            "ClusterRole",
            "ClusterRoleBinding",
            "CustomResourceDefinition",
            "Deployment",
            "Namespace",
            "Service",
            "ServiceAccount"
        ]
    );
    let monitoring = kustomize("deploy/overlays/monitoring").expect("rendered");
    let mut expected = kinds(&base);
    expected.extend(
        [
            "ConfigMap",
            "PodMonitor",
            "PrometheusRule",
            "ServiceMonitor",
        ]
        .map(String::from),
    );
    expected.sort();
    assert_eq!(kinds(&monitoring), expected);
    let dashboard = monitoring
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .expect("dashboard");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let committed = std::fs::read_to_string(root().join("deploy/monitoring/dashboard.json"))
        .expect("dashboard");
    assert_eq!(
        dashboard["data"]["dashboard.json"].as_str(),
        Some(committed.as_str())
    );
    let tls = kustomize("deploy/overlays/example-tls").expect("rendered");
    let cluster = tls
        .iter()
        .find(|d| d["kind"] == "EtcdCluster")
        .expect("the example");
    assert_eq!(
        cluster["metadata"]["name"],
        read_resource(&tls_example())
            .metadata
            .name
            .clone()
            .unwrap_or_default()
    );

    let Some(tool) = tool() else { return };
    let dir = std::env::temp_dir().join(format!("kustomize-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let core: Vec<&serde_json::Value> = monitoring
        .iter()
        .filter(|d| {
            !["PrometheusRule", "ServiceMonitor", "PodMonitor"]
                .contains(&d["kind"].as_str().unwrap_or(""))
        })
        .collect();
    let mut files = Vec::new();
    for (i, doc) in core.iter().enumerate() {
        let file = dir.join(format!("{i}.yaml"));
        std::fs::write(&file, serde_saphyr::to_string(doc).expect("yaml")).expect("write");
        files.push(file);
    }
    validate(&tool, &files);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn built_objects_are_valid() {
    let Some(tool) = tool() else { return };
    let r = resource();
    let owner = r.controller_owner_ref(&()).expect("owner");
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let mut files = Vec::new();
    for (version, storage) in [
        ("3.4.23", StoragePolicy::Persistent),
        ("3.5.13", StoragePolicy::Ephemeral),
    ] {
        let mut c = config("example-0");
        c.version = version.parse().expect("version");
        let pod = member_pod("example", &c, storage, DEFAULT_IMAGE, &owner);
        files.push(write_yaml(d, &format!("pod-{version}"), &pod));
    }
    // A member placed and sized for production (spec.pod, spec.image).
    let mut placed = config("example-1");
    placed.pod.repository = Some("registry.example.com/mirror/etcd".into());
    placed.pod.template = Some(
        serde_json::from_value(serde_json::json!({
            "resources": {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "16Gi"}},
            "nodeSelector": {"node-role.example.com/etcd": "true"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "etcd",
                "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "disk", "operator": "In", "values": ["ssd"]}]}]}}},
            "topologySpreadConstraints": [{"maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}],
            "priorityClassName": "etcd-critical",
            "labels": {"team": "platform"},
            "annotations": {"example.com/owner": "platform"},
            "imagePullSecrets": [{"name": "mirror-pull"}],
            "securityContext": {"fsGroup": 2000, "seLinuxOptions": {"level": "s0:c123,c456"}}
        }))
        .expect("pod settings"),
    );
    let pod = member_pod(
        "example",
        &placed,
        StoragePolicy::Persistent,
        DEFAULT_IMAGE,
        &owner,
    );
    files.push(write_yaml(d, "pod-placed", &pod));
    let c = config("example-0");
    let default = ClaimWanted::default();
    files.push(write_yaml(
        d,
        "claim",
        &data_claim("example", &c, &default, &owner),
    ));
    let sized = ClaimWanted {
        size: Some("20Gi".into()),
        class: Some("fast-ssd".into()),
    };
    files.push(write_yaml(
        d,
        "claim-sized",
        &data_claim("example", &c, &sized, &owner),
    ));
    files.push(write_yaml(d, "peer", &peer_service("example", &owner)));
    files.push(write_yaml(d, "client", &client_service("example", &owner)));
    files.push(write_yaml(
        d,
        "pdb",
        &disruption_budget("example", 3, &owner),
    ));
    files.push(write_yaml(
        d,
        "record",
        &record_config_map("example", "{}".into(), &owner),
    ));
    validate(&tool, &files);
}

/// What a TLS cluster adds: pods with https URLs, the TLS flags, the
/// member's Secret mounted and readiness on the plain metrics port; the
/// CA, member and client Secrets.
#[test]
fn built_tls_objects_are_valid() {
    let Some(tool) = tool() else { return };
    let r = read_resource(&tls_example());
    let owner = r.controller_owner_ref(&()).expect("owner");
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let mut files = Vec::new();
    let mut c = config("example-tls-0");
    c.addr.peer_url = c.addr.peer_url.replace("http://", "https://");
    c.addr.client_url = c.addr.client_url.replace("http://", "https://");
    c.initial_cluster = c.initial_cluster.replace("http://", "https://");
    c.tls = MemberTls {
        peer: true,
        client: true,
        trust: "0123456789abcdef".into(),
    };
    let pod = member_pod(
        "example-tls",
        &c,
        StoragePolicy::Persistent,
        DEFAULT_IMAGE,
        &owner,
    );
    let text = serde_json::to_string(&pod).expect("json");
    for flag in [
        "--client-cert-auth=true",
        "--peer-client-cert-auth=true",
        "/etc/etcd/tls",
    ] {
        assert!(text.contains(flag), "{flag} missing from the TLS pod");
    }
    files.push(write_yaml(d, "tls-pod", &pod));
    let now = std::time::SystemTime::now();
    let day = std::time::Duration::from_secs(86_400);
    let ca = issue::new_ca("example-tls", 30 * day, now).expect("ca");
    let leaf = issue::issue(
        &ca,
        now + 30 * day,
        "example-tls-0",
        &["example-tls-0".into()],
        Usage::Member,
        day,
        now,
    )
    .expect("member certificate");
    let client = issue::issue(&ca, now + 30 * day, "tools", &[], Usage::Client, day, now)
        .expect("client certificate");
    let role = RoleFiles {
        cert_key: leaf,
        ca: ca.cert.clone(),
    };
    let member = MemberFiles {
        peer: Some(role.clone()),
        client: Some(role),
    };
    let state = CaState {
        issuing: ca.clone(),
        next: None,
        retiring: None,
    };
    let tools = ClientFiles {
        ca: ca.cert.clone(),
        cert_key: client,
    };
    files.push(write_yaml(
        d,
        "ca-secret",
        &ca_secret("example-tls", &state, &owner),
    ));
    files.push(write_yaml(
        d,
        "member-secret",
        &member_secret("example-tls", "example-tls-0", &member, &owner),
    ));
    files.push(write_yaml(
        d,
        "client-secret",
        &client_secret("example-tls", &tools, &owner),
    ));
    validate(&tool, &files);
}

#[test]
fn example_clusters_match_the_crd_schema_and_are_valid_specs() {
    let files = examples();
    assert!(
        files.contains(&example()) && files.contains(&tls_example()),
        "{files:?}"
    );
    for file in &files {
        let r = read_resource(file);
        assert_eq!(r.spec.size, 3, "{}", file.display());
        assert!(
            matches!(spec_state(&r), SpecState::Valid { .. }),
            "{} is refused by the operator",
            file.display()
        );
    }
    // The TLS example: Auto on both sides; its commented variant: Provided
    // from a Secret, also valid.
    let tls = read_resource(&tls_example()).spec.tls.expect("spec.tls");
    let mode = |e: &Option<etcd_operator::crd::TlsEndpoint>| e.as_ref().map(|e| e.mode);
    assert_eq!(mode(&tls.peer), Some(TlsMode::Auto));
    assert_eq!(mode(&tls.client), Some(TlsMode::Auto));
    let variant = provided_variant();
    let vt = variant.spec.tls.clone().expect("spec.tls");
    for side in [&vt.peer, &vt.client] {
        let side = side.as_ref().expect("both sides");
        assert_eq!(side.mode, TlsMode::Provided);
        assert_eq!(side.secret_name.as_deref(), Some("example-tls-certs"));
    }
    assert!(
        matches!(spec_state(&variant), SpecState::Valid { .. }),
        "the Provided variant is refused by the operator"
    );
    let Some((python, _)) = tool() else { return };
    for file in &files {
        matches_crd_schema(&python, file);
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let variant_file = write_yaml(dir.path(), "provided-variant", &variant);
    matches_crd_schema(&python, &variant_file);
}

/// The cert-manager Certificate in the TLS example's comments makes the
/// Secret its Provided variant names, with names covering every member's
/// URL host and the usages the operator checks for.
#[test]
fn the_commented_certificate_covers_every_member_of_the_provided_variant() {
    let text = std::fs::read_to_string(tls_example())
        .expect("deploy/examples/tls/example-cluster-tls.yaml");
    let block = commented_block(
        &text,
        "cert-manager Certificate",
        "apiVersion: cert-manager.io/v1",
    );
    let cert: serde_json::Value = serde_saphyr::from_str(&block)
        .unwrap_or_else(|e| panic!("the commented Certificate is no YAML: {e}\n{block}"));
    let spec = &cert["spec"];
    assert_eq!(cert["kind"], "Certificate");
    assert_eq!(spec["secretName"], "example-tls-certs");
    let list = |key: &str| -> Vec<String> {
        spec[key]
            .as_array()
            .unwrap_or_else(|| panic!("spec.{key}"))
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let usages = list("usages");
    assert!(usages.iter().any(|u| u == "server auth") && usages.iter().any(|u| u == "client auth"));
    let names = CertInfo {
        not_before: std::time::SystemTime::UNIX_EPOCH,
        not_after: std::time::SystemTime::UNIX_EPOCH,
        dns: list("dnsNames"),
        ips: Vec::new(),
        is_ca: false,
        server_auth: true,
        client_auth: true,
    };
    let r = provided_variant();
    let (name, ns) = (r.metadata.name.clone().expect("name"), "default");
    assert_eq!(r.metadata.namespace.as_deref(), Some(ns));
    for i in 0..r.spec.size {
        // The host of the member's peer and client URLs on Kubernetes.
        let host = format!("{name}-{i}.{name}.{ns}.svc");
        assert!(names.covers(&host), "{host} not in {:?}", names.dns);
    }
}

/// glibc of the base images and build machines the operator image is
/// made with; an unknown one fails the test until it is added here.
fn glibc_of(image_or_runner: &str) -> Option<(u32, u32)> {
    let known = [
        ("debian:12", (2, 36)),
        ("debian:bookworm", (2, 36)),
        ("debian:13", (2, 41)),
        ("debian:trixie", (2, 41)),
        ("ubuntu:22.04", (2, 35)),
        ("ubuntu:24.04", (2, 39)),
        ("ubuntu-22.04", (2, 35)),
        ("ubuntu-24.04", (2, 39)),
        ("ubuntu-latest", (2, 39)),
    ];
    known
        .iter()
        .find(|(name, _)| {
            image_or_runner == *name
                || image_or_runner
                    .strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('-') || rest.starts_with('.'))
        })
        .map(|(_, v)| *v)
}

#[test]
fn the_operator_image_runs_binaries_built_here_and_in_ci() {
    let dockerfile = std::fs::read_to_string(root().join("kind-config/Dockerfile"))
        .expect("kind-config/Dockerfile");
    let lines: Vec<&str> = dockerfile
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .collect();
    let base = lines
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("FROM "))
        .and_then(|l| l.split_whitespace().next())
        .expect("a FROM line");
    let base_glibc = glibc_of(base).unwrap_or_else(|| panic!("unknown base image {base}"));
    let workflow = std::fs::read_to_string(root().join("ci/workflows/soak-kind.yml"))
        .expect("ci/workflows/soak-kind.yml");
    let runner = workflow
        .lines()
        .find_map(|l| l.trim().strip_prefix("runs-on:"))
        .map(str::trim)
        .expect("runs-on");
    let mut builders = vec![(
        format!("the workflow's runner {runner}"),
        glibc_of(runner).unwrap_or_else(|| panic!("unknown runner {runner}")),
    )];
    if let Some(here) = this_machines_glibc() {
        builders.push(("this machine".into(), here));
    }
    for (builder, glibc) in builders {
        assert!(
            base_glibc >= glibc,
            "{base} has glibc {base_glibc:?}, older than {builder}'s {glibc:?}: a binary \
             built there may not start in the image"
        );
    }
    // The binary is tried at build time, as the user the pod runs as.
    let copy = lines
        .iter()
        .position(|l| l.starts_with("COPY target/release/etcd-operator "))
        .expect("the release binary is copied in");
    let tried = lines
        .iter()
        .position(|l| {
            l.starts_with("RUN") && l.contains("etcd-operator") && l.contains("--version")
        })
        .expect("a RUN that starts the binary");
    assert!(tried > copy);
    assert!(lines.contains(&"USER 65532:65532"), "{dockerfile}");
    // Only the binary and the etcd tools (for backup Jobs) go into the
    // build context.
    let ignore = std::fs::read_to_string(root().join("kind-config/Dockerfile.dockerignore"))
        .expect("kind-config/Dockerfile.dockerignore");
    let rules: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(rules, ["*", "!target/release/etcd-operator", "!.etcd"]);
}
