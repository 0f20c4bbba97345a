//! Turning TLS on and off for a running 3-member cluster (etcd 3.4 and
//! 3.5) while a writer writes: every member moves to `https://` peer and
//! client URLs one at a time and back, and no acknowledged write is lost.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use etcd_operator::crd::EtcdCluster;
use etcd_operator::platform::local::layout::{Layout, read_json};
use etcd_operator::testing::{Env, manifest};
use etcd_operator::tls::ClientTls;

/// Writes `key-N` = `N` one after the other through whichever member
/// answers (from the published status, TLS or not) until stopped; returns
/// the writes etcd acknowledged.
fn writer(status: PathBuf, stop: Arc<AtomicBool>) -> JoinHandle<(Vec<u64>, usize)> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let mut acked = Vec::new();
            let mut failures = 0;
            let mut n = 0u64;
            let mut client: Option<Client> = None;
            let mut turn = 0usize;
            while !stop.load(Ordering::Relaxed) {
                if client.is_none() {
                    client = connect(&status, turn).await;
                    turn += 1;
                    if client.is_none() {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                }
                let Some(c) = client.as_mut() else { continue };
                let put = c.put(format!("key-{n}"), n.to_string(), None);
                match tokio::time::timeout(Duration::from_secs(3), put).await {
                    Ok(Ok(_)) => {
                        acked.push(n);
                        n += 1;
                    }
                    _ => {
                        // Not acknowledged: it may or may not have landed.
                        failures += 1;
                        n += 1;
                        client = None;
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            (acked, failures)
        })
    })
}

async fn connect(status: &PathBuf, turn: usize) -> Option<Client> {
    let c: EtcdCluster = read_json(status).ok()??;
    let st = c.status.as_ref()?;
    let urls: Vec<&str> = st.members.iter().map(|m| m.client_url.as_str()).collect();
    let url = *urls.get(turn % urls.len().max(1))?;
    let mut opts = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(3));
    if url.starts_with("https://") {
        let tls = ClientTls::from_status(Some(st)).ok()??;
        opts = opts.with_tls(tls.options());
    }
    let connect = Client::connect([url], Some(opts));
    tokio::time::timeout(Duration::from_secs(3), connect)
        .await
        .ok()?
        .ok()
}

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
    // Every acknowledged write is there.
    let urls: Vec<String> = off
        .status
        .iter()
        .flat_map(|s| s.members.iter().map(|m| m.client_url.clone()))
        .collect();
    let out = env.etcdctl(&urls, &["get", "key-", "--prefix", "-w", "json"]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let mut found = std::collections::HashSet::new();
    for kv in v["kvs"].as_array().into_iter().flatten() {
        let value = kv["value"].as_str().unwrap_or_default();
        found.insert(value.to_string());
    }
    let lost: Vec<&u64> = acked
        .iter()
        .filter(|n| !found.contains(&base64(&n.to_string())))
        .collect();
    assert!(
        lost.is_empty(),
        "lost acknowledged writes: {lost:?} (of {}; {failures} unacknowledged)",
        acked.len()
    );
}

fn base64(s: &str) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let b = s.as_bytes();
    let mut out = String::new();
    for chunk in b.chunks(3) {
        let n = chunk.iter().fold(0u32, |a, &x| (a << 8) | u32::from(x)) << (8 * (3 - chunk.len()));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn tls_on_and_off_3_4() {
    on_and_off_without_losing_a_write("3.4.23");
}

#[test]
fn tls_on_and_off_3_5() {
    on_and_off_without_losing_a_write("3.5.1");
}
