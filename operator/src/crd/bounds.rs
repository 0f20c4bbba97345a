//! The range a whole-number field of an EtcdCluster allows, read from the
//! CRD's own schema (its `minimum` and `maximum`, the ones the API server
//! enforces), so that a number too large even for its type is refused
//! with the field's range ("spec.size: ... a whole number from 1 to 9"),
//! not the type's 64-bit one.

use std::sync::OnceLock;

use kube::CustomResourceExt;

use super::EtcdCluster;

/// The CRD's OpenAPI schema of an EtcdCluster (`null` if it could not be
/// made, which no bound is then read from).
fn schema() -> &'static serde_json::Value {
    static SCHEMA: OnceLock<serde_json::Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        serde_json::to_value(EtcdCluster::crd())
            .ok()
            .and_then(|crd| {
                crd.pointer("/spec/versions/0/schema/openAPIV3Schema")
                    .cloned()
            })
            .unwrap_or_default()
    })
}

/// The least and greatest value the schema allows field `path` of an
/// EtcdCluster document (`spec.size`, `spec.backup.maxBackups`), each
/// `None` when it says none. A [`crate::yaml::Bounds`].
pub fn field_bounds(path: &str) -> (Option<i128>, Option<i128>) {
    let mut node = schema();
    for part in path.split('.') {
        // `name[2][0]`: the field, then an item per index.
        let (name, indexes) = part.split_once('[').unwrap_or((part, ""));
        let Some(next) = node.get("properties").and_then(|p| p.get(name)) else {
            return (None, None);
        };
        node = next;
        for _ in indexes.split('[').filter(|i| !i.is_empty()) {
            let Some(item) = node.get("items") else {
                return (None, None);
            };
            node = item;
        }
    }
    let whole = |key: &str| {
        let n = node.get(key)?.as_f64()?;
        // The schema's bounds are whole numbers written as floats (9.0).
        (n.fract() == 0.0 && n.abs() < 1e30).then_some(n as i128)
    };
    (whole("minimum"), whole("maximum"))
}

/// [`field_bounds`] of `spec.FIELD`, for documents that hold a spec's
/// fields under another name (a soak scenario's `cluster`).
pub fn spec_field_bounds(field: &str) -> (Option<i128>, Option<i128>) {
    field_bounds(&format!("spec.{field}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_come_from_the_schema() {
        assert_eq!(field_bounds("spec.size"), (Some(1), Some(9)));
        assert_eq!(
            field_bounds("spec.backup.maxBackups"),
            (Some(1), Some(10000))
        );
        assert_eq!(
            field_bounds("spec.backup.continuous.maxEvents"),
            (Some(1), Some(1_000_000))
        );
        assert_eq!(spec_field_bounds("size"), (Some(1), Some(9)));
        for unbounded in [
            "spec.version",
            "spec.nothing",
            "metadata.name",
            "spec.size.x",
            "",
        ] {
            assert_eq!(field_bounds(unbounded), (None, None), "{unbounded}");
        }
    }
}
