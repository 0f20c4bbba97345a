//! The monitoring manifests fit together: the operator's Deployment serves
//! its endpoints on the port its probes and its metrics Service name, and
//! the ServiceMonitor example (a Prometheus Operator CRD, whose schema is
//! not available here to validate against) selects that Service and port.

use std::path::PathBuf;

use serde_json::Value;

#[path = "common/monitoring.rs"]
mod monitoring_names;

fn docs(file: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("a deploy manifest");
    text.split("\n---\n")
        .map(|d| serde_saphyr::from_str::<Value>(d).expect("YAML"))
        .collect()
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter().find(|d| d["kind"] == kind).expect(kind)
}

#[test]
fn probes_service_and_servicemonitor_agree_on_the_metrics_port() {
    let operator = docs("deploy/base/operator.yaml");
    let deployment = kind(&operator, "Deployment");
    let c = &deployment["spec"]["template"]["spec"]["containers"][0];
    let port = c["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .find(|p| p["name"] == "metrics")
        .expect("a metrics port");
    let env: Vec<&Value> = c["env"].as_array().expect("env").iter().collect();
    let addr = env
        .iter()
        .find(|e| e["name"] == "ETCD_OPERATOR_METRICS_ADDR")
        .expect("the metrics address set");
    let addr = addr["value"].as_str().expect("a value");
    assert!(
        addr.ends_with(&format!(":{}", port["containerPort"])),
        "{addr} vs {port}"
    );
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(c[probe]["httpGet"]["port"], "metrics", "{probe}");
    }
    let service = kind(&operator, "Service");
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (k, v) in service["spec"]["selector"].as_object().expect("selector") {
        assert_eq!(&pod_labels[k], v, "the Service selects the operator's pod");
    }
    assert_eq!(service["spec"]["ports"][0]["name"], "metrics");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "metrics");

    let monitor = docs("deploy/monitoring/servicemonitor.yaml");
    let monitor = kind(&monitor, "ServiceMonitor");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    let labels = &service["metadata"]["labels"];
    for (k, v) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels")
    {
        assert_eq!(&labels[k], v, "the ServiceMonitor selects the Service");
    }
    // The namespaces are the kustomizations': they agree as rendered
    // (kube_manifests, install::the_service_monitor_is_beside_the_service_it_scrapes).
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
}

/// `promtool` from Debian's `prometheus` (installed by ci/setup), or `None`
/// after saying so (failing under CI).
fn promtool(args: &[&str]) -> Option<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/monitoring");
    match std::process::Command::new("promtool")
        .args(args)
        .current_dir(&dir)
        .output()
    {
        Ok(out) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.status.success(), "promtool {args:?}:\n{text}");
            Some(text)
        }
        Err(e) => {
            let hint = format!("promtool not found ({e}): run `bash ci/setup`");
            assert!(std::env::var_os("CI").is_none(), "{hint}");
            println!("SKIPPED: {hint}");
            None
        }
    }
}

#[test]
fn the_alerting_rules_pass_promtool_and_their_unit_tests() {
    if let Some(text) = promtool(&["check", "rules", "alerts.yaml"]) {
        assert!(text.contains("SUCCESS"), "{text}");
    }
    if let Some(text) = promtool(&["test", "rules", "alerts_test.yaml"]) {
        assert!(text.contains("SUCCESS"), "{text}");
    }
}

#[test]
fn the_prometheusrule_carries_the_rules_file_unchanged() {
    let rules = &docs("deploy/monitoring/alerts.yaml")[0];
    let prometheus_rule = kind(
        &docs("deploy/monitoring/prometheusrule.yaml"),
        "PrometheusRule",
    )
    .clone();
    assert_eq!(
        prometheus_rule["spec"]["groups"], rules["groups"],
        "deploy/monitoring/prometheusrule.yaml differs from alerts.yaml: copy the groups over"
    );
}

#[test]
fn the_alerts_and_the_dashboard_name_metrics_at_all() {
    let names = monitoring_names::metric_names_used();
    assert!(names.len() >= 10, "{names:?}");
}
