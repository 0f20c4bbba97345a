//! The admission rules and the operator's validation agree: every rule is
//! in the generated CRD on its field; a value a bound or a pattern refuses
//! is refused by the operator naming that field (and, for the exact ones,
//! the other way round), on sample and random values; each CEL rule (which
//! only an API server evaluates) has a spec that breaks it, which the
//! operator refuses naming the field the rule's message names.

use kube::CustomResourceExt;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::controller::SpecState;
use crate::controller::kube::spec_state;
use crate::crd::EtcdCluster;
use crate::kube_names::OBJECT_NAME_PATTERN;
use crate::names::{CLUSTER_NAME_PATTERN, MAX_CLUSTER_NAME_LEN};
use crate::validate::{MAX_SIZE, MIN_SIZE, SECRET_NAME_PATTERN};

/// A spec with every object a rule sits on, valid on Kubernetes.
fn base() -> Value {
    json!({
        "size": 3,
        "version": "3.5.13",
        "backup": {
            "interval": "1h",
            "maxBackups": 3,
            "restoreCheck": {"interval": "1h"},
            "continuous": {"segmentInterval": "1s", "maxEvents": 100},
            "location": {"objectStore": {
                "url": "s3://bucket/prefix",
                "credentialsSecret": "creds",
                "serviceAccountName": "backup-sa"
            }}
        },
        "restore": {
            "backup": "example-20261205-012308-950",
            "cluster": "example",
            "toRevision": 5,
            "location": {"persistentVolumeClaim": "example-backups"}
        },
        "tls": {
            "peer": {"mode": "Provided", "secretName": "certs"},
            "client": {"mode": "Provided", "secretName": "certs"},
            "certificateValidity": "2160h",
            "caValidity": "43800h"
        },
        "tuning": {"heartbeatInterval": "100ms", "electionTimeout": "1s"},
        "quotaBackendBytes": 2_147_483_648_i64,
        "compaction": {"mode": "Periodic", "retention": "1h"},
        "defrag": {"interval": "24h", "fragmentationPercent": 50},
        "storage": {"policy": "Persistent", "size": "20Gi", "storageClassName": "fast"},
        "image": {"repository": "registry.example.com/mirror/etcd"},
        "pod": {
            "priorityClassName": "etcd-critical",
            "securityContext": {
                "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
                "fsGroupChangePolicy": "Always"
            }
        }
    })
}

/// Fields that stand in another's way: setting the first drops the second
/// (one place, one point in time).
const MAKES_ROOM: [(&str, &str); 5] = [
    ("spec.restore.toTime", "spec.restore.toRevision"),
    (
        "spec.restore.location.objectStore",
        "spec.restore.location.persistentVolumeClaim",
    ),
    (
        "spec.backup.location.persistentVolumeClaim",
        "spec.backup.location.objectStore",
    ),
    (
        "spec.backup.location.size",
        "spec.backup.location.objectStore",
    ),
    (
        "spec.backup.location.storageClassName",
        "spec.backup.location.objectStore",
    ),
];

/// `spec` with `field` (`spec.a.b`) set to `value`, its parents made.
fn with(spec: &Value, field: &str, value: Value) -> Value {
    let mut spec = spec.clone();
    for (setting, dropped) in MAKES_ROOM {
        if field.starts_with(setting)
            && let Some((parent, last)) = dropped.rsplit_once('.')
            && let Some(p) = object_at(&mut spec, parent)
        {
            p.remove(last);
        }
    }
    // An object store made for the field needs its url.
    let store = "spec.restore.location.objectStore";
    if field.starts_with(&format!("{store}."))
        && let Some(s) = object_at(&mut spec, store)
        && s.is_empty()
    {
        s.insert("url".into(), json!("s3://bucket"));
    }
    let (parent, last) = field.rsplit_once('.').expect("spec.FIELD");
    let p = object_at(&mut spec, parent).expect("an object");
    p.insert(last.to_string(), value);
    spec
}

/// The object at `path` (`spec.a.b`) of `spec`, made when missing.
fn object_at<'a>(spec: &'a mut Value, path: &str) -> Option<&'a mut Map<String, Value>> {
    let mut node = spec;
    for part in path.split('.').skip(1) {
        node = node
            .as_object_mut()?
            .entry(part)
            .or_insert_with(|| json!({}));
    }
    node.as_object_mut()
}

/// The operator's answer on Kubernetes: the message of an invalid spec
/// (`None`: valid; `Some("")`: not even an EtcdCluster).
fn operator(spec: &Value, name: &str) -> Option<String> {
    let doc = json!({
        "apiVersion": "etcdoperator.dev/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    });
    let Ok(resource) = serde_json::from_value::<EtcdCluster>(doc) else {
        return Some(String::new());
    };
    match spec_state(&resource) {
        SpecState::Valid { .. } => None,
        SpecState::Invalid { message, .. } => Some(message),
    }
}

/// Whether the operator refuses `field` of `spec`.
fn operator_refuses(spec: &Value, field: &str) -> bool {
    operator(spec, "example").is_some_and(|m| m.is_empty() || m.contains(&format!("{field}:")))
}

/// Whether the schema's bound or pattern takes `value`.
fn schema_takes(check: &Check, value: &Value) -> bool {
    match check {
        Check::Range { min, max } => value
            .as_i64()
            .is_some_and(|n| min.is_none_or(|m| n >= m) && max.is_none_or(|m| n <= m)),
        Check::Pattern {
            pattern,
            max_length,
        } => value.as_str().is_some_and(|s| {
            let re = regex::Regex::new(pattern).expect("the rule's pattern is a regex");
            re.is_match(s) && max_length.is_none_or(|n| s.chars().count() <= n)
        }),
        Check::Cel { .. } => true,
    }
}

/// Rules whose bound or pattern is exactly the operator's check.
fn exact(check: &Check) -> bool {
    match check {
        Check::Range { .. } => true,
        Check::Pattern { pattern, .. } => [
            CLUSTER_NAME_PATTERN,
            OBJECT_NAME_PATTERN,
            SECRET_NAME_PATTERN,
        ]
        .contains(&pattern.as_str()),
        Check::Cel { .. } => false,
    }
}

/// Judges `value` of `rule`'s field both ways.
fn agree(rule: &Rule, value: &Value) -> Result<(), String> {
    let spec = with(&base(), &rule.field, value.clone());
    let schema = schema_takes(&rule.check, value);
    let refused = operator_refuses(&spec, &rule.field);
    if !schema && !refused {
        return Err(format!(
            "{} refuses {}: {value}, which the operator takes ({:?})",
            rule.name,
            rule.field,
            operator(&spec, "example")
        ));
    }
    if exact(&rule.check) && schema && refused {
        return Err(format!(
            "{} takes {}: {value}, which the operator refuses: {:?}",
            rule.name,
            rule.field,
            operator(&spec, "example")
        ));
    }
    Ok(())
}

#[test]
fn the_base_spec_is_valid() {
    assert_eq!(operator(&base(), "example"), None);
}

#[test]
fn every_rule_is_in_the_crd_on_its_field() {
    let crd = serde_json::to_value(EtcdCluster::crd()).expect("crd json");
    let root = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let mut names = std::collections::BTreeSet::new();
    for rule in rules() {
        assert!(
            names.insert(rule.name.clone()),
            "two rules named {}",
            rule.name
        );
        let mut node = root;
        if rule.field != "metadata.name" {
            for part in rule.field.split('.') {
                node = &node["properties"][part];
            }
        }
        assert!(node.is_object(), "{}: no field {}", rule.name, rule.field);
        match &rule.check {
            Check::Range { min, max } => {
                let bound = |k: &str| node.get(k).and_then(Value::as_f64).map(|f| f as i64);
                assert_eq!(
                    (bound("minimum"), bound("maximum")),
                    (*min, *max),
                    "{}",
                    rule.name
                );
            }
            Check::Pattern {
                pattern,
                max_length,
            } => {
                assert_eq!(node["pattern"], json!(pattern), "{}", rule.name);
                assert_eq!(
                    node.get("maxLength").and_then(Value::as_u64),
                    max_length.map(|n| n as u64),
                    "{}",
                    rule.name
                );
            }
            Check::Cel { rule: cel, message } => {
                let listed = node["x-kubernetes-validations"]
                    .as_array()
                    .is_some_and(|l| {
                        l.iter()
                            .any(|v| v["rule"] == json!(cel) && v["message"] == json!(message))
                    });
                assert!(listed, "{}: not on {}", rule.name, rule.field);
                let named = message.split(':').next().unwrap_or_default();
                assert!(
                    named.starts_with(&rule.field)
                        || rule.field == "spec" && named.starts_with("spec."),
                    "{}: the message names {named}, not a field of {}",
                    rule.name,
                    rule.field
                );
            }
        }
    }
    // The bounds the local platform reads back are these.
    assert_eq!(
        crate::crd::field_bounds("spec.size"),
        (Some(MIN_SIZE.into()), Some(MAX_SIZE.into()))
    );
}

/// Values each kind of field is tried with.
fn samples(check: &Check) -> Vec<Value> {
    match check {
        Check::Range { min, max } => {
            let mut v = vec![i64::MIN, -1, 0, 1, 2, i64::MAX];
            for n in [*min, *max].into_iter().flatten() {
                v.extend([n.saturating_sub(1), n, n.saturating_add(1)]);
            }
            v.into_iter().map(|n| json!(n)).collect()
        }
        Check::Pattern { .. } => [
            "",
            " ",
            "a",
            "A",
            "1",
            "0",
            "-",
            "a-b",
            "a.b",
            "a..b",
            "a.-b",
            "-a",
            "a-",
            ".a",
            "a.",
            "a_b",
            "example",
            "x1",
            "1x",
            "certs",
            "3.5.1",
            "v3.5.1",
            "vv3.5.1",
            "3.5",
            "3.5.1.1",
            " 3.5.1",
            "3.6.0",
            "99999999999.1.1",
            "1s",
            "0s",
            "0",
            "100ms",
            "99ms",
            "1h",
            "24h",
            "8784h",
            "8785h",
            "876000h",
            "876001h",
            " 1h ",
            "+1h",
            "-1h",
            "1h-5m",
            "1.5h",
            "250ms",
            "1m",
            "59s",
            "10s",
            "11s",
            "50s",
            "51s",
            "1.5ms",
            "2026-12-04T10:41:59Z",
            "2026-12-04 10:41:59",
            "2026-13-04T10:41:59Z",
            "yesterday",
            "s3://bucket/p",
            "gs://bucket",
            "az://c-1/x",
            "http://x",
            "s3://Bucket",
            "s3://b",
            "10Gi",
            "0Gi",
            "10gi",
            "500M",
            "1234567890123456789",
            "a/b.db",
            "x.db",
            "/snap",
            "+5",
            "10000",
        ]
        .into_iter()
        .map(|s| json!(s))
        .chain([41, 63, 64, 253, 254].map(|n| json!("x".repeat(n))))
        .collect(),
        Check::Cel { .. } => Vec::new(),
    }
}

#[test]
fn bounds_and_patterns_agree_with_the_operator_on_samples() {
    let mut problems = Vec::new();
    for rule in rules().iter().filter(|r| r.field.starts_with("spec.")) {
        for value in samples(&rule.check) {
            if let Err(e) = agree(rule, &value) {
                problems.push(e);
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Random strings from the characters the patterns care about.
    #[test]
    fn patterns_agree_with_the_operator_on_any_string(
        chars in proptest::collection::vec(
            proptest::sample::select(vec![
                "a", "z", "0", "9", "-", ".", "/", " ", "A", "_", "h", "m", "s", "v", ":", "T",
                "ms", "s3://", "Gi",
            ]),
            0..12,
        )
    ) {
        let value = json!(chars.concat());
        for rule in rules().iter().filter(|r| matches!(r.check, Check::Pattern { .. })) {
            prop_assert!(agree(rule, &value).is_ok(), "{:?}", agree(rule, &value));
        }
    }
}

/// Each CEL rule: a spec that breaks it (the base with these fields set;
/// `null` removes one), which the operator must refuse naming the field
/// the rule's message names, while the base passes.
fn breaking(name: &str) -> Option<Vec<(&'static str, Value)>> {
    let ephemeral = ("spec.storage", json!({"policy": "Ephemeral"}));
    let duration_range = |field: &'static str, value: &str| vec![(field, json!(value))];
    Some(match name {
        "backup-interval-range" => duration_range("spec.backup.interval", "0s"),
        "restore-check-interval-range" => {
            duration_range("spec.backup.restoreCheck.interval", "8785h")
        }
        "segment-interval-range" => {
            duration_range("spec.backup.continuous.segmentInterval", "99ms")
        }
        "defrag-interval-range" => duration_range("spec.defrag.interval", "59s"),
        "certificate-validity-range" => duration_range("spec.tls.certificateValidity", "59s"),
        "ca-validity-range" => duration_range("spec.tls.caValidity", "876001h"),
        "heartbeat-interval-range" => duration_range("spec.tuning.heartbeatInterval", "11s"),
        "election-timeout-range" => duration_range("spec.tuning.electionTimeout", "51s"),
        "election-timeout-vs-heartbeat" => vec![("spec.tuning.heartbeatInterval", json!("300ms"))],
        "compaction-periodic-retention" => vec![("spec.compaction.retention", json!("500ms"))],
        "compaction-revision-retention" => vec![
            ("spec.compaction.mode", json!("Revision")),
            ("spec.compaction.retention", json!("1000000001")),
        ],
        "defrag-what" => vec![("spec.defrag", json!({}))],
        "backup-location-one-place" => vec![
            ("spec.backup.location.persistentVolumeClaim", json!("claim")),
            (
                "spec.backup.location.objectStore",
                base()["backup"]["location"]["objectStore"].clone(),
            ),
        ],
        "backup-location-no-path" => vec![("spec.backup.location.path", json!("/backups"))],
        "restore-point-one-of" => vec![
            ("spec.restore.toTime", json!("2026-12-04T10:41:59Z")),
            ("spec.restore.toRevision", json!(5)),
        ],
        "restore-backup-no-file" => vec![("spec.restore.backup", json!("snapshots/a.db"))],
        "restore-location-one-place" => vec![
            (
                "spec.restore.location.objectStore",
                json!({"url": "s3://bucket"}),
            ),
            (
                "spec.restore.location.persistentVolumeClaim",
                json!("claim"),
            ),
        ],
        "restore-location-no-path" => vec![("spec.restore.location", json!({"path": "/backups"}))],
        "recovery-needs-backup" => vec![
            ("spec.backup", Value::Null),
            ("spec.recovery", json!({"restoreFromBackup": true})),
        ],
        "survivor-needs-persistent" => vec![
            ("spec.restore", Value::Null),
            ephemeral.clone(),
            ("spec.recovery", json!({"fromSurvivor": true})),
        ],
        "restore-needs-persistent" => vec![ephemeral],
        "member-claims-need-persistent" => vec![
            ("spec.restore", Value::Null),
            ("spec.storage.policy", json!("Ephemeral")),
        ],
        "tls-peer-auto" => vec![("spec.tls.peer.mode", json!("Auto"))],
        "tls-client-auto" => vec![("spec.tls.client.mode", json!("Auto"))],
        "tls-peer-provided" => vec![("spec.tls.peer.secretName", Value::Null)],
        "tls-client-provided" => {
            vec![("spec.tls.client", json!({"mode": "Provided", "path": " "}))]
        }
        "cluster-name" => return None,
        _ => return Some(Vec::new()),
    })
}

#[test]
fn every_cel_rule_has_a_spec_that_breaks_it_and_the_operator_refuses_it() {
    for rule in rules() {
        let Check::Cel { message, .. } = &rule.check else {
            continue;
        };
        let named = message.split(':').next().unwrap_or_default();
        let Some(changes) = breaking(&rule.name) else {
            // metadata.name: the operator's check of the name.
            for bad in [
                "a".repeat(MAX_CLUSTER_NAME_LEN + 1),
                "1abc".into(),
                "a.b".into(),
            ] {
                let m = operator(&base(), &bad).unwrap_or_default();
                assert!(m.contains("metadata.name:"), "{bad}: {m}");
            }
            assert_eq!(operator(&base(), &"a".repeat(MAX_CLUSTER_NAME_LEN)), None);
            continue;
        };
        assert!(
            !changes.is_empty(),
            "{}: no spec that breaks it in breaking()",
            rule.name
        );
        let mut spec = base();
        for (field, value) in changes {
            if value.is_null() {
                let (parent, last) = field.rsplit_once('.').expect("spec.FIELD");
                if let Some(p) = object_at(&mut spec, parent) {
                    p.remove(last);
                }
            } else {
                spec = with(&spec, field, value);
            }
        }
        let m = operator(&spec, "example").unwrap_or_default();
        assert!(
            m.contains(&format!("{named}:")),
            "{}: the operator does not refuse {named}: {m:?}\n{spec:#}",
            rule.name
        );
    }
}

#[test]
fn go_writes_durations_whole() {
    assert_eq!(go(Duration::from_secs(366 * 86_400)), "8784h");
    assert_eq!(go(Duration::from_millis(100)), "100ms");
    assert_eq!(go(Duration::from_secs(60)), "1m");
    assert_eq!(go(Duration::from_secs(61)), "61s");
    assert_eq!(go(Duration::from_nanos(5)), "5ns");
}
