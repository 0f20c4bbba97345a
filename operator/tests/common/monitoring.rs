//! The metric names the monitoring files (alerts, dashboard) use.

use std::path::PathBuf;

/// Every `etcd_operator_*` series name an alert or a dashboard panel uses.
pub fn metric_names_used() -> Vec<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/monitoring");
    let mut names = std::collections::BTreeSet::new();
    for file in ["alerts.yaml", "dashboard.json"] {
        let text = std::fs::read_to_string(dir.join(file)).expect("a monitoring file");
        let mut rest = text.as_str();
        while let Some(i) = rest.find("etcd_operator_") {
            rest = &rest[i..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            names.insert(rest[..end].to_string());
            rest = &rest[end..];
        }
    }
    names.into_iter().collect()
}
