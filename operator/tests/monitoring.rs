//! The monitoring manifests fit together: the operator's Deployment serves
//! its endpoints on the port its probes and its metrics Service name, and
//! the ServiceMonitor example (a Prometheus Operator CRD, whose schema is
//! not available here to validate against) selects that Service and port.

use std::path::PathBuf;

use serde_json::Value;

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
    let operator = docs("deploy/operator.yaml");
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
    let ns = &service["metadata"]["namespace"];
    assert_eq!(&monitor["spec"]["namespaceSelector"]["matchNames"][0], ns);
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
}
