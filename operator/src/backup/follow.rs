//! Continuous backups: a task beside the backup schedule follows the
//! cluster's watch stream (every key, from the newest good full backup's
//! revision + 1) and writes the changes as delta segments
//! ([`super::delta`]) beside that backup every `segmentInterval`, or
//! sooner when `maxEvents` changes wait. On a failure it reconnects (to the
//! next ready member) and resumes after the last revision written. When a
//! newer full backup appears, the segments follow it. When etcd answers
//! that the history is compacted, or the chain is found cut, the chain
//! ends: the schedule is asked for a full backup, which starts a new one.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use etcd_client::{Client, ConnectOptions, EventType, WatchOptions};
use tokio::sync::{Notify, watch};

use super::Candidate;
use super::chain::Chain;
use super::delta::{self, Event, Revision, Segment};
use super::{BackupMeta, BackupStore, Location, task};
use crate::crd::{BackupStatus, ChainStatus};
use crate::validate::ContinuousPolicy;

/// Longest wait for a connection or an answer.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The largest watch response taken. etcd batches up to 1000 revisions
/// into one response while a watcher catches up (after a reconnect, or
/// when it fell behind), each up to its request limit (1.5 MiB by
/// default): far past tonic's default of 4 MiB, which made the follower
/// fail on the same response forever once large values were written.
/// etcd's own Go client takes up to `math.MaxInt32`, as here.
const MAX_WATCH_MESSAGE: usize = (1 << 31) - 1;
/// How often the chain written so far is read back and checked: a segment
/// damaged or deleted after it was written ends the chain there.
const RECHECK: Duration = Duration::from_secs(30);

/// How following one chain ended.
enum Outcome {
    /// A newer full backup appeared: follow it.
    NewBase,
    /// Time to read the chain back and check it.
    Recheck,
    /// etcd compacted the history the chain needs: the chain ends.
    Compacted(i64),
    /// Connection or write trouble: try again.
    Failed(String),
}

/// Now, in ms since the Unix epoch.
pub fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis(),
    )
    .unwrap_or(u64::MAX)
}

pub use crate::units::rfc3339_ms;

/// The status of `chain`, with `problem`.
pub fn chain_status(chain: &Chain, problem: Option<String>) -> ChainStatus {
    ChainStatus {
        base: chain.base.clone(),
        // Numbered from 1 without gaps: the last number is the count.
        segments: i64::try_from(chain.segments.last().map_or(0, |s| s.seq)).unwrap_or(i64::MAX),
        last_revision: chain.last_revision(),
        last_segment_time: chain.last_unix_ms().map(rfc3339_ms),
        problem: problem.or_else(|| chain.cut.clone()),
    }
}

/// Follows the cluster of `location` into delta segments until aborted.
pub async fn run<S: BackupStore>(
    policy: ContinuousPolicy,
    location: Location,
    store: Arc<S>,
    candidates: watch::Receiver<Vec<Candidate>>,
    status: Arc<Mutex<BackupStatus>>,
    want_full: Arc<Notify>,
) {
    let set = |c: ChainStatus| task::update(&status, |s| s.continuous = Some(c));
    let mut sources = task::Sources::new(candidates);
    // The base whose chain ended (compacted, or found cut): nothing is
    // appended to it; a newer full backup starts the next chain.
    let mut ended: Option<String> = None;
    // The base last found good (its whole file hashed once, not on every
    // reconnect or recheck).
    let mut known_good: Option<BackupMeta> = None;
    loop {
        let newest = store.list(&location).await.unwrap_or_default();
        let newest = newest.first().map(|m| m.name.clone());
        if newest.is_some() && newest == ended {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        let Some(base) = newest_good(&*store, &location, &mut known_good).await else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        if ended.as_deref() == Some(base.name.as_str()) {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        let chain = match store.chain(&location, &base).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("cannot read the delta chain of {}: {e}", base.name);
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Some(cut) = &chain.cut {
            tracing::error!(
                "{cut}; the chain ends there: a full backup is taken to start a new one"
            );
            set(chain_status(&chain, None));
            ended = Some(base.name.clone());
            want_full.notify_one();
            continue;
        }
        set(chain_status(&chain, None));
        let Some(source) = sources.pick().await else {
            continue;
        };
        let outcome = follow(
            &policy, &location, &*store, &source, &base, chain, &newest, &set,
        )
        .await;
        match outcome {
            Outcome::NewBase => {
                tracing::info!("a newer full backup: delta segments follow it now");
            }
            Outcome::Recheck => {}
            Outcome::Compacted(at) => {
                let m = format!(
                    "the chain of {} ends: etcd compacted the history it needs (compact \
                     revision {at}); a full backup is taken to start a new one",
                    base.name
                );
                tracing::error!("{m}");
                if let Ok(c) = store.chain(&location, &base).await {
                    set(chain_status(&c, Some(m)));
                }
                ended = Some(base.name.clone());
                want_full.notify_one();
            }
            Outcome::Failed(e) => {
                sources.failed();
                tracing::warn!("following the changes of the cluster failed (will resume): {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// The newest backup that checks out; one already checked (`known`, the
/// same meta) is not hashed again.
async fn newest_good<S: BackupStore>(
    store: &S,
    location: &Location,
    known: &mut Option<BackupMeta>,
) -> Option<BackupMeta> {
    for meta in store.list(location).await.ok()? {
        if known.as_ref() == Some(&meta) || store.verify(location, &meta).await.is_ok() {
            *known = Some(meta.clone());
            return Some(meta);
        }
    }
    None
}

/// Follows one chain from `source` until it ends or fails.
#[allow(clippy::too_many_arguments)]
async fn follow<S: BackupStore>(
    policy: &ContinuousPolicy,
    location: &Location,
    store: &S,
    (member, url, tls): &Candidate,
    base: &BackupMeta,
    mut chain: Chain,
    newest: &Option<String>,
    set: &(dyn Fn(ChainStatus) + Sync),
) -> Outcome {
    let mut opts = ConnectOptions::new().with_connect_timeout(TIMEOUT);
    if let Some(tls) = tls.as_ref().filter(|_| crate::tls::is_https(url)) {
        opts = opts.with_tls(tls.options());
    }
    let connect = Client::connect([url.as_str()], Some(opts));
    let client = match tokio::time::timeout(TIMEOUT, connect).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Outcome::Failed(format!("{member}: {e}")),
        Err(_) => return Outcome::Failed(format!("{member}: no connection")),
    };
    let from = chain.last_revision() + 1;
    let options = WatchOptions::new()
        .with_all_keys()
        .with_start_revision(from)
        .with_progress_notify();
    let mut watcher = client
        .watch_client()
        .max_decoding_message_size(MAX_WATCH_MESSAGE);
    let mut stream = match tokio::time::timeout(TIMEOUT, watcher.watch("", Some(options))).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Outcome::Failed(format!("{member}: watch: {e}")),
        Err(_) => return Outcome::Failed(format!("{member}: no answer to watch")),
    };
    tracing::debug!(%member, from, base = %base.name, "following changes");
    let mut pending: Vec<Revision> = Vec::new();
    let mut waiting = 0usize;
    let mut tick = tokio::time::interval(policy.segment_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let started = tokio::time::Instant::now();
    loop {
        let flush_now = tokio::select! {
            msg = stream.message() => {
                let msg = match msg {
                    Ok(Some(m)) => m,
                    Ok(None) => {
                        return flush_then(store, location, &mut chain, &mut pending, set, "the watch ended".into()).await;
                    }
                    Err(e) => {
                        return flush_then(store, location, &mut chain, &mut pending, set, format!("{member}: {e}")).await;
                    }
                };
                if msg.compact_revision() > 0 {
                    let _ = flush(store, location, &mut chain, &mut pending, set).await;
                    return Outcome::Compacted(msg.compact_revision());
                }
                if msg.canceled() {
                    return flush_then(store, location, &mut chain, &mut pending, set, format!("watch canceled: {}", msg.cancel_reason())).await;
                }
                for ev in msg.events() {
                    let Some(kv) = ev.kv() else { continue };
                    let rev = kv.mod_revision();
                    if rev <= chain.last_revision() || pending.last().is_some_and(|p| rev < p.revision) {
                        continue;
                    }
                    let event = match ev.event_type() {
                        EventType::Put => Event::Put { key: kv.key().to_vec(), value: kv.value().to_vec() },
                        EventType::Delete => Event::Delete { key: kv.key().to_vec() },
                    };
                    match pending.last_mut() {
                        Some(p) if p.revision == rev => p.events.push(event),
                        _ => pending.push(Revision { revision: rev, events: vec![event] }),
                    }
                    waiting += 1;
                }
                waiting >= policy.max_events
            }
            _ = tick.tick() => {
                let listed = store.list(location).await.unwrap_or_default();
                let now_newest = listed.first().map(|m| m.name.clone());
                if now_newest != *newest && now_newest.is_some() {
                    let _ = flush(store, location, &mut chain, &mut pending, set).await;
                    return Outcome::NewBase;
                }
                if started.elapsed() >= RECHECK {
                    return match flush(store, location, &mut chain, &mut pending, set).await {
                        Ok(()) => Outcome::Recheck,
                        Err(e) => Outcome::Failed(e),
                    };
                }
                true
            }
        };
        if flush_now && !pending.is_empty() {
            if let Err(e) = flush(store, location, &mut chain, &mut pending, set).await {
                return Outcome::Failed(e);
            }
            waiting = 0;
        }
    }
}

/// Writes what is pending, then fails with `why`.
async fn flush_then<S: BackupStore>(
    store: &S,
    location: &Location,
    chain: &mut Chain,
    pending: &mut Vec<Revision>,
    set: &(dyn Fn(ChainStatus) + Sync),
    why: String,
) -> Outcome {
    match flush(store, location, chain, pending, set).await {
        Ok(()) => Outcome::Failed(why),
        Err(e) => Outcome::Failed(format!("{why}; {e}")),
    }
}

/// Writes the pending revisions as the chain's next segment.
async fn flush<S: BackupStore>(
    store: &S,
    location: &Location,
    chain: &mut Chain,
    pending: &mut Vec<Revision>,
    set: &(dyn Fn(ChainStatus) + Sync),
) -> Result<(), String> {
    if pending.is_empty() {
        return Ok(());
    }
    let segment = Segment {
        base: chain.base.clone(),
        seq: chain.next_seq(),
        unix_ms: now_ms(),
        revisions: std::mem::take(pending),
        prev: chain.next_prev,
    };
    store.append(location, &segment).await.map_err(|e| {
        format!(
            "cannot write segment {} of {}: {e}",
            segment.seq, segment.base
        )
    })?;
    let (_, hash) = delta::encode(&segment);
    tracing::debug!(
        base = %segment.base, seq = segment.seq, first = segment.first_revision(),
        last = segment.last_revision(), events = segment.events(), "delta segment written"
    );
    chain.next_prev = hash;
    chain.files += 1;
    chain.segments.push(segment);
    // Only the last segment is needed to go on: keep memory flat.
    let last = chain.segments.len() - 1;
    chain.segments.drain(..last);
    set(chain_status(chain, None));
    Ok(())
}
