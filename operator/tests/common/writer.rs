//! A writer for tests that change a cluster under load: it writes
//! `key-N` = `N` one after the other through whichever member answers
//! (the published status's URLs, with its client certificate when they are
//! `https://`), and [`lost`] says which acknowledged writes are missing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use etcd_operator::crd::EtcdCluster;
use etcd_operator::platform::local::layout::read_json;
use etcd_operator::testing::Env;
use etcd_operator::tls::ClientTls;

/// Writes `key-N` = `N` one after the other through whichever member
/// answers (from the published status, TLS or not) until stopped; returns
/// the writes etcd acknowledged.
pub fn writer(status: PathBuf, stop: Arc<AtomicBool>) -> JoinHandle<(Vec<u64>, usize)> {
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

async fn connect(status: &Path, turn: usize) -> Option<Client> {
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

/// The acknowledged writes not in the cluster (read through `c`'s URLs,
/// with `tls_args` for etcdctl when they are `https://`).
pub fn lost(env: &Env, c: &EtcdCluster, tls_args: &[String], acked: &[u64]) -> Vec<u64> {
    let urls: Vec<String> = c
        .status
        .iter()
        .flat_map(|s| s.members.iter().map(|m| m.client_url.clone()))
        .collect();
    let mut args: Vec<&str> = tls_args.iter().map(String::as_str).collect();
    args.extend(["get", "key-", "--prefix", "-w", "json"]);
    let out = env.etcdctl(&urls, &args);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let mut found = std::collections::HashSet::new();
    for kv in v["kvs"].as_array().into_iter().flatten() {
        let value = kv["value"].as_str().unwrap_or_default();
        found.insert(value.to_string());
    }
    acked
        .iter()
        .filter(|n| !found.contains(&base64(&n.to_string())))
        .copied()
        .collect()
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
