//! The objects the platform builds, checked field by field that matters.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::fixtures::{Seen, UID, config};
use crate::crd::StoragePolicy;

fn pod(version: &str, storage: StoragePolicy) -> Value {
    Seen::pod("demo-1", version, storage).json()
}

fn etcd(pod: &Value) -> &Value {
    &pod["spec"]["containers"][0]
}

#[test]
fn member_pod_runs_etcd_with_the_local_flags_on_its_dns_name() {
    let p = pod("3.5.1", StoragePolicy::Persistent);
    let c = etcd(&p);
    assert_eq!(c["image"], "quay.io/coreos/etcd:v3.5.1");
    assert_eq!(c["command"], json!(["/usr/local/bin/etcd"]));
    let host = "demo-1.demo.default.svc";
    let args: Vec<String> = serde_json::from_value(c["args"].clone()).expect("args");
    let flag = |f: &str| {
        let at = args.iter().position(|a| a == f)?;
        args.get(at + 1).cloned()
    };
    let initial = config("demo-1", "3.5.1").initial_cluster;
    for (name, value) in [
        ("--name", "demo-1".to_string()),
        ("--data-dir", "/var/lib/etcd/data".into()),
        ("--listen-peer-urls", "http://0.0.0.0:2380".into()),
        ("--listen-client-urls", "http://0.0.0.0:2379".into()),
        (
            "--initial-advertise-peer-urls",
            format!("http://{host}:2380"),
        ),
        ("--advertise-client-urls", format!("http://{host}:2379")),
        ("--initial-cluster", initial),
        ("--initial-cluster-state", "new".into()),
        ("--initial-cluster-token", "demo-token".into()),
    ] {
        assert_eq!(flag(name), Some(value), "{name}");
    }
    // Every other flag is the local platform's, in its order; the listen
    // URLs (metrics included) are on every address of the pod instead of
    // the member's own.
    let local = crate::member::flags::etcd_args(
        &config("demo-1", "3.5.1"),
        std::path::Path::new("/var/lib/etcd/data"),
        std::path::Path::new("/etc/etcd/tls"),
        crate::member::flags::Listen::Advertised,
    );
    assert_eq!(args.len(), local.len(), "{args:?}\n{local:?}");
    assert_eq!(
        flag("--listen-metrics-urls"),
        Some("http://0.0.0.0:2381".into())
    );
    let listen = [
        "--listen-peer-urls",
        "--listen-client-urls",
        "--listen-metrics-urls",
    ];
    for (i, (arg, local)) in args.iter().zip(&local).enumerate() {
        let listen_url = i > 0 && listen.contains(&args[i - 1].as_str());
        if !listen_url {
            assert_eq!(arg, local, "argument {i}");
        }
    }
    assert_eq!(p["spec"]["hostname"], "demo-1");
    assert_eq!(p["spec"]["subdomain"], "demo");
    assert_eq!(p["spec"]["restartPolicy"], "Always");
    assert_eq!(p["spec"]["enableServiceLinks"], false);
    assert_eq!(c["terminationMessagePolicy"], "FallbackToLogsOnError");
}

/// A 3.4 member's pod runs with raft's pre-vote, as a local 3.4 member
/// does (3.5 has it on by default).
#[test]
fn a_3_4_member_pod_runs_with_pre_vote() {
    for (version, want) in [("3.4.23", true), ("3.5.1", false)] {
        let p = pod(version, StoragePolicy::Persistent);
        let args = etcd(&p)["args"].as_array().cloned().unwrap_or_default();
        let pre_vote = crate::member::flags::PRE_VOTE;
        assert_eq!(args.iter().any(|a| a == pre_vote), want, "{version}");
    }
}

#[test]
fn member_pod_labels_owner_and_config() {
    let p = pod("3.5.1", StoragePolicy::Persistent);
    let m = &p["metadata"];
    assert_eq!(
        m["labels"],
        json!({
            "etcdoperator.dev/cluster": "demo",
            "etcdoperator.dev/member": "demo-1",
            "app.kubernetes.io/name": "etcd",
            "app.kubernetes.io/managed-by": "etcd-operator",
        })
    );
    let owner = &m["ownerReferences"][0];
    assert_eq!(owner["kind"], "EtcdCluster");
    assert_eq!(owner["apiVersion"], "etcdoperator.dev/v1alpha1");
    assert_eq!(owner["uid"], UID);
    assert_eq!(owner["controller"], true);
    let recorded = m["annotations"]["etcdoperator.dev/member-config"]
        .as_str()
        .expect("config annotation");
    let recorded: crate::member::MemberConfig =
        serde_json::from_str(recorded).expect("config json");
    assert_eq!(recorded, config("demo-1", "3.5.1"));
    // It is a valid Pod.
    let _: Pod = Seen(p.clone()).typed();
}

#[test]
fn data_lives_on_the_claim_or_in_an_empty_dir() {
    let tmp = json!({"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}});
    let persistent = pod("3.5.1", StoragePolicy::Persistent);
    assert_eq!(
        persistent["spec"]["volumes"],
        json!([
            {"name": "data", "persistentVolumeClaim": {"claimName": "demo-1-data"}},
            tmp,
        ])
    );
    let ephemeral = pod("3.5.1", StoragePolicy::Ephemeral);
    assert_eq!(
        ephemeral["spec"]["volumes"],
        json!([{"name": "data", "emptyDir": {}}, tmp])
    );
    assert_eq!(
        etcd(&ephemeral)["volumeMounts"],
        json!([
            {"name": "data", "mountPath": "/var/lib/etcd"},
            {"name": "tmp", "mountPath": "/tmp"},
        ])
    );
    assert_eq!(
        etcd(&ephemeral)["securityContext"]["readOnlyRootFilesystem"],
        true
    );
}

#[test]
fn probes_follow_the_version_and_never_need_a_leader_to_live() {
    for (version, path) in [
        ("3.4.23", "/health"),
        ("3.5.1", "/health"),
        ("3.5.13", "/readyz"),
    ] {
        let p = pod(version, StoragePolicy::Persistent);
        let c = etcd(&p);
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], path, "{version}");
        assert_eq!(c["readinessProbe"]["httpGet"]["port"], 2379);
        assert_eq!(c["livenessProbe"]["tcpSocket"]["port"], 2379, "{version}");
        assert_eq!(c["livenessProbe"]["failureThreshold"], 6);
    }
}

#[test]
fn readiness_shows_within_about_a_second() {
    // Seen on a real API server: a re-created pod became Ready about 4 s
    // after etcd was (the first readiness probe at the 5 s period).
    let p = pod("3.5.1", StoragePolicy::Persistent);
    let c = etcd(&p);
    assert_eq!(c["readinessProbe"]["periodSeconds"], 1);
    assert!(c["readinessProbe"].get("initialDelaySeconds").is_none());
    let startup = &c["startupProbe"];
    assert_eq!(
        startup["tcpSocket"]["port"], 2379,
        "no leader needed to start"
    );
    assert_eq!(startup["periodSeconds"], 1);
    assert!(
        startup["failureThreshold"].as_i64() >= Some(300),
        "{startup}"
    );
    assert!(c["livenessProbe"].get("initialDelaySeconds").is_none());
}

#[test]
fn pods_run_unprivileged_with_modest_requests() {
    let p = pod("3.5.1", StoragePolicy::Persistent);
    let sc = &p["spec"]["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true);
    assert_eq!(sc["fsGroup"], 65532);
    assert_eq!(
        etcd(&p)["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    assert_eq!(
        etcd(&p)["resources"],
        json!({"requests": {"cpu": "100m", "memory": "128Mi"}})
    );
}

#[test]
fn claim_holds_the_config_and_a_fixed_size() {
    let c = Seen::claim("demo-1", "3.5.1").json();
    assert_eq!(c["metadata"]["name"], "demo-1-data");
    assert_eq!(c["metadata"]["labels"]["etcdoperator.dev/member"], "demo-1");
    assert_eq!(c["metadata"]["ownerReferences"][0]["uid"], UID);
    assert_eq!(
        c["spec"],
        json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}})
    );
    assert!(c["metadata"]["annotations"]["etcdoperator.dev/member-config"].is_string());
}

#[test]
fn services_and_budget() {
    use super::super::objects::{client_service, disruption_budget, peer_service};
    use kube::Resource;
    let r = super::fixtures::resource(3, "3.5.1", StoragePolicy::Persistent);
    let owner = r.controller_owner_ref(&()).expect("owner");
    let selector = json!({"etcdoperator.dev/cluster": "demo", "app.kubernetes.io/name": "etcd"});
    let peer = serde_json::to_value(peer_service("demo", &owner)).expect("json");
    assert_eq!(peer["metadata"]["name"], "demo");
    assert_eq!(peer["spec"]["clusterIP"], "None");
    assert_eq!(peer["spec"]["publishNotReadyAddresses"], true);
    assert_eq!(peer["spec"]["selector"], selector);
    let ports: Vec<i64> = peer["spec"]["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .filter_map(|p| p["port"].as_i64())
        .collect();
    assert_eq!(ports, [2379, 2380]);
    let client = serde_json::to_value(client_service("demo", &owner)).expect("json");
    assert_eq!(client["metadata"]["name"], "demo-client");
    assert_eq!(client["spec"]["ports"][0]["port"], 2379);
    assert!(client["spec"].get("publishNotReadyAddresses").is_none());
    let pdb = serde_json::to_value(disruption_budget("demo", 3, &owner)).expect("json");
    assert_eq!(pdb["spec"]["minAvailable"], 2);
    assert_eq!(pdb["spec"]["selector"]["matchLabels"], selector);
    assert!(pdb["spec"].get("maxUnavailable").is_none());
}

/// A member that waits for a quorum serves nothing on its client port but
/// its metrics: the operator reads them at the pod's IP, as it reads a
/// local member's at its own address.
#[test]
fn a_member_pods_metrics_are_read_at_its_ip() {
    let mut p: Pod = serde_json::from_value(pod("3.5.1", StoragePolicy::Persistent)).expect("pod");
    assert_eq!(
        crate::platform::kube::members::metrics_url(&p),
        None,
        "no IP yet"
    );
    p.status = Some(k8s_openapi::api::core::v1::PodStatus {
        pod_ip: Some("10.1.2.3".into()),
        ..Default::default()
    });
    assert_eq!(
        crate::platform::kube::members::metrics_url(&p).as_deref(),
        Some("http://10.1.2.3:2381/metrics")
    );
    // A pod made before its etcd had a metrics listener has none to read.
    if let Some(spec) = p.spec.as_mut() {
        for c in &mut spec.containers {
            if let Some(args) = c.args.as_mut() {
                let at = args
                    .iter()
                    .position(|a| a == "--listen-metrics-urls")
                    .expect("listener");
                args.drain(at..at + 2);
            }
        }
    }
    assert_eq!(crate::platform::kube::members::metrics_url(&p), None);
}

/// etcd gets the kubelet's SIGTERM itself and the kubelet waits no longer
/// than etcd's own stop can take: etcd is the container's command (PID 1,
/// no shell that would swallow the signal), no hook runs before it, and
/// the grace is twice etcd's request timeout (5 s plus two election
/// timeouts: a leadership handover, then RPCs in flight) plus 2 s.
#[test]
fn etcd_gets_sigterm_itself_with_a_grace_of_its_own_stop_bound() {
    use crate::member::Tuning;
    use crate::platform::kube::pod::{ETCD_BINARY, termination_grace_secs};
    for (election_ms, grace) in [
        (None, 16),
        (Some(1000), 16),
        (Some(5000), 32),
        (Some(250), 13),
    ] {
        let mut c = config("demo-1", "3.4.23");
        c.tuning = Tuning::new(None, election_ms);
        let p = Seen::pod_of(&c, StoragePolicy::Persistent).json();
        let e = etcd(&p);
        assert_eq!(e["command"], json!([ETCD_BINARY]), "etcd itself, no shell");
        assert!(
            e.get("lifecycle").is_none(),
            "no preStop hook: {}",
            e["lifecycle"]
        );
        assert_eq!(p["spec"]["containers"].as_array().map(Vec::len), Some(1));
        assert!(
            p["spec"].get("shareProcessNamespace").is_none(),
            "etcd is PID 1"
        );
        assert_eq!(
            p["spec"]["terminationGracePeriodSeconds"],
            json!(grace),
            "election timeout {election_ms:?}"
        );
        assert_eq!(termination_grace_secs(&c), grace);
    }
}

#[test]
fn readyz_only_where_etcd_serves_it() {
    use crate::platform::kube::pod::readiness_path;
    use crate::version::Version;
    for (v, path) in [
        (Version::new(3, 4, 23), "/health"),
        (Version::new(3, 4, 29), "/health"),
        (Version::new(3, 4, 40), "/health"),
        (Version::new(3, 5, 1), "/health"),
        (Version::new(3, 5, 11), "/readyz"),
        (Version::new(3, 6, 0), "/readyz"),
    ] {
        assert_eq!(readiness_path(v), path, "{v}");
    }
}

#[test]
fn image_tag_is_v_and_the_version() {
    use crate::platform::kube::pod::{DEFAULT_IMAGE, image};
    use crate::version::Version;
    assert_eq!(
        image(DEFAULT_IMAGE, Version::new(3, 5, 1)),
        "quay.io/coreos/etcd:v3.5.1"
    );
}
