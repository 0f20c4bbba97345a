//! The etcd API the operator uses: per-member status, the member list and
//! membership changes, through `etcd-client`.
//!
//! One client per member URL, kept between calls; every call is bounded by
//! a timeout (a paused member accepts connections but never answers), and a
//! client that failed is dropped so the next call reconnects afresh. An
//! `https://` URL is reached with the TLS setting registered for it
//! ([`Clients::set_tls`]: the CAs to trust and a client certificate), and
//! with the credentials registered for it while etcd's auth is on there
//! ([`Clients::set_auth`], a standby's).

mod auth;
mod maintenance;

pub use self::auth::{Credentials, reach};
pub use self::maintenance::{DEFRAG_TIMEOUT, LONG_TIMEOUT, alarms_in_status};

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions, MemberAddOptions};
use tonic::Code;

use crate::tls::ClientTls;

/// Result of etcd calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A failed etcd call.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{op} via {url}: {kind}")]
pub struct Error {
    /// What was asked.
    pub op: &'static str,
    /// Of which member.
    pub url: String,
    /// What happened.
    pub kind: ErrorKind,
}

/// Kinds of etcd failures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    /// No answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The member cannot be reached.
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// etcd refused the request (for example "unhealthy cluster" in the 5 s
    /// after a member reconnects, or a learner not yet in sync). Retried.
    #[error("etcd refused: {0} (will retry)")]
    Refused(String),
    /// The member id is not in the member list.
    #[error("member not found")]
    NotFound,
    /// The TLS handshake failed: the member refused the operator's client
    /// certificate, or the operator the member's (their CAs do not match).
    /// The member may be serving everyone else.
    #[error("TLS handshake refused: {0}")]
    TlsRefused(String),
}

/// Whether the text of a connection failure (with its causes) is a TLS
/// handshake failure rather than a member that is down.
pub fn is_tls_failure(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    [
        "certificate",
        "unknownca",
        "unknown ca",
        "unknownissuer",
        "fatal alert",
        "handshake",
    ]
    .iter()
    .any(|k| t.contains(k))
}

/// An error's text with every cause after it (tonic keeps the TLS reason
/// in the causes of a bare "transport error").
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

impl Error {
    /// A short label for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self.kind {
            ErrorKind::Timeout(_) => "timeout",
            ErrorKind::Unreachable(_) => "unreachable",
            ErrorKind::Refused(_) => "refused",
            ErrorKind::NotFound => "not_found",
            ErrorKind::TlsRefused(_) => "tls",
        }
    }

    /// etcd refused the request; it is worth asking again soon.
    pub fn is_refused(&self) -> bool {
        matches!(self.kind, ErrorKind::Refused(_))
    }
}

/// A member's own view, from the maintenance Status call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberStatus {
    /// Its member id.
    pub id: u64,
    /// The leader it follows (0 when it has none).
    pub leader: u64,
    /// Raft term.
    pub raft_term: u64,
    /// Raft index.
    pub raft_index: u64,
    /// Server version.
    pub version: String,
    /// A learner.
    pub is_learner: bool,
    /// Database size in bytes.
    pub db_size: i64,
    /// Bytes of the database in use (the rest is free space that a
    /// defragmentation gives back).
    pub db_size_in_use: i64,
    /// Alarms and errors it reports.
    pub errors: Vec<String>,
    /// The store's revision when it answered.
    pub revision: i64,
}

/// A member in etcd's member list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedMember {
    /// Member id.
    pub id: u64,
    /// Name; empty until the member has started once.
    pub name: String,
    /// Peer URLs.
    pub peer_urls: Vec<String>,
    /// Client URLs; empty until started.
    pub client_urls: Vec<String>,
    /// A learner.
    pub is_learner: bool,
}

/// Calls etcd answers without credentials while its auth is on (measured
/// on 3.4.23 and 3.5.1), which go without them: a learner refuses to
/// authenticate anyone, and must still say its status.
fn anonymous(op: &str) -> bool {
    matches!(op, "status" | "member list" | "alarm list")
}

/// Cached clients, one per member URL (and one more carrying credentials,
/// [`Clients::set_auth`]).
pub struct Clients {
    pool: Mutex<HashMap<(String, bool), Client>>,
    tls: Mutex<HashMap<String, ClientTls>>,
    auth: Mutex<HashMap<String, Credentials>>,
    timeout: Duration,
}

/// Membership changes and the member list may wait for raft; they get this
/// many times the status timeout.
const SLOW_CALLS: u32 = 4;

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<String> = self.lock().keys().map(|(u, _)| u.clone()).collect();
        f.debug_struct("Clients")
            .field("urls", &urls)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Clients {
    /// Clients whose status calls give up after `timeout` (membership calls
    /// after four times that).
    pub fn new(timeout: Duration) -> Self {
        Clients {
            pool: Mutex::new(HashMap::new()),
            tls: Mutex::new(HashMap::new()),
            auth: Mutex::new(HashMap::new()),
            timeout,
        }
    }

    /// Registers how an `https://` URL is reached (`None`: forget it). A
    /// client connected with other TLS files (a renewed certificate, other
    /// CAs) is dropped, so the next call connects with these.
    pub fn set_tls(&self, url: &str, tls: Option<ClientTls>) {
        let mut map = self.tls.lock().unwrap_or_else(|e| e.into_inner());
        let changed =
            map.get(url).map(ClientTls::fingerprint) != tls.as_ref().map(ClientTls::fingerprint);
        match tls {
            Some(t) => map.insert(url.to_string(), t),
            None => map.remove(url),
        };
        drop(map);
        if changed {
            self.forget(url);
        }
    }

    /// Registers the credentials sent to `url` (`None`: none, etcd's auth
    /// is off there). A client connected otherwise is dropped, so the next
    /// call connects with these.
    pub fn set_auth(&self, url: &str, auth: Option<Credentials>) {
        let mut map = self.auth.lock().unwrap_or_else(|e| e.into_inner());
        let changed = map.get(url) != auth.as_ref();
        match auth {
            Some(a) => map.insert(url.to_string(), a),
            None => map.remove(url),
        };
        drop(map);
        if changed {
            self.forget(url);
        }
    }

    async fn client(&self, url: &str, op: &'static str, timeout: Duration) -> Result<Client> {
        let key = (url.to_string(), !anonymous(op));
        if let Some(c) = self.lock().get(&key) {
            return Ok(c.clone());
        }
        let opts = self.options(url, op, timeout, timeout)?;
        let connect = Client::connect([url], Some(opts));
        let client = match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(self.error(op, url, e)),
            Err(_) => return Err(self.timed_out(op, url, timeout)),
        };
        self.lock().insert(key, client.clone());
        Ok(client)
    }

    /// Connect options for `url`: its TLS files for an `https://` URL
    /// ([`Clients::set_tls`]), an error when it has none, and its
    /// credentials ([`Clients::set_auth`]) unless `op` needs none.
    pub(crate) fn options(
        &self,
        url: &str,
        op: &'static str,
        connect: Duration,
        timeout: Duration,
    ) -> Result<ConnectOptions> {
        let opts = ConnectOptions::new()
            .with_connect_timeout(connect)
            .with_timeout(timeout);
        let tls = self
            .tls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(url)
            .cloned();
        if crate::tls::is_https(url) && tls.is_none() {
            return Err(Error {
                op,
                url: url.into(),
                kind: ErrorKind::Unreachable("no client certificate for this https:// URL".into()),
            });
        }
        let auth = self
            .auth
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(url)
            .filter(|_| !anonymous(op))
            .cloned();
        Ok(reach(opts, url, tls.as_ref(), auth.as_ref()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, bool), Client>> {
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Refuses a write when this replica may no longer lead
    /// ([`crate::fence`]).
    pub(crate) fn fenced(&self, op: &'static str, url: &str) -> Result<()> {
        crate::fence::check().map_err(|e| Error {
            op,
            url: url.into(),
            kind: ErrorKind::Refused(e.to_string()),
        })
    }

    /// Drops the cached client of `url`.
    pub fn forget(&self, url: &str) {
        self.lock().retain(|(u, _), _| u != url);
    }

    fn timed_out(&self, op: &'static str, url: &str, timeout: Duration) -> Error {
        self.forget(url);
        Error {
            op,
            url: url.into(),
            kind: ErrorKind::Timeout(timeout),
        }
    }

    fn error(&self, op: &'static str, url: &str, e: etcd_client::Error) -> Error {
        let unreachable = |text: String| {
            if is_tls_failure(&text) {
                ErrorKind::TlsRefused(text)
            } else {
                ErrorKind::Unreachable(text)
            }
        };
        self.forget(url);
        let kind = match e {
            etcd_client::Error::GRpcStatus(s) => match s.code() {
                Code::NotFound => ErrorKind::NotFound,
                _ if s.message().contains("member not found") => ErrorKind::NotFound,
                Code::Unavailable if !s.message().starts_with("etcdserver") => {
                    unreachable(with_causes(&s))
                }
                _ => ErrorKind::Refused(s.message().to_string()),
            },
            other => unreachable(with_causes(&other)),
        };
        Error {
            op,
            url: url.into(),
            kind,
        }
    }

    /// Runs one call on the client of `url`, bounded by the timeout.
    async fn call<T, F, Fut>(&self, op: &'static str, url: &str, f: F) -> Result<T>
    where
        F: FnOnce(Client) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        let timeout = if op == "status" {
            self.timeout
        } else {
            self.timeout * SLOW_CALLS
        };
        let client = self.client(url, op, timeout).await?;
        match tokio::time::timeout(timeout, f(client)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.error(op, url, e)),
            Err(_) => Err(self.timed_out(op, url, timeout)),
        }
    }

    /// The member's status.
    pub async fn status(&self, url: &str) -> Result<MemberStatus> {
        let r = self
            .call("status", url, |mut c| async move { c.status().await })
            .await?;
        Ok(MemberStatus {
            id: r.header().map(|h| h.member_id()).unwrap_or_default(),
            leader: r.leader(),
            raft_term: r.raft_term(),
            raft_index: r.raft_index(),
            version: r.version().to_string(),
            is_learner: r.is_learner(),
            db_size: r.db_size(),
            db_size_in_use: r.raft_used_db_size(),
            errors: r.errors().to_vec(),
            revision: r.header().map(|h| h.revision()).unwrap_or_default(),
        })
    }

    /// The member list as `url` sees it.
    pub async fn member_list(&self, url: &str) -> Result<Vec<ListedMember>> {
        let r = self
            .call(
                "member list",
                url,
                |mut c| async move { c.member_list().await },
            )
            .await?;
        Ok(r.members().iter().map(listed).collect())
    }

    /// Adds a learner with `peer_url`; returns its id and the new member list.
    pub async fn add_learner(&self, url: &str, peer_url: &str) -> Result<(u64, Vec<ListedMember>)> {
        self.fenced("add_learner", url)?;
        let peer = peer_url.to_string();
        let r = self
            .call("member add", url, |mut c| async move {
                c.member_add([peer], Some(MemberAddOptions::new().with_is_learner()))
                    .await
            })
            .await?;
        let id = r.member().map(|m| m.id()).unwrap_or_default();
        Ok((id, r.member_list().iter().map(listed).collect()))
    }

    /// Removes member `id`. Succeeds if it is already gone.
    pub async fn remove(&self, url: &str, id: u64) -> Result<()> {
        self.fenced("remove", url)?;
        match self
            .call("member remove", url, |mut c| async move {
                c.member_remove(id).await
            })
            .await
        {
            Err(Error {
                kind: ErrorKind::NotFound,
                ..
            }) => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// Sets the peer URLs of member `id` (etcd's member update).
    pub async fn update_peer_urls(&self, url: &str, id: u64, peer_urls: Vec<String>) -> Result<()> {
        self.fenced("update_peer_urls", url)?;
        self.call("member update", url, |mut c| async move {
            c.member_update(id, peer_urls).await
        })
        .await
        .map(|_| ())
    }

    /// Asks the leader at `leader_url` to hand its leadership to voter `id`
    /// (etcd's MoveLeader: the leader brings `id` up to date and tells it
    /// to campaign at once, so no election timeout passes). etcd answers
    /// once `id` leads, or refuses ("not leader" when `leader_url` no
    /// longer leads; a timeout when the transfer did not finish).
    pub async fn move_leader(&self, leader_url: &str, id: u64) -> Result<()> {
        self.fenced("move_leader", leader_url)?;
        self.call("move leader", leader_url, |mut c| async move {
            c.move_leader(id).await
        })
        .await
        .map(|_| ())
    }

    /// Promotes learner `id` to a voting member.
    pub async fn promote(&self, url: &str, id: u64) -> Result<()> {
        self.fenced("promote", url)?;
        self.call("member promote", url, |mut c| async move {
            c.member_promote(id).await
        })
        .await
        .map(|_| ())
    }
}

fn listed(m: &etcd_client::Member) -> ListedMember {
    ListedMember {
        id: m.id(),
        name: m.name().to_string(),
        peer_urls: m.peer_urls().to_vec(),
        client_urls: m.client_urls().to_vec(),
        is_learner: m.is_learner(),
    }
}
