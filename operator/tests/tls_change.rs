//! Turning TLS on and off for a running 3-member cluster (etcd 3.4 and
//! 3.5) while a writer writes: every member moves to `https://` peer and
//! client URLs one at a time and back, and no acknowledged write is lost.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::writer::{lost, writer};
use etcd_operator::crd::EtcdCluster;
use etcd_operator::platform::local::layout::Layout;
use etcd_operator::testing::{Env, manifest};

/// Waits until every member's peer and client URLs have the scheme asked
/// for, every member is ready and no TLS change is under way.
fn wait_scheme(env: &Env, scheme: &str) -> EtcdCluster {
    env.wait_for(&format!("every member on {scheme}://"), || {
        let c = env.status("demo")?;
        let st = c.status.as_ref()?;
        let done = st.members.len() == 3
            && st.phase.as_str() == "Running"
            && st.members.iter().all(|m| {
                m.ready
                    && m.client_url.starts_with(&format!("{scheme}://"))
                    && m.peer_url.starts_with(&format!("{scheme}://"))
            })
            && st.tls.as_ref().is_none_or(|t| t.change.is_none());
        done.then_some(c.clone())
    })
}

fn on_and_off_without_losing_a_write(version: &str) {
    let mut env = Env::new();
    let plain = manifest("demo", 3, version);
    env.write_manifest("demo.yaml", &plain);
    env.start_operator();
    env.wait_running("demo", 3);
    let status = Layout::new(&env.state).status_path("demo");
    let stop = Arc::new(AtomicBool::new(false));
    let w = writer(status, stop.clone());

    let with_tls = format!("{plain}  tls:\n    peer: {{mode: Auto}}\n    client: {{mode: Auto}}\n");
    env.write_manifest("demo.yaml", &with_tls);
    let on = wait_scheme(&env, "https");
    let tls = on
        .status
        .as_ref()
        .and_then(|s| s.tls.clone())
        .expect("status.tls");
    assert_eq!((tls.peer.as_str(), tls.client.as_str()), ("Auto", "Auto"));
    // Members' TLS settings were restarted into place, one at a time: the
    // plain listener is gone.
    for m in &on.status.as_ref().expect("status").members {
        let plain_url = m.client_url.replace("https://", "http://");
        let out = env.etcdctl(&[plain_url], &["get", "key-0"]);
        assert!(!out.status.success(), "{} still serves plain http", m.name);
    }

    env.write_manifest("demo.yaml", &plain);
    let off = wait_scheme(&env, "http");
    assert!(
        off.status.as_ref().expect("status").tls.is_none(),
        "status.tls gone"
    );

    stop.store(true, Ordering::Relaxed);
    let (acked, failures) = w.join().expect("writer");
    assert!(acked.len() > 50, "the writer wrote ({} acked)", acked.len());
    let lost = lost(&env, &off, &[], &acked);
    assert!(
        lost.is_empty(),
        "lost acknowledged writes: {lost:?} (of {}; {failures} unacknowledged)",
        acked.len()
    );
}

#[test]
fn tls_on_and_off_3_4() {
    on_and_off_without_losing_a_write("3.4.23");
}

#[test]
fn tls_on_and_off_3_5() {
    on_and_off_without_losing_a_write("3.5.1");
}
