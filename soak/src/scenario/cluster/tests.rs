use std::path::Path;

use etcd_operator::crd::EtcdClusterSpec;

use super::ClusterSpec;
use crate::scenario::parse;

/// A cluster with every field of the spec set, in block style.
const FULL: &str = "\
name: full
size: 3
version: \"3.5.1\"
paused: true
storage: {policy: Ephemeral}
backup: {interval: 10s, maxBackups: 3, restoreCheck: {interval: 30s}}
restore: {backup: b1, toRevision: 5}
recovery: {restoreFromBackup: true}
tls: {peer: {mode: Auto}, client: {mode: Provided, path: /certs}}
tuning: {heartbeatInterval: 100ms, electionTimeout: 1s}
quotaBackendBytes: 1048576
compaction: {mode: Periodic, retention: 1h}
defrag: {interval: 24h, fragmentationPercent: 50}
";

fn cluster(text: &str) -> Result<ClusterSpec, String> {
    etcd_operator::yaml::from_str::<ClusterSpec>(text)
}

fn scenario_error(cluster: &str) -> String {
    let text = format!(
        "name: t\nduration: 10s\ncluster: {cluster}\nchaos: {{killInterval: 5s}}\n\
         bounds: {{recoveryP99: 5s, recoveryMax: 10s, availability: 0.9}}\n"
    );
    parse(Path::new("t.yaml"), &text)
        .expect_err("should not parse")
        .to_string()
}

/// The resource is the one the operator reads from a manifest with the
/// same fields: every field of the spec reaches it.
#[test]
fn the_cluster_becomes_the_etcd_cluster_of_the_same_fields() {
    let c = cluster(FULL).expect("parses");
    let spec_fields = FULL.replace("name: full\n", "");
    let indented: String = spec_fields.lines().map(|l| format!("  {l}\n")).collect();
    let manifest = format!(
        "apiVersion: etcdoperator.dev/v1alpha1\nkind: EtcdCluster\n\
         metadata: {{name: full}}\nspec:\n{indented}"
    );
    let read = etcd_operator::manifest::parse(&manifest).expect("the operator reads it");
    let r = c.resource();
    assert_eq!(r.metadata.name.as_deref(), Some("full"));
    assert_eq!(r.spec, read[0].spec);
    assert_eq!(c.spec, read[0].spec);
    assert_ne!(c.spec, EtcdClusterSpec::minimal(3, "3.5.1"), "fields set");
}

/// Written out (as the strict reader compares it, and as reports hold it)
/// and read back, the cluster is the same: `name` beside the spec's fields.
#[test]
fn the_cluster_round_trips() {
    let c = cluster(FULL).expect("parses");
    let value = serde_json::to_value(&c).expect("serializes");
    assert_eq!(value["name"], "full");
    assert_eq!(value["size"], 3);
    assert_eq!(value["tuning"]["electionTimeout"], "1s");
    let text = serde_json::to_string(&value).expect("json");
    assert_eq!(cluster(&text).expect("reads back"), c);
    let minimal = cluster("{name: m, size: 1, version: \"3.4.23\"}").expect("parses");
    assert_eq!(minimal.spec, EtcdClusterSpec::minimal(1, "3.4.23"));
    let text = serde_json::to_string(&minimal).expect("json");
    assert_eq!(cluster(&text).expect("reads back"), minimal);
}

#[test]
fn an_unknown_field_is_refused_naming_it_and_its_line() {
    let e = scenario_error("{name: t, size: 3, version: \"3.4.23\", sise: 4}");
    assert!(e.starts_with("t.yaml: "), "{e}");
    assert!(e.contains("unknown field `sise`"), "{e}");
    assert!(e.contains("line 3"), "{e}");
    assert!(
        e.contains("expected one of name, size, version"),
        "name is among the fields: {e}"
    );
    let e = scenario_error("\n  name: t\n  size: 3\n  version: \"3.4.23\"\n  wat: 1");
    assert!(
        e.contains("unknown field `wat`") && e.contains("line 7"),
        "{e}"
    );
    // Within a field of the spec, the spec's own types refuse it.
    let e = scenario_error(
        "{name: t, size: 3, version: \"3.4.23\", backup: {interval: 10s, maxBackups: 1, bogus: 1}}",
    );
    assert!(e.contains("unknown field `bogus`"), "{e}");
}

#[test]
fn name_size_and_version_are_required() {
    let e = scenario_error("{size: 3, version: \"3.4.23\"}");
    assert!(e.contains("missing field `name`"), "{e}");
    let e = scenario_error("{version: \"3.4.23\"}");
    assert!(e.contains("missing field `name`"), "named first: {e}");
    let e = scenario_error("{name: t, version: \"3.4.23\"}");
    assert!(e.contains("missing field `size`"), "{e}");
    let e = scenario_error("{name: 5, size: 3, version: \"3.4.23\"}");
    assert!(e.contains("cluster.name"), "{e}");
    let e = scenario_error("5");
    assert!(e.contains("line 3"), "{e}");
}
