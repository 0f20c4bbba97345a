//! Watchers on the whole key space, each pinned to a member in turn: some
//! start from revision 1 (every change since the cluster began), some from
//! "now" (revision 0 in etcd's API: after the current revision). When the
//! member a watcher uses dies (or loses its leader: the watch requires one),
//! the watcher resumes on the next member from the revision after the last
//! event it got, as a client would. Every event is recorded; [`check`]
//! judges them after the run.

pub mod check;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions, EventType, WatchOptions};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::lin::parse_write;
use crate::load::ledger::WriteId;
use crate::ops::{Clock, Us};

/// Where a watcher starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Start {
    /// Revision 1: every change since the cluster began.
    First,
    /// Revision 0 in etcd's API: after the revision current when created.
    Now,
}

/// `key` of an event on a key the load does not use (the probe's key).
pub const OTHER_KEY: u32 = u32::MAX;

/// One event, compactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// Its revision (the key's mod revision after it).
    pub rev: i64,
    /// The load's key number, or [`OTHER_KEY`].
    pub key: u32,
    /// A put of this value (`None`: a delete); for a value the load never
    /// wrote, [`FOREIGN_VALUE`].
    pub value: Option<u64>,
    /// When it arrived (unix µs).
    pub at: Us,
}

/// The value of a put the load did not write.
pub const FOREIGN_VALUE: u64 = u64::MAX;

/// A break in a watcher's stream and where it went on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Resume {
    /// When (unix µs).
    pub at: Us,
    /// The revision it resumed from.
    pub from: i64,
    /// The member it resumed on.
    pub url: String,
    /// Why the stream broke.
    pub why: String,
}

/// What one watcher got.
#[derive(Clone, Debug)]
pub struct Trace {
    /// Its name (`watch0`).
    pub name: String,
    /// Where it started.
    pub start: Start,
    /// The first revision it covers (0 until its first watch was created).
    pub from: i64,
    /// The highest revision it got an event of.
    pub last: i64,
    /// Every event, in arrival order.
    pub events: Vec<Event>,
    /// Every resumption.
    pub resumes: Vec<Resume>,
    /// Cancellations (a compacted revision) and other troubles.
    pub errors: Vec<String>,
}

/// A trace shared between its watcher and the runner.
pub type Shared = Arc<Mutex<Trace>>;

/// Locks a trace.
pub fn lock(t: &Shared) -> std::sync::MutexGuard<'_, Trace> {
    t.lock().unwrap_or_else(|e| e.into_inner())
}

/// The load's key number of `key` (`soak/k000042` -> 42).
pub fn key_number(key: &[u8]) -> u32 {
    std::str::from_utf8(key)
        .ok()
        .and_then(|k| k.strip_prefix("soak/k"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(OTHER_KEY)
}

/// The value number of a value the load wrote (as `lin` numbers them).
pub fn value_number(value: &[u8]) -> u64 {
    WriteId::parse(value)
        .and_then(|id| parse_write(&id.to_string()))
        .unwrap_or(FOREIGN_VALUE)
}

/// Starts `n` watchers (even ones from revision 1, odd ones from now),
/// watcher i first on member i; they run until `stop` is cancelled.
pub fn start(
    n: u32,
    endpoints: tokio::sync::watch::Receiver<Vec<String>>,
    clock: Clock,
    stop: CancellationToken,
    tasks: &mut tokio::task::JoinSet<()>,
    tls: crate::client::TlsFor,
) -> Vec<Shared> {
    (0..n)
        .map(|i| {
            let start = if i % 2 == 0 { Start::First } else { Start::Now };
            let trace = Arc::new(Mutex::new(Trace {
                name: format!("watch{i}"),
                start,
                from: 0,
                last: 0,
                events: Vec::new(),
                resumes: Vec::new(),
                errors: Vec::new(),
            }));
            tasks.spawn(run(
                i as usize,
                endpoints.clone(),
                trace.clone(),
                clock,
                stop.clone(),
                tls.clone(),
            ));
            trace
        })
        .collect()
}

async fn connect(url: &str, tls: &crate::client::TlsFor) -> Result<Client, String> {
    let mut opts = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_keep_alive(Duration::from_secs(1), Duration::from_secs(2))
        .with_require_leader(true);
    if etcd_operator::tls::is_https(url) {
        let t = tls(url).ok_or("no client certificate for an https:// member yet")?;
        opts = opts.with_tls(t.options());
    }
    match tokio::time::timeout(Duration::from_secs(3), Client::connect([url], Some(opts))).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(crate::client::Error::Etcd(e.to_string()).short()),
        Err(_) => Err("no connection within 3s".into()),
    }
}

async fn run(
    n: usize,
    endpoints: tokio::sync::watch::Receiver<Vec<String>>,
    trace: Shared,
    clock: Clock,
    stop: CancellationToken,
    tls: crate::client::TlsFor,
) {
    let mut turn = n;
    let mut why = String::new();
    loop {
        if stop.is_cancelled() {
            return;
        }
        let url = {
            let eps = endpoints.borrow();
            (!eps.is_empty()).then(|| eps[turn % eps.len()].clone())
        };
        turn += 1;
        let Some(url) = url else {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(200)) => continue,
                _ = stop.cancelled() => return,
            }
        };
        let (start, first, last) = {
            let t = lock(&trace);
            (t.start, t.from == 0, t.last)
        };
        let from = match (first, start) {
            (true, Start::First) => 1,
            (true, Start::Now) => 0,
            (false, _) => last.max(lock(&trace).from - 1) + 1,
        };
        if !first {
            lock(&trace).resumes.push(Resume {
                at: clock.now(),
                from,
                url: url.clone(),
                why: std::mem::take(&mut why),
            });
        }
        let result = tokio::select! {
            r = follow(&url, from, &trace, clock, &tls) => r,
            _ = stop.cancelled() => return,
        };
        match result {
            Ok(()) => why = format!("{url}: the stream ended"),
            Err(e) => why = format!("{url}: {e}"),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = stop.cancelled() => return,
        }
    }
}

/// Watches on `url` from `from` (0: now) until the stream breaks.
async fn follow(
    url: &str,
    from: i64,
    trace: &Shared,
    clock: Clock,
    tls: &crate::client::TlsFor,
) -> Result<(), String> {
    let mut client = connect(url, tls).await?;
    let mut opts = WatchOptions::new().with_all_keys();
    if from > 0 {
        opts = opts.with_start_revision(from);
    }
    let mut stream = client
        .watch(Vec::<u8>::new(), Some(opts))
        .await
        .map_err(|e| crate::client::Error::Etcd(e.to_string()).short())?;
    loop {
        let msg = stream
            .message()
            .await
            .map_err(|e| crate::client::Error::Etcd(e.to_string()).short())?;
        let Some(resp) = msg else {
            return Ok(());
        };
        let at = clock.now();
        let mut t = lock(trace);
        if resp.created() && t.from == 0 {
            t.from = if from > 0 {
                from
            } else {
                resp.header().map(|h| h.revision()).unwrap_or(0) + 1
            };
        }
        if resp.canceled() {
            let why = if resp.compact_revision() > 0 {
                format!(
                    "watch from revision {from} canceled: compacted (oldest kept {})",
                    resp.compact_revision()
                )
            } else {
                format!("watch canceled: {}", resp.cancel_reason())
            };
            t.errors.push(format!("{url}: {why}"));
            return Err(why);
        }
        for e in resp.events() {
            let Some(kv) = e.kv() else { continue };
            let value = match e.event_type() {
                EventType::Put => Some(value_number(kv.value())),
                EventType::Delete => None,
            };
            let rev = kv.mod_revision();
            t.last = t.last.max(rev);
            t.events.push(Event {
                rev,
                key: key_number(kv.key()),
                value,
                at,
            });
        }
    }
}
