//! Every manifest in deploy/, and the objects the Kubernetes platform
//! builds (serialized to YAML), pass `kubernetes-validate --strict` against
//! the newest Kubernetes schemas it ships and an older one (1.30, about what
//! kind runs). The example EtcdCluster is checked against the CRD's own
//! schema and by the operator's validation.
//!
//! The tool comes from `bash ci/setup` (into .venv/). Without it the tests
//! fail when `CI` is set, and otherwise say how to install it and pass.

use std::path::{Path, PathBuf};
use std::process::Command;

use etcd_operator::controller::SpecState;
use etcd_operator::controller::kube::spec_state;
use etcd_operator::crd::{EtcdCluster, StoragePolicy};
use etcd_operator::member::{InitialState, MemberAddr, MemberConfig};
use etcd_operator::platform::kube::objects::{
    client_service, data_claim, disruption_budget, peer_service, record_config_map,
};
use etcd_operator::platform::kube::pod::{DEFAULT_IMAGE, member_pod};
use kube::Resource;

/// Kubernetes versions validated against.
const VERSIONS: [&str; 2] = ["1.37.0", "1.30.0"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// How to run the tool (program and leading arguments), or `None` after
/// saying why (and failing under CI).
fn tool() -> Option<(PathBuf, Vec<String>)> {
    let venv = root().join(".venv/bin");
    if venv.join("kubernetes-validate").is_file() {
        return Some((
            venv.join("python"),
            vec!["-m".into(), "kubernetes_validate".into()],
        ));
    }
    let python = PathBuf::from("python3");
    let importable = Command::new(&python)
        .args(["-c", "import kubernetes_validate, jsonschema"])
        .status()
        .is_ok_and(|s| s.success());
    if importable {
        return Some((python, vec!["-m".into(), "kubernetes_validate".into()]));
    }
    let hint = "kubernetes-validate is not installed: run `bash ci/setup` (it installs it into \
                .venv/), or `python3 -m venv .venv && .venv/bin/pip install kubernetes-validate`";
    assert!(std::env::var_os("CI").is_none(), "{hint}");
    println!("SKIPPED (not validated): {hint}");
    eprintln!("SKIPPED (not validated): {hint}");
    None
}

fn validate(tool: &(PathBuf, Vec<String>), files: &[PathBuf]) {
    for version in VERSIONS {
        let out = Command::new(&tool.0)
            .args(&tool.1)
            .args(["--strict", "-k", version])
            .args(files)
            .output()
            .expect("kubernetes-validate runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "kubernetes-validate {version} failed:\n{text}"
        );
        // A kind without a schema is only a warning: none is expected.
        assert!(
            !text.contains("WARN") && !text.contains("ERROR"),
            "{version}:\n{text}"
        );
        let passed = text.matches(" passed for resource ").count();
        assert!(
            passed >= files.len(),
            "{version}: not every file validated:\n{text}"
        );
    }
}

fn example() -> PathBuf {
    root().join("deploy/example-cluster.yaml")
}

#[test]
fn every_deploy_manifest_is_valid() {
    let Some(tool) = tool() else { return };
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("deploy"))
        .expect("deploy/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .filter(|p| *p != example())
        .collect();
    files.sort();
    let names: Vec<_> = files.iter().filter_map(|f| f.file_name()).collect();
    for expected in ["crd.yaml", "operator.yaml", "rbac.yaml"] {
        assert!(
            names.iter().any(|n| *n == expected),
            "deploy/{expected} missing: {names:?}"
        );
    }
    validate(&tool, &files);
}

fn resource() -> EtcdCluster {
    let text = std::fs::read_to_string(example()).expect("deploy/example-cluster.yaml");
    let mut r: EtcdCluster = serde_saphyr::from_str(&text).expect("an EtcdCluster");
    r.metadata.uid = Some("0b1c9a4e-0000-4000-8000-000000000001".into());
    r
}

fn config(member: &str) -> MemberConfig {
    let url = |port: u16| format!("http://{member}.example.default.svc:{port}");
    MemberConfig {
        addr: MemberAddr {
            name: member.into(),
            peer_url: url(2380),
            client_url: url(2379),
        },
        version: "3.5.1".parse().expect("version"),
        initial_cluster: format!("{member}={}", url(2380)),
        initial_state: InitialState::New,
        token: "example-token".into(),
        bootstrap: true,
        tls: Default::default(),
        backend: Default::default(),
    }
}

fn write_yaml<T: serde::Serialize>(dir: &Path, name: &str, object: &T) -> PathBuf {
    let path = dir.join(format!("{name}.yaml"));
    let text = serde_saphyr::to_string(object).expect("yaml");
    std::fs::write(&path, text).expect("write yaml");
    path
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
    let c = config("example-0");
    files.push(write_yaml(d, "claim", &data_claim("example", &c, &owner)));
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

#[test]
fn example_cluster_matches_the_crd_schema_and_is_a_valid_spec() {
    let r = resource();
    assert_eq!(r.spec.size, 3);
    assert!(
        matches!(spec_state(&r), SpecState::Valid { .. }),
        "deploy/example-cluster.yaml is refused by the operator"
    );
    let Some((python, _)) = tool() else { return };
    let script = r#"
import sys, yaml, jsonschema
crd = yaml.safe_load(open(sys.argv[1]))
schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
example = yaml.safe_load(open(sys.argv[2]))
jsonschema.validate(example, schema)
print("example matches the CRD schema")
"#;
    let out = Command::new(python)
        .args(["-c", script])
        .arg(root().join("deploy/crd.yaml"))
        .arg(example())
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "deploy/example-cluster.yaml does not match the CRD's schema:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
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

fn this_machines_glibc() -> Option<(u32, u32)> {
    let out = Command::new("ldd").arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next()?;
    if !first.contains("GLIBC") && !first.contains("GNU libc") {
        return None;
    }
    let (major, minor) = first.split_whitespace().last()?.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
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
