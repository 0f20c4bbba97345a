//! A client that writes one key after another in a thread of its own, for
//! tests and benchmarks that must know which writes etcd acknowledged when
//! a fault struck: every put that returned `Ok` is recorded with its
//! revision and time. Stopped (and joined) on drop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions};

/// One acknowledged write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acked {
    /// The key written (`PREFIX` and a zero-padded sequence number).
    pub key: String,
    /// The value written.
    pub value: String,
    /// The revision etcd answered with.
    pub revision: i64,
    /// When the answer came.
    pub at: Instant,
}

/// The writes of `acked` that `found` (key to value, as read back) does
/// not hold with their value.
pub fn not_found<'a>(
    acked: &'a [Acked],
    found: &std::collections::HashMap<String, String>,
) -> Vec<&'a Acked> {
    acked
        .iter()
        .filter(|a| found.get(&a.key) != Some(&a.value))
        .collect()
}

/// A sequential writer of `PREFIX000000`, `PREFIX000001`, ...
#[derive(Debug)]
pub struct Writer {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<Acked>>>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts writing to `endpoints`, each put bounded by a short timeout
    /// (failed or timed-out puts are not recorded; the next key follows).
    pub fn start(endpoints: Vec<String>, prefix: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let (s, a, prefix) = (stop.clone(), acked.clone(), prefix.to_string());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(write(endpoints, prefix, s, a));
        });
        Writer {
            stop,
            acked,
            thread: Some(thread),
        }
    }

    /// The writes acknowledged so far.
    pub fn acked(&self) -> Vec<Acked> {
        self.acked.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Stops writing and returns every acknowledged write.
    pub fn stop(mut self) -> Vec<Acked> {
        self.halt();
        self.acked()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.halt();
    }
}

const PUT_TIMEOUT: Duration = Duration::from_secs(2);

async fn write(
    endpoints: Vec<String>,
    prefix: String,
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<Acked>>>,
) {
    let opts = ConnectOptions::new()
        .with_connect_timeout(PUT_TIMEOUT)
        .with_timeout(PUT_TIMEOUT);
    let mut client = None;
    let mut seq = 0u64;
    while !stop.load(Ordering::SeqCst) {
        if client.is_none() {
            let connect = Client::connect(endpoints.clone(), Some(opts.clone()));
            client = tokio::time::timeout(PUT_TIMEOUT, connect)
                .await
                .ok()
                .and_then(Result::ok);
            if client.is_none() {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        }
        let Some(c) = client.as_mut() else { continue };
        let key = format!("{prefix}{seq:06}");
        let value = format!("value-{seq}");
        seq += 1;
        match tokio::time::timeout(PUT_TIMEOUT, c.put(key.clone(), value.clone(), None)).await {
            Ok(Ok(r)) => {
                let revision = r.header().map(|h| h.revision()).unwrap_or_default();
                let at = Instant::now();
                let mut list = acked.lock().unwrap_or_else(|e| e.into_inner());
                list.push(Acked {
                    key,
                    value,
                    revision,
                    at,
                });
            }
            _ => {
                client = None; // reconnect: members may have moved
            }
        }
    }
}

/// Every key under `prefix` and its value, read from `endpoints`.
pub fn read_prefix(endpoints: &[String], prefix: &str) -> Vec<(String, String)> {
    read_prefix_as(endpoints, prefix, None)
}

/// [`read_prefix`] as `auth` (a standby's reader or root: etcd's auth is
/// on there).
pub fn read_prefix_as(
    endpoints: &[String],
    prefix: &str,
    auth: Option<&crate::etcd::Credentials>,
) -> Vec<(String, String)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let opts = ConnectOptions::new().with_timeout(Duration::from_secs(10));
        let opts = crate::etcd::reach(opts, "", None, auth);
        let mut c = Client::connect(endpoints, Some(opts))
            .await
            .expect("connect");
        let r = c
            .get(prefix, Some(etcd_client::GetOptions::new().with_prefix()))
            .await
            .expect("get");
        r.kvs()
            .iter()
            .map(|kv| {
                (
                    String::from_utf8_lossy(kv.key()).to_string(),
                    String::from_utf8_lossy(kv.value()).to_string(),
                )
            })
            .collect()
    })
}
