//! What the checks validate: the example EtcdClusters of `deploy/`, the
//! `Provided` variant in the TLS example's comments, and a member's
//! configuration to build objects from.

use std::path::{Path, PathBuf};

use etcd_operator::crd::{EtcdCluster, TlsSpec};
use etcd_operator::member::{MemberAddr, MemberConfig};
use etcd_operator::testing::bootstrap_config;

use super::tools::root;

/// The example EtcdClusters: `deploy/examples/*/example-*.yaml`
/// (kubernetes-validate has no schema for their kind; they are checked
/// against the CRD's).
pub fn examples() -> Vec<PathBuf> {
    let mut found = Vec::new();
    for dir in std::fs::read_dir(root().join("deploy/examples")).expect("deploy/examples/") {
        let dir = dir.expect("entry").path();
        for file in std::fs::read_dir(&dir).expect("an example folder") {
            let p = file.expect("entry").path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name.starts_with("example-") && name.ends_with(".yaml") {
                found.push(p);
            }
        }
    }
    found.sort();
    found
}

pub fn example() -> PathBuf {
    root().join("deploy/examples/plain/example-cluster.yaml")
}

pub fn tls_example() -> PathBuf {
    root().join("deploy/examples/tls/example-cluster-tls.yaml")
}

pub fn resource() -> EtcdCluster {
    read_resource(&example())
}

pub fn read_resource(path: &Path) -> EtcdCluster {
    let text = std::fs::read_to_string(path).expect("an example manifest");
    let mut r: EtcdCluster = serde_saphyr::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: not an EtcdCluster: {e}", path.display()));
    r.metadata.uid = Some("0b1c9a4e-0000-4000-8000-000000000001".into());
    r
}

pub fn config(member: &str) -> MemberConfig {
    let url = |port: u16| format!("http://{member}.example.default.svc:{port}");
    let addr = MemberAddr {
        name: member.into(),
        peer_url: url(2380),
        client_url: url(2379),
    };
    let version = "3.5.1".parse().expect("version");
    bootstrap_config(
        addr,
        version,
        format!("{member}={}", url(2380)),
        "example-token",
    )
}

pub fn write_yaml<T: serde::Serialize>(dir: &Path, name: &str, object: &T) -> PathBuf {
    let path = dir.join(format!("{name}.yaml"));
    let text = serde_saphyr::to_string(object).expect("yaml");
    std::fs::write(&path, text).expect("write yaml");
    path
}

/// The block of YAML in the comments after the line saying `marker`: the
/// lines indented under `#`, up to the first blank comment line after it.
pub fn commented_block(text: &str, marker: &str, starts: &str) -> String {
    let mut lines = text.lines().skip_while(|l| !l.contains(marker));
    let block: Vec<&str> = lines
        .by_ref()
        .skip_while(|l| l.trim_start_matches('#').trim() != starts)
        .take_while(|l| l.trim() != "#")
        .map(|l| l.strip_prefix('#').unwrap_or(l))
        .collect();
    assert!(
        !block.is_empty(),
        "no commented {starts:?} after {marker:?}"
    );
    block.join("\n")
}

/// The `Provided` variant the TLS example shows in its comments, as a
/// resource: the example with its `tls:` block replaced.
pub fn provided_variant() -> EtcdCluster {
    let text = std::fs::read_to_string(tls_example())
        .expect("deploy/examples/tls/example-cluster-tls.yaml");
    let block = commented_block(&text, "Provided variant", "tls:");
    #[derive(serde::Deserialize)]
    struct Only {
        tls: TlsSpec,
    }
    let only: Only = serde_saphyr::from_str(&block)
        .unwrap_or_else(|e| panic!("the commented tls block is no spec.tls: {e}\n{block}"));
    let mut r = read_resource(&tls_example());
    r.spec.tls = Some(only.tls);
    r
}
