//! What the API server refuses of an `EtcdCluster` before the operator
//! sees it: bounds of whole numbers (`minimum`, `maximum`), patterns and
//! lengths of strings, and CEL rules (`x-kubernetes-validations`) for
//! what spans fields. Each rule is made here from the constants and the
//! patterns of the operator's own validation ([`crate::validate`] and the
//! checks it calls), and written into the CRD's schema as it is generated
//! (the spec's `#[schemars(transform)]`, the resource's
//! `#[kube(validation)]`), so the two cannot drift; [`crate::crd::field_bounds`]
//! reads the bounds back for the local platform's messages.
//!
//! A rule refuses nothing the operator takes. Where a rule is looser (a
//! version number too large for etcd, a size of zero), the operator still
//! refuses it: its validation stays the complete check, for the local
//! platform and for API servers that ignore CEL (before Kubernetes 1.25).

use std::time::Duration;

use serde_json::{Map, Value, json};

mod table;

/// Every rule, in the order the reference lists them.
pub fn rules() -> Vec<Rule> {
    table::rules()
}

/// One check the API server makes.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// Its name, as the reference and the guide list it.
    pub name: String,
    /// The field it sits on, as the operator's errors name fields
    /// (`spec.size`, `spec.restore`; `metadata.name` sits on the resource).
    pub field: String,
    /// What it checks.
    pub check: Check,
    /// Refused by the operator on Kubernetes only
    /// ([`crate::controller::kube::kube_checks`]); the local platform takes it.
    pub kubernetes_only: bool,
}

/// What a [`Rule`] checks, as the schema says it.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// A whole number's `minimum` and `maximum`.
    Range {
        /// Least value.
        min: Option<i64>,
        /// Greatest value.
        max: Option<i64>,
    },
    /// A string's `pattern` (a regular expression, searched for: anchored
    /// with `^...$` where the whole value must match) and `maxLength`.
    Pattern {
        /// The regular expression.
        pattern: String,
        /// Most characters.
        max_length: Option<usize>,
    },
    /// A CEL rule (`x-kubernetes-validations`): `self` is the field.
    Cel {
        /// The expression, true when the value is taken.
        rule: String,
        /// What the API server answers when it is false.
        message: String,
    },
}

/// A duration as Go writes it, in the largest unit that keeps it whole.
pub fn go(d: Duration) -> String {
    let nanos = d.as_nanos();
    for (unit, size) in [
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
    ] {
        if nanos > 0 && nanos.is_multiple_of(size) {
            return format!("{}{unit}", nanos / size);
        }
    }
    format!("{nanos}ns")
}

/// The spec's schema with every `spec.*` rule written in (the spec's
/// `#[schemars(transform)]`). A rule whose field the schema lacks is left
/// out; a test checks none is.
pub fn transform_spec(schema: &mut schemars::Schema) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    for rule in rules() {
        let Some(rest) = rule.field.strip_prefix("spec") else {
            continue;
        };
        let path = rest.strip_prefix('.').unwrap_or(rest);
        if let Some(node) = descend(object, path) {
            write(node, &rule.check);
        }
    }
}

/// The CEL rule on the resource itself (`metadata.name`), for its
/// `#[kube(validation)]`.
pub fn resource_rule() -> kube::core::Rule {
    let rule = rules().into_iter().find(|r| r.field == "metadata.name");
    match rule.map(|r| r.check) {
        Some(Check::Cel { rule, message }) => {
            kube::core::Rule::new(rule).message(kube::core::Message::Message(message))
        }
        // The table holds it; a test checks the CRD carries it.
        _ => kube::core::Rule::new("true"),
    }
}

/// The schema of field `path` (dot-separated) below `object`, through an
/// optional object's `anyOf` branch (`anyOf: [{...}, {type: null}]`,
/// before kube's rewrite); `None` when it has none.
fn descend<'a>(
    object: &'a mut Map<String, Value>,
    path: &str,
) -> Option<&'a mut Map<String, Value>> {
    let mut node = object;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        node = node.get_mut("properties")?.get_mut(part)?.as_object_mut()?;
        let branch = node
            .get("anyOf")
            .and_then(Value::as_array)
            .and_then(|b| b.iter().position(|b| b.get("properties").is_some()));
        if let Some(i) = branch {
            node = node.get_mut("anyOf")?.get_mut(i)?.as_object_mut()?;
        }
    }
    Some(node)
}

/// Writes `check` into a field's schema.
fn write(node: &mut Map<String, Value>, check: &Check) {
    match check {
        Check::Range { min, max } => {
            if let Some(min) = min {
                node.insert("minimum".into(), json!(min));
            }
            if let Some(max) = max {
                node.insert("maximum".into(), json!(max));
            }
        }
        Check::Pattern {
            pattern,
            max_length,
        } => {
            node.insert("pattern".into(), json!(pattern));
            if let Some(n) = max_length {
                node.insert("maxLength".into(), json!(n));
            }
        }
        Check::Cel { rule, message } => {
            let list = node
                .entry("x-kubernetes-validations")
                .or_insert_with(|| json!([]));
            if let Value::Array(list) = list {
                list.push(json!({ "rule": rule, "message": message }));
            }
        }
    }
}

#[cfg(test)]
mod tests;
