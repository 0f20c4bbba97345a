//! Pod facts the Kubernetes target reads.

use std::time::UNIX_EPOCH;

use super::*;

fn pod(json: serde_json::Value) -> Pod {
    serde_json::from_value(json).expect("pod json")
}

#[test]
fn pod_facts() {
    let p = pod(serde_json::json!({
        "metadata": {"name": "demo-0", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "status": {"phase": "Running", "podIP": "127.0.0.1", "startTime": "2026-01-01T00:00:10Z"}
    }));
    assert!(running(&p));
    assert_eq!(client_url(&p).as_deref(), Some("http://127.0.0.1:2379"));
    let t = started(&p).expect("start");
    assert_eq!(
        t.duration_since(UNIX_EPOCH).expect("epoch").as_secs(),
        1_767_225_610
    );
    let v6 = pod(serde_json::json!({"status": {"podIP": "::1"}}));
    assert_eq!(client_url(&v6).as_deref(), Some("http://[::1]:2379"));
    let gone = pod(serde_json::json!({
        "metadata": {"name": "x", "deletionTimestamp": "2026-01-01T00:00:00Z"},
        "status": {"phase": "Running"}
    }));
    assert!(!running(&gone));
    assert!(!running(&pod(
        serde_json::json!({"status": {"phase": "Pending"}})
    )));
}

#[test]
fn since_when_etcd_runs() {
    let p = pod(serde_json::json!({
        "metadata": {"name": "demo-0"},
        "status": {"phase": "Running", "startTime": "2026-01-01T00:00:10Z"}
    }));
    let secs = |t: Option<SystemTime>| {
        t.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_secs())
    };
    // No container statuses: the pod's start, and nothing says it is down.
    assert_eq!(secs(running_since(&p)), Some(1_767_225_610));
    assert!(container_running(&p));
    // Restarted in place: the container's start.
    let restarted = pod(serde_json::json!({
        "status": {"phase": "Running", "startTime": "2026-01-01T00:00:10Z",
            "containerStatuses": [{"name": "etcd", "image": "etcd", "imageID": "",
                "ready": true, "restartCount": 1,
                "state": {"running": {"startedAt": "2026-01-01T00:05:00Z"}}}]}
    }));
    assert_eq!(secs(running_since(&restarted)), Some(1_767_225_900));
    assert!(container_running(&restarted));
    // Crash-looping in a Running pod: etcd does not run.
    let looping = pod(serde_json::json!({
        "status": {"phase": "Running", "startTime": "2026-01-01T00:00:10Z",
            "containerStatuses": [{"name": "etcd", "image": "etcd", "imageID": "",
                "ready": false, "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}
    }));
    assert!(!container_running(&looping));
    assert_eq!(secs(running_since(&looping)), Some(1_767_225_610));
}
