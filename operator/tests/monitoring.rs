//! The monitoring manifests fit together: the operator's Deployment serves
//! its endpoints on the port its probes and its metrics Service name, the
//! ServiceMonitor example (a Prometheus Operator CRD, whose schema is not
//! available here to validate against) selects that Service and port with
//! the job the operator-down alerts read, the PodMonitor finds the member
//! pods the operator builds and their metrics port, and every alert's
//! runbook_url is a section of the runbook.

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
    // The cluster's own `namespace` label is kept, not renamed
    // exported_namespace.
    assert_eq!(monitor["spec"]["endpoints"][0]["honorLabels"], true);
    // The job is the Service's label the jobLabel names: the one the
    // operator-down alerts ask `up` about.
    let job_label = monitor["spec"]["jobLabel"].as_str().expect("jobLabel");
    let job = labels[job_label]
        .as_str()
        .expect("the Service has that label");
    let rules = &docs("deploy/monitoring/alerts.yaml")[0];
    for name in ["EtcdOperatorDown", "EtcdOperatorReplicaDown"] {
        let expr = alerts(rules)
            .into_iter()
            .find(|a| a["alert"] == name)
            .and_then(|a| a["expr"].as_str().map(str::to_string))
            .unwrap_or_else(|| panic!("no alert {name}"));
        assert!(
            expr.contains(&format!("up{{job=\"{job}\"}}")),
            "{name}: {expr} does not ask about job {job}"
        );
    }
}

/// Every alert rule of a rules file's groups.
fn alerts(rules: &Value) -> Vec<&Value> {
    rules["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules").iter())
        .filter(|r| r.get("alert").is_some())
        .collect()
}

/// The anchors of a Markdown page's headings, as mdBook and GitHub make
/// them: lower case, spaces as `-`, other punctuation dropped.
fn anchors(markdown: &str) -> Vec<String> {
    markdown
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|h| {
            h.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

#[test]
fn every_alert_has_a_runbook_url_to_its_own_section_of_the_runbook() {
    const RUNBOOK: &str =
        "https://github.com/etcdoperator/etcd-operator/blob/main/docs/src/runbook.md#";
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/src/runbook.md");
    let runbook = std::fs::read_to_string(path).expect("docs/src/runbook.md");
    let sections = anchors(&runbook);
    let rules = &docs("deploy/monitoring/alerts.yaml")[0];
    let all = alerts(rules);
    assert!(all.len() >= 14, "{}", all.len());
    for alert in all {
        let name = alert["alert"].as_str().expect("a name");
        let url = alert["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} has no runbook_url"));
        let anchor = url
            .strip_prefix(RUNBOOK)
            .unwrap_or_else(|| panic!("{name}: {url} is not a section of {RUNBOOK}"));
        assert_eq!(anchor, name.to_lowercase(), "{name}: its own section");
        assert!(
            sections.iter().any(|s| s == anchor),
            "{name}: docs/src/runbook.md has no heading `### {name}` (#{anchor})"
        );
    }
}

#[test]
fn the_podmonitor_scrapes_the_members_the_operator_builds_on_their_metrics_port() {
    use etcd_operator::crd::{EtcdCluster, EtcdClusterSpec, StoragePolicy};
    use etcd_operator::member::{MemberAddr, flags::METRICS_PORT};
    use etcd_operator::platform::kube::pod::{DEFAULT_IMAGE, member_pod};
    use kube::Resource;

    let monitor = docs("deploy/monitoring/podmonitor.yaml");
    let monitor = kind(&monitor, "PodMonitor");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    let mut resource = EtcdCluster::new("demo", EtcdClusterSpec::minimal(3, "3.5.1"));
    resource.metadata.uid = Some("uid-1".into());
    let owner = resource
        .controller_owner_ref(&())
        .expect("an owner reference");
    let url = |port: u16| format!("http://demo-0.demo.default.svc:{port}");
    let addr = MemberAddr {
        name: "demo-0".into(),
        peer_url: url(2380),
        client_url: url(2379),
    };
    let config = etcd_operator::testing::bootstrap_config(
        addr,
        "3.5.1".parse().expect("a version"),
        "demo-0=http://demo-0.demo.default.svc:2380",
        "demo",
    );
    let pod = serde_json::to_value(member_pod(
        "demo",
        &config,
        StoragePolicy::Persistent,
        DEFAULT_IMAGE,
        &owner,
    ))
    .expect("JSON");
    let labels = &pod["metadata"]["labels"];
    let selector = &monitor["spec"]["selector"];
    for (k, v) in selector["matchLabels"].as_object().expect("matchLabels") {
        assert_eq!(&labels[k], v, "the PodMonitor selects the member pod");
    }
    for e in selector["matchExpressions"]
        .as_array()
        .expect("matchExpressions")
    {
        assert_eq!(e["operator"], "Exists");
        let key = e["key"].as_str().expect("a key");
        assert!(labels.get(key).is_some(), "member pods carry {key}");
    }
    let job_label = monitor["spec"]["jobLabel"].as_str().expect("jobLabel");
    assert_eq!(labels[job_label], "etcd", "the job the mixin selects");

    // The port it finds the pod by is declared, and the address is
    // rewritten to the metrics listener the pod's etcd is started with.
    let endpoint = &monitor["spec"]["podMetricsEndpoints"][0];
    let container = &pod["spec"]["containers"][0];
    let port = endpoint["port"].as_str().expect("a port name");
    assert!(
        container["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .any(|p| p["name"] == port),
        "{port} is not a port of the member's container"
    );
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let listen = args
        .iter()
        .position(|a| *a == "--listen-metrics-urls")
        .and_then(|i| args.get(i + 1))
        .expect("--listen-metrics-urls");
    assert_eq!(*listen, format!("http://0.0.0.0:{METRICS_PORT}"));
    let rewrite = &endpoint["relabelings"][0];
    assert_eq!(rewrite["targetLabel"], "__address__");
    assert_eq!(rewrite["replacement"], format!("${{1}}:{METRICS_PORT}"));
    assert_eq!(endpoint["scheme"], "http");
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
