//! Certificates renewed and the CA rotated under load (etcd 3.4 and 3.5):
//! certificates valid for 2 minutes, a CA valid for 90 s, so within about
//! two minutes every certificate is renewed in place and a new CA is
//! trusted, issues, and the old one goes, one member restart at a time.
//! No acknowledged write is lost, and the raft term moves no more than the
//! restarts the rotation needs (renewals restart nothing).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::writer::{lost, writer};
use etcd_operator::crd::EtcdCluster;
use etcd_operator::platform::local::layout::Layout;
use etcd_operator::testing::{Env, client_urls};

/// Longest wait for a whole CA rotation (the CA is due after 60 s).
const ROTATION_WAIT: Duration = Duration::from_secs(240);

fn tls_args(c: &EtcdCluster) -> Vec<String> {
    let t = c
        .status
        .as_ref()
        .and_then(|s| s.tls.clone())
        .expect("status.tls");
    vec![
        format!("--cacert={}", t.ca_file.expect("caFile")),
        format!("--cert={}", t.client_cert_file.expect("clientCertFile")),
        format!("--key={}", t.client_key_file.expect("clientKeyFile")),
    ]
}

/// The highest raft term the members report.
fn term(env: &Env, c: &EtcdCluster) -> u64 {
    let mut args: Vec<String> = tls_args(c);
    args.extend([
        "endpoint".into(),
        "status".into(),
        "-w".into(),
        "json".into(),
    ]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = env.etcdctl(&client_urls(c), &refs);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["Status"]["raftTerm"].as_u64())
        .max()
        .expect("a term")
}

fn count(env: &Env, needle: &str) -> usize {
    std::fs::read_to_string(env.operator_log())
        .unwrap_or_default()
        .matches(needle)
        .count()
}

fn rotated_under_load(version: &str) {
    let mut env = Env::new();
    env.log_filter = "etcd_operator=info".into();
    env.write_manifest(
        "demo.yaml",
        &format!(
            "apiVersion: etcdoperator.dev/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: demo\n\
             spec:\n  size: 3\n  version: \"{version}\"\n  tls:\n    peer: {{mode: Auto}}\n    \
             client: {{mode: Auto}}\n    certificateValidity: 2m\n    caValidity: 90s\n"
        ),
    );
    env.start_operator();
    let first = env.wait_running("demo", 3);
    let first_ca = first
        .status
        .as_ref()
        .and_then(|s| s.tls.as_ref()?.ca_not_after.clone())
        .expect("caNotAfter");
    let term_before = term(&env, &first);
    let stop = Arc::new(AtomicBool::new(false));
    let w = writer(Layout::new(&env.state).status_path("demo"), stop.clone());

    let deadline = Instant::now() + ROTATION_WAIT;
    let done = loop {
        let c = env.status("demo");
        let finished = c.as_ref().and_then(|c| {
            let st = c.status.as_ref()?;
            let t = st.tls.as_ref()?;
            let ok = t.ca_not_after.as_deref() != Some(first_ca.as_str())
                && t.change.is_none()
                && st.phase.as_str() == "Running"
                && st.members.iter().filter(|m| m.ready).count() == 3;
            ok.then(|| c.clone())
        });
        if let Some(c) = finished {
            break c;
        }
        assert!(
            Instant::now() < deadline,
            "no finished CA rotation within {ROTATION_WAIT:?}; status: {:?}\nlog tail:\n{}",
            c.and_then(|c| c.status)
                .map(|s| (s.phase, s.tls, s.last_action)),
            std::fs::read_to_string(env.operator_log())
                .unwrap_or_default()
                .lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .join("\n")
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    stop.store(true, Ordering::Relaxed);
    let (acked, failures) = w.join().expect("writer");
    assert!(
        acked.len() > 100,
        "the writer wrote ({} acked)",
        acked.len()
    );
    // The files status names were renewed in place and still work.
    let args = tls_args(&done);
    let lost = lost(&env, &done, &args, &acked);
    assert!(
        lost.is_empty(),
        "lost acknowledged writes: {lost:?} (of {}; {failures} unacknowledged)",
        acked.len()
    );
    let renewals = count(&env, "renew the certificates of member");
    let restarts = count(&env, "restart member");
    assert!(
        renewals >= 3,
        "every member's certificates renewed ({renewals})"
    );
    // Two rolling restarts: trusting the new CA, then dropping the old one.
    assert!(
        restarts >= 6,
        "members restarted to read their CAs ({restarts})"
    );
    let elections = term(&env, &done) - term_before;
    assert!(
        elections <= restarts as u64,
        "{elections} elections for {restarts} restarts and {renewals} renewals"
    );
}

#[test]
fn rotation_under_load_3_4() {
    rotated_under_load("3.4.23");
}

#[test]
fn rotation_under_load_3_5() {
    rotated_under_load("3.5.1");
}
