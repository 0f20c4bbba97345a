//! Continuous backups: a task beside the backup schedule follows the
//! cluster's watch stream (every key, from the newest good full backup's
//! revision + 1) and writes the changes as delta segments
//! ([`super::delta`]) beside that backup every `segmentInterval`, or
//! sooner when `maxEvents` changes wait. The store is the truth: the chain
//! is read from it ([`BackupStore::chain`]) whenever following starts
//! again and every [`RECHECK`], and a segment counts once the store took
//! it. On a failure it reconnects (to the next ready member) and resumes
//! after the last revision the store holds. When a newer full backup
//! appears, the chain goes on until it holds that backup's revision (so
//! chains overlap and every revision is in one), then the segments follow
//! the new backup. When etcd answers that the history is
//! compacted, or the chain is found cut, the chain ends: the schedule is
//! asked for a full backup, which starts a new one.
//!
//! Every tick it asks etcd for the watch's progress: etcd answers only once
//! every change up to then was delivered, so an answer with nothing
//! waiting to be written (or followed by a segment the store took) is the
//! time the store held every change ([`ChainStatus::synced_time`]). A
//! store that hangs, or a member whose watch stops answering, leaves that
//! time behind, which status says within a few segment intervals; a watch
//! that sends nothing for [`stall`] is dropped for another member.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use etcd_client::{Client, ConnectOptions, WatchOptions};
use tokio::sync::{Notify, watch};

use super::Candidate;
use super::chain::Chain;
use super::delta::{self, Revision, Segment};
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
pub const MAX_WATCH_MESSAGE: usize = (1 << 31) - 1;
/// How often the chain is read back from the store and checked: a segment
/// damaged or deleted after it was written ends the chain there.
const RECHECK: Duration = Duration::from_secs(10);
/// How long a base found good is taken as good without checking it again.
const BASE_RECHECK: Duration = Duration::from_secs(10 * 60);

/// How long a watch may send nothing at all (no change, no answer to a
/// progress request) before it is taken as stuck: five segment intervals,
/// at least 10 s.
pub fn stall(policy: &ContinuousPolicy) -> Duration {
    (policy.segment_interval * 5).max(Duration::from_secs(10))
}

/// What the follower knows beyond the chain the store holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// When the store last held every change (ms since the epoch).
    pub synced_ms: Option<u64>,
    /// The last failure, until a segment is written again.
    pub error: Option<String>,
    /// How the chain before ended early ([`ChainStatus::previous`]).
    pub previous: Option<String>,
}

/// A chain that ended early: why, and its base and last revision.
#[derive(Clone, Debug)]
struct EndedEarly {
    base: String,
    last_revision: i64,
    why: String,
}

impl EndedEarly {
    /// In words, once the chain of `next` (a full backup) follows it.
    fn said(&self, next: &BackupMeta) -> String {
        let (from, to) = (self.last_revision + 1, next.revision - 1);
        let unreachable = if from <= to {
            format!("revisions {from} to {to} cannot be restored to a point in time")
        } else {
            "no revision was left out".into()
        };
        format!(
            "the chain of {} ended early at revision {} ({}); {}, the full backup {} holds \
             revision {} and the chain goes on from it",
            self.base, self.last_revision, self.why, unreachable, next.name, next.revision
        )
    }
}

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

/// The status of `chain` as the store holds it, with `problem` and what
/// the follower knows beyond it.
pub fn chain_status(chain: &Chain, problem: Option<String>, progress: &Progress) -> ChainStatus {
    ChainStatus {
        base: chain.base.clone(),
        // Numbered from 1 without gaps: the last number is the count.
        segments: i64::try_from(chain.segments.last().map_or(0, |s| s.seq)).unwrap_or(i64::MAX),
        last_revision: chain.last_revision(),
        last_segment_time: chain.last_unix_ms().map(rfc3339_ms),
        problem: problem.or_else(|| chain.cut.clone()),
        synced_time: progress.synced_ms.map(rfc3339_ms),
        previous: progress.previous.clone(),
        last_error: progress.error.clone(),
    }
}

/// The problem of a chain that ends at `chain` (cut, or compacted away):
/// `why`, and which revisions the store does not hold since when.
fn unprotected(chain: &Chain, why: &str) -> String {
    let since = chain
        .last_unix_ms()
        .map_or_else(|| "the base backup".to_string(), rfc3339_ms);
    format!(
        "{why}; changes after revision {} (since {since}) are not in the store until a new full \
         backup, which is being taken, holds them",
        chain.last_revision()
    )
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
    let fail = |e: &str, progress: &mut Progress| {
        progress.error = Some(e.to_string());
        let p = progress.clone();
        task::update(&status, |s| {
            // Before the chain was ever read (a store down from the start)
            // the failure is all there is to say.
            let c = s.continuous.get_or_insert_with(ChainStatus::default);
            c.last_error = p.error.clone();
        });
    };
    let mut sources = task::Sources::new(candidates);
    let mut progress = Progress::default();
    // The base whose chain ended (compacted, or found cut): nothing is
    // appended to it; a newer full backup starts the next chain.
    let mut ended: Option<String> = None;
    // The base last found good, and when (its whole file is not hashed on
    // every reconnect or recheck).
    let mut known_good: Option<(BackupMeta, tokio::time::Instant)> = None;
    // The newest backup found damaged (a full backup asked for once).
    let mut damaged: Option<String> = None;
    // The chain that ended early, until the next one starts.
    let mut early: Option<EndedEarly> = None;
    loop {
        let listed = match store.list(&location).await {
            Ok(l) => l,
            Err(e) => {
                fail(&format!("cannot list the backups: {e}"), &mut progress);
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let newest = listed.first().map(|m| m.name.clone());
        if newest.is_some() && newest == ended {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        let Some(base) = newest_good(&*store, &location, &listed, &mut known_good).await else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        if newest.as_deref() != Some(base.name.as_str()) && damaged != newest {
            // The newest full backup does not check out: the changes after
            // the one that does need a new full backup.
            tracing::error!(
                "the newest backup, {}, does not check out: a full backup is taken",
                newest.as_deref().unwrap_or_default()
            );
            damaged.clone_from(&newest);
            want_full.notify_one();
        }
        if ended.as_deref() == Some(base.name.as_str()) {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        let chain = match store.chain(&location, &base).await {
            Ok(c) => c,
            Err(e) => {
                let m = format!(
                    "cannot read the delta chain of {} from the store: {e}",
                    base.name
                );
                tracing::warn!("{m}");
                fail(&m, &mut progress);
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Some(cut) = &chain.cut {
            let m = unprotected(&chain, cut);
            tracing::error!("{m}");
            set(chain_status(&chain, Some(m), &progress));
            ended = Some(base.name.clone());
            early = Some(EndedEarly {
                base: base.name.clone(),
                last_revision: chain.last_revision(),
                why: cut.clone(),
            });
            want_full.notify_one();
            continue;
        }
        if let Some(e) = early.take_if(|e| e.base != base.name) {
            progress.previous = Some(e.said(&base));
        }
        set(chain_status(&chain, None, &progress));
        let Some(source) = sources.pick().await else {
            continue;
        };
        let outcome = follow(
            &policy,
            &location,
            &*store,
            &source,
            (&base, chain, &newest),
            &mut progress,
            &set,
        )
        .await;
        match outcome {
            Outcome::NewBase => {
                tracing::info!("a newer full backup: delta segments follow it now");
            }
            Outcome::Recheck => {}
            Outcome::Compacted(at) => {
                let why = format!(
                    "the chain of {} ends: etcd compacted the history it needs (compact \
                     revision {at})",
                    base.name
                );
                if let Ok(c) = store.chain(&location, &base).await {
                    let m = unprotected(&c, &why);
                    tracing::error!("{m}");
                    set(chain_status(&c, Some(m), &progress));
                    early = Some(EndedEarly {
                        base: base.name.clone(),
                        last_revision: c.last_revision(),
                        why,
                    });
                }
                ended = Some(base.name.clone());
                want_full.notify_one();
            }
            Outcome::Failed(e) => {
                sources.failed();
                tracing::warn!("following the changes of the cluster failed (will resume): {e}");
                fail(&e, &mut progress);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// The newest backup of `listed` that checks out; one found good within
/// [`BASE_RECHECK`] (`known`, the same meta) is not checked again.
async fn newest_good<S: BackupStore>(
    store: &S,
    location: &Location,
    listed: &[BackupMeta],
    known: &mut Option<(BackupMeta, tokio::time::Instant)>,
) -> Option<BackupMeta> {
    for meta in listed {
        let fresh = known
            .as_ref()
            .is_some_and(|(m, at)| m == meta && at.elapsed() < BASE_RECHECK);
        if fresh || store.verify(location, meta).await.is_ok() {
            if !fresh {
                *known = Some((meta.clone(), tokio::time::Instant::now()));
            }
            return Some(meta.clone());
        }
    }
    None
}

/// Follows one chain from `source` until it ends or fails.
async fn follow<S: BackupStore>(
    policy: &ContinuousPolicy,
    location: &Location,
    store: &S,
    (member, url, tls): &Candidate,
    (base, mut chain, newest): (&BackupMeta, Chain, &Option<String>),
    progress: &mut Progress,
    set: &(dyn Fn(ChainStatus) + Sync),
) -> Outcome {
    let opts = ConnectOptions::new().with_connect_timeout(TIMEOUT);
    let opts = crate::etcd::reach(opts, url, tls.as_ref(), None);
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
    let stall = stall(policy);
    let mut w = Written {
        store,
        location,
        chain: &mut chain,
        pending: Vec::new(),
        progress,
        heard: None,
        set,
    };
    let mut waiting = 0usize;
    let mut tick = tokio::time::interval(policy.segment_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let started = tokio::time::Instant::now();
    let mut last_message = tokio::time::Instant::now();
    loop {
        let flush_now = tokio::select! {
            msg = stream.message() => {
                last_message = tokio::time::Instant::now();
                let msg = match msg {
                    Ok(Some(m)) => m,
                    Ok(None) => return w.flush_then("the watch ended".into()).await,
                    Err(e) => return w.flush_then(format!("{member}: {e}")).await,
                };
                if msg.compact_revision() > 0 {
                    let _ = w.flush().await;
                    return Outcome::Compacted(msg.compact_revision());
                }
                if msg.canceled() {
                    return w.flush_then(format!("watch canceled: {}", msg.cancel_reason())).await;
                }
                if msg.events().is_empty() && !msg.created() {
                    // etcd's answer to a progress request: every change
                    // up to now was delivered.
                    w.heard_all(now_ms());
                }
                for ev in msg.events() {
                    let Some(rev) = ev.kv().map(etcd_client::KeyValue::mod_revision) else { continue };
                    if rev <= w.chain.last_revision() || w.pending.last().is_some_and(|p| rev < p.revision) {
                        continue;
                    }
                    delta::push_watched(&mut w.pending, ev);
                    waiting += 1;
                }
                waiting >= policy.max_events
            }
            _ = tick.tick() => {
                if last_message.elapsed() >= stall {
                    return w.flush_then(format!(
                        "{member}: its watch sent nothing for {stall:?} (not even an answer to a \
                         progress request): taken as stuck"
                    )).await;
                }
                if let Err(e) = stream.request_progress().await {
                    return w.flush_then(format!("{member}: progress request: {e}")).await;
                }
                // What waits goes to the store first: the listing below
                // must not hold it back (a standby waits for it).
                if let Err(e) = w.flush().await {
                    return Outcome::Failed(e);
                }
                waiting = 0;
                let listed = store.list(location).await.unwrap_or_default();
                if let Some(newer) = listed.first().filter(|m| Some(&m.name) != newest.as_ref())
                    && w.chain.last_revision() >= newer.revision
                {
                    // A newer full backup: this chain went on until it held
                    // the new backup's revision, so that every revision is
                    // in some chain (a standby or a point-in-time restore
                    // never meets a gap between two chains); the segments
                    // follow the new backup from now on.
                    return Outcome::NewBase;
                }
                if started.elapsed() >= RECHECK {
                    return Outcome::Recheck;
                }
                false
            }
        };
        if flush_now && !w.pending.is_empty() {
            if let Err(e) = w.flush().await {
                return Outcome::Failed(e);
            }
            waiting = 0;
        }
    }
}

/// The chain being extended, what waits to be written to it, and what the
/// follower knows of where the store stands.
struct Written<'a, S> {
    store: &'a S,
    location: &'a Location,
    chain: &'a mut Chain,
    pending: Vec<Revision>,
    progress: &'a mut Progress,
    /// When etcd last confirmed every change up to then delivered.
    heard: Option<u64>,
    set: &'a (dyn Fn(ChainStatus) + Sync),
}

impl<S: BackupStore> Written<'_, S> {
    /// etcd confirmed, at `at_ms`, every change delivered: with nothing
    /// waiting, the store holds every change as of then.
    fn heard_all(&mut self, at_ms: u64) {
        self.heard = Some(at_ms);
        if self.pending.is_empty() && self.progress.synced_ms < Some(at_ms) {
            self.progress.synced_ms = Some(at_ms);
            (self.set)(chain_status(self.chain, None, self.progress));
        }
    }

    /// Writes what is pending, then fails with `why`.
    async fn flush_then(&mut self, why: String) -> Outcome {
        match self.flush().await {
            Ok(()) => Outcome::Failed(why),
            Err(e) => Outcome::Failed(format!("{why}; {e}")),
        }
    }

    /// Writes the pending revisions as the chain's next segment; once the
    /// store took it, everything etcd confirmed before is in the store.
    async fn flush(&mut self) -> Result<(), String> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let confirmed = self.heard;
        let segment = Segment {
            base: self.chain.base.clone(),
            seq: self.chain.next_seq(),
            unix_ms: now_ms(),
            revisions: std::mem::take(&mut self.pending),
            prev: self.chain.next_prev,
        };
        self.store
            .append(self.location, &segment)
            .await
            .map_err(|e| {
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
        let chain = &mut *self.chain;
        chain.next_prev = hash;
        chain.files += 1;
        chain.segments.push(segment);
        // Only the last segment is needed to go on: keep memory flat.
        let last = chain.segments.len() - 1;
        chain.segments.drain(..last);
        self.progress.error = None;
        if confirmed > self.progress.synced_ms {
            self.progress.synced_ms = confirmed;
        }
        (self.set)(chain_status(self.chain, None, self.progress));
        Ok(())
    }
}
