//! etcd clients, one per member URL, shared by the load and the probes.
//! Every call is bounded by a timeout (a paused member accepts connections
//! but never answers); a client whose call failed is dropped so the next
//! call reconnects. An `https://` URL is reached with the client
//! certificate the platform gives for it ([`Pool::set_tls`]), read again at
//! each new connection (certificates are renewed while the soak runs).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use etcd_operator::tls::ClientTls;

/// The client certificate (and CAs) for an `https://` URL.
pub type TlsFor = Arc<dyn Fn(&str) -> Option<ClientTls> + Send + Sync>;

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// etcd or the connection failed.
    #[error("{0}")]
    Etcd(String),
    /// No connection could be made: the request was never sent.
    #[error("not sent: {0}")]
    Unreachable(String),
}

impl Error {
    /// The error in a few words (tonic's messages run long).
    pub fn short(&self) -> String {
        match self {
            Error::Timeout(d) => format!("no answer within {d:?}"),
            Error::Unreachable(m) => format!("not sent: {}", Error::Etcd(m.clone()).short()),
            Error::Etcd(m) => {
                if m.contains("Connection refused") {
                    return "connection refused".into();
                }
                if let Some(i) = m.find("message: \"") {
                    let rest = &m[i + 10..];
                    return rest.split('"').next().unwrap_or(rest).to_string();
                }
                m.chars().take(160).collect()
            }
        }
    }

    /// A short category for counting.
    pub fn category(&self) -> String {
        match self {
            Error::Timeout(_) => "timeout".into(),
            Error::Unreachable(_) => "unreachable".into(),
            Error::Etcd(m) => {
                let m = m.to_lowercase();
                for (needle, cat) in [
                    ("connect", "unreachable"),
                    ("transport", "unreachable"),
                    ("broken pipe", "unreachable"),
                    ("leader changed", "leader changed"),
                    ("no leader", "no leader"),
                    ("timed out", "etcd timeout"),
                    ("unhealthy", "unhealthy cluster"),
                    ("stopped", "server stopped"),
                    ("unavailable", "unavailable"),
                ] {
                    if m.contains(needle) {
                        return cat.into();
                    }
                }
                "other".into()
            }
        }
    }
}

/// Cached clients by URL.
#[derive(Default)]
pub struct Pool {
    clients: Mutex<HashMap<String, Client>>,
    tls: Mutex<Option<TlsFor>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").finish_non_exhaustive()
    }
}

impl Pool {
    /// An empty pool.
    pub fn new() -> Self {
        Pool::default()
    }

    /// Where the client certificate for `https://` URLs comes from.
    pub fn set_tls(&self, tls: TlsFor) {
        *self.tls.lock().unwrap_or_else(|e| e.into_inner()) = Some(tls);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Client>> {
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The client of `url`, connecting within `timeout` if needed.
    pub async fn get(&self, url: &str, timeout: Duration) -> Result<Client, Error> {
        if let Some(c) = self.lock().get(url) {
            return Ok(c.clone());
        }
        let mut opts = ConnectOptions::new()
            .with_connect_timeout(timeout)
            .with_timeout(timeout)
            .with_keep_alive(Duration::from_secs(2), timeout);
        if etcd_operator::tls::is_https(url) {
            let tls_for = self.tls.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let Some(tls) = tls_for.and_then(|f| f(url)) else {
                return Err(Error::Etcd(format!(
                    "no client certificate for {url}: the cluster's status names none yet"
                )));
            };
            opts = opts.with_tls(tls.options());
        }
        let client = match tokio::time::timeout(timeout, Client::connect([url], Some(opts))).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(Error::Etcd(e.to_string())),
            Err(_) => return Err(Error::Timeout(timeout)),
        };
        self.lock().insert(url.to_string(), client.clone());
        Ok(client)
    }

    /// Drops the client of `url`.
    pub fn forget(&self, url: &str) {
        self.lock().remove(url);
    }

    /// Runs `f` on the client of `url`, the whole call (connect included)
    /// bounded by `timeout`; forgets the client on failure. A failure to
    /// connect is [`Error::Unreachable`]: the request was not sent.
    pub async fn call<T, F, Fut>(&self, url: &str, timeout: Duration, f: F) -> Result<T, Error>
    where
        F: FnOnce(Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
    {
        let run = async {
            let client = self.get(url, timeout).await.map_err(|e| match e {
                Error::Etcd(m) => Error::Unreachable(m),
                other => other,
            })?;
            f(client).await.map_err(|e| Error::Etcd(e.to_string()))
        };
        let r = match tokio::time::timeout(timeout, run).await {
            Ok(r) => r,
            Err(_) => Err(Error::Timeout(timeout)),
        };
        if r.is_err() {
            self.forget(url);
        }
        r
    }
}
