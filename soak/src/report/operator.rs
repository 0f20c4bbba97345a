//! The operator's own counters at the end of a run, read from its
//! `/metrics` (local platform: the runner starts it with `--metrics-addr`),
//! as a table of report.md; the whole scrape is kept as
//! `operator-metrics.txt`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use etcd_operator::metrics::scrape::{Sample, parse};

/// Sums of the series of `name` for `cluster`, by the value of `label`.
fn by(samples: &[Sample], name: &str, cluster: &str, label: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for s in samples
        .iter()
        .filter(|s| s.name == name && s.labels.get("cluster").map(String::as_str) == Some(cluster))
    {
        let key = s.labels.get(label).cloned().unwrap_or_default();
        *out.entry(key).or_insert(0.0) += s.value;
    }
    out
}

fn one(samples: &[Sample], name: &str, cluster: &str) -> Option<f64> {
    by(samples, name, cluster, "cluster").into_values().next()
}

fn list(m: &BTreeMap<String, f64>) -> String {
    if m.is_empty() {
        return "none".into();
    }
    let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k} {v:.0}")).collect();
    parts.join(", ")
}

/// The "Operator metrics" section of report.md for `cluster`, from the
/// text of a scrape (`None`: not read, and why).
pub fn section(scrape: Result<&str, &str>, cluster: &str) -> String {
    let mut o = String::from("\n## Operator metrics\n\n");
    let text = match scrape {
        Ok(t) => t,
        Err(why) => {
            let _ = writeln!(o, "Not read: {why}.");
            return o;
        }
    };
    let s = parse(text);
    let reconciles = by(&s, "etcd_operator_reconciles_total", cluster, "outcome");
    let steps = by(&s, "etcd_operator_steps_total", cluster, "kind");
    let errors = by(&s, "etcd_operator_errors_total", cluster, "category");
    let backups = by(&s, "etcd_operator_backups_total", cluster, "result");
    let opt = |v: Option<f64>, unit: &str| v.map_or("-".to_string(), |v| format!("{v:.3}{unit}"));
    let rows = [
        ("reconciles by outcome", list(&reconciles)),
        ("steps by kind", list(&steps)),
        ("errors by category", list(&errors)),
        (
            "leader changes seen",
            one(&s, "etcd_operator_leader_changes_total", cluster)
                .map_or("-".to_string(), |v| format!("{v:.0}")),
        ),
        ("backups", list(&backups)),
        (
            "last recovery",
            opt(
                one(&s, "etcd_operator_last_recovery_duration_seconds", cluster),
                " s",
            ),
        ),
    ];
    let _ = writeln!(
        o,
        "At the end of the run, cluster `{cluster}` (all in `operator-metrics.txt`):\n"
    );
    let _ = writeln!(o, "| counter | value |\n|---|---|");
    for (k, v) in rows {
        let _ = writeln!(o, "| {k} | {v} |");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_counters_of_the_cluster_only() {
        let text = "etcd_operator_reconciles_total{namespace=\"\",cluster=\"c\",outcome=\"acted\"} 4\n\
            etcd_operator_reconciles_total{namespace=\"\",cluster=\"c\",outcome=\"converged\"} 10\n\
            etcd_operator_reconciles_total{namespace=\"\",cluster=\"other\",outcome=\"acted\"} 99\n\
            etcd_operator_steps_total{namespace=\"\",cluster=\"c\",kind=\"move_leader\"} 2\n\
            etcd_operator_leader_changes_total{namespace=\"\",cluster=\"c\"} 3\n\
            etcd_operator_last_recovery_duration_seconds{namespace=\"\",cluster=\"c\"} 0.25\n";
        let md = section(Ok(text), "c");
        assert!(
            md.contains("| reconciles by outcome | acted 4, converged 10 |"),
            "{md}"
        );
        assert!(md.contains("| steps by kind | move_leader 2 |"), "{md}");
        assert!(md.contains("| leader changes seen | 3 |"), "{md}");
        assert!(md.contains("| last recovery | 0.250 s |"), "{md}");
        assert!(md.contains("| errors by category | none |"), "{md}");
        assert!(!md.contains("99"), "{md}");
        let md = section(Err("the operator runs in the cluster"), "c");
        assert!(
            md.contains("Not read: the operator runs in the cluster."),
            "{md}"
        );
    }
}
