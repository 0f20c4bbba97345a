//! Probes: every tick (100 ms to 250 ms) each member's status, the member list,
//! a quorum write and a quorum read, and the operator's published status;
//! and every checkpoint interval the KV hash of every member at a common
//! revision. Ticks run as tasks of their own, so a slow tick (a paused
//! member, an election) does not delay the next one.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_operator::crd::EtcdCluster;
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;

use crate::client::Pool;
use crate::history::{Checkpoint, Listed, MemberView, Ms, Phase, Published, Sample, now_ms};
use crate::invariants::Violation;
use crate::invariants::health::assess;
use crate::invariants::leaders::LeaderTerms;

/// Where the operator's published resource comes from.
pub type StatusSource = Arc<dyn Fn() -> Option<EtcdCluster> + Send + Sync>;
/// Maps a member's client URL to the URL to connect to (identity locally,
/// a port-forward on Kubernetes).
pub type UrlMap = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// Longest a member's status call may take.
const STATUS_TIMEOUT: Duration = Duration::from_millis(400);
/// Ticks in flight at once, at most.
const IN_FLIGHT: usize = 8;
/// The key the probes write.
pub const PROBE_KEY: &str = "soak/probe";

/// Everything the probes recorded.
#[derive(Debug, Default)]
pub struct Recorder {
    /// Samples in time order.
    pub samples: Vec<Sample>,
    /// Health of each sample.
    pub healthy: Vec<bool>,
    /// Leaders per term.
    pub leaders: LeaderTerms,
    /// Violations found while probing (two leaders in a term).
    pub violations: Vec<Violation>,
    /// KV hash checkpoints.
    pub checkpoints: Vec<Checkpoint>,
}

impl Recorder {
    fn push(&mut self, s: Sample) {
        self.violations.extend(self.leaders.observe(&s));
        let healthy = assess(&s).ok();
        let i = self.samples.partition_point(|x| x.at <= s.at);
        self.samples.insert(i, s);
        self.healthy.insert(i, healthy);
    }

    /// Whether the newest sample is healthy.
    pub fn healthy_now(&self) -> bool {
        self.healthy.last().copied().unwrap_or(false)
    }

    /// First healthy sample at or after `at`.
    pub fn healthy_since(&self, at: Ms) -> Option<Ms> {
        let from = self.samples.partition_point(|s| s.at < at);
        (from..self.samples.len())
            .find(|&i| self.healthy[i])
            .map(|i| self.samples[i].at)
    }
}

/// Shared recorder.
pub type SharedRecorder = Arc<Mutex<Recorder>>;

/// Locks the recorder.
pub fn lock(r: &SharedRecorder) -> std::sync::MutexGuard<'_, Recorder> {
    r.lock().unwrap_or_else(|e| e.into_inner())
}

/// Takes probe samples.
pub struct Prober {
    pool: Arc<Pool>,
    timeout: Duration,
    status: Mutex<StatusSource>,
    map: UrlMap,
    known: Mutex<Vec<String>>,
    expected: AtomicUsize,
    expected_version: Mutex<Option<String>>,
    phase: Mutex<Phase>,
    turn: AtomicUsize,
}

impl std::fmt::Debug for Prober {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prober")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Prober {
    /// A prober of a cluster of `expected` members.
    pub fn new(
        pool: Arc<Pool>,
        timeout: Duration,
        status: StatusSource,
        map: UrlMap,
        expected: usize,
    ) -> Self {
        Prober {
            pool,
            timeout,
            status: Mutex::new(status),
            map,
            known: Mutex::new(Vec::new()),
            expected: AtomicUsize::new(expected),
            expected_version: Mutex::new(None),
            phase: Mutex::new(Phase::Run),
            turn: AtomicUsize::new(0),
        }
    }

    /// From now on the spec asks for `size` members running `version`.
    pub fn set_expected(&self, size: usize, version: Option<String>) {
        self.expected.store(size, Ordering::Relaxed);
        *self
            .expected_version
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = version;
    }

    /// Samples from now on belong to `phase`.
    pub fn set_phase(&self, phase: Phase) {
        *self.phase.lock().unwrap_or_else(|e| e.into_inner()) = phase;
    }

    /// The published resource, now.
    pub fn published(&self) -> Option<EtcdCluster> {
        let status = self
            .status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        status()
    }

    /// From now on probe another cluster, of `size` members, published at
    /// `status` (a promoted standby, once the primary is lost): the member
    /// list learnt so far is forgotten, so the load and the watchers,
    /// which follow the probes' endpoints, move with them.
    pub fn retarget(&self, status: StatusSource, size: usize) {
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = status;
        self.known.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.set_expected(size, None);
    }

    /// Client URLs to probe: the published members and the last member list.
    fn urls(&self, published: Option<&EtcdCluster>) -> Vec<String> {
        let mut set: BTreeSet<String> = self
            .known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect();
        if let Some(s) = published.and_then(|c| c.status.as_ref()) {
            set.extend(s.members.iter().map(|m| m.client_url.clone()));
        }
        set.into_iter().collect()
    }

    /// The URL to connect to for a member's client URL.
    pub fn map_url(&self, url: &str) -> String {
        (self.map)(url)
    }

    /// The URLs to connect to for the members of the last member list.
    pub fn endpoints(&self) -> Vec<String> {
        let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        known.iter().map(|u| (self.map)(u)).collect()
    }

    /// One tick.
    pub async fn tick(&self) -> Sample {
        let at = now_ms();
        let cluster = self.published();
        let urls = self.urls(cluster.as_ref());
        let mut sample = Sample::empty(at, self.expected.load(Ordering::Relaxed));
        sample.phase = *self.phase.lock().unwrap_or_else(|e| e.into_inner());
        sample.expected_version = self
            .expected_version
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        sample.published = cluster.as_ref().map(published);

        let statuses = futures::future::join_all(urls.iter().map(|u| self.status(u)));
        let (statuses, (write, read)) = tokio::join!(statuses, self.quorum(&urls, at));
        for (url, r) in urls.iter().zip(statuses) {
            match r {
                Ok(v) => sample.views.push(v),
                Err(e) => sample.failures.push((url.clone(), e)),
            }
        }
        sample.write_ok = write.is_some();
        sample.write_ms = write;
        sample.read_ok = read;

        // The member list from a member that has a leader.
        let mut order: Vec<&MemberView> = sample.views.iter().collect();
        order.sort_by_key(|v| v.leader == 0);
        for v in order.into_iter().take(2) {
            let url = (self.map)(&v.url);
            let r = self
                .pool
                .call(&url, STATUS_TIMEOUT, |mut c| async move {
                    c.member_list().await
                })
                .await;
            if let Ok(list) = r {
                let listed: Vec<Listed> = list
                    .members()
                    .iter()
                    .map(|m| Listed {
                        id: m.id(),
                        name: m.name().to_string(),
                        client_urls: m.client_urls().to_vec(),
                        learner: m.is_learner(),
                    })
                    .collect();
                let urls: Vec<String> = listed
                    .iter()
                    .flat_map(|m| m.client_urls.iter().cloned())
                    .collect();
                if !urls.is_empty() {
                    *self.known.lock().unwrap_or_else(|e| e.into_inner()) = urls;
                }
                sample.listed = Some(listed);
                break;
            }
        }
        sample
    }

    async fn status(&self, url: &str) -> Result<MemberView, String> {
        let r = self
            .pool
            .call(&(self.map)(url), STATUS_TIMEOUT, |mut c| async move {
                c.status().await
            })
            .await
            .map_err(|e| e.short())?;
        let header = r.header();
        Ok(MemberView {
            url: url.to_string(),
            cluster_id: header.map(|h| h.cluster_id()).unwrap_or_default(),
            id: header.map(|h| h.member_id()).unwrap_or_default(),
            leader: r.leader(),
            term: r.raft_term(),
            raft_index: r.raft_index(),
            revision: header.map(|h| h.revision()).unwrap_or_default(),
            learner: r.is_learner(),
            version: r.version().to_string(),
            errors: r.errors().to_vec(),
        })
    }

    /// A quorum write then a quorum read, trying members in turn within the
    /// deadline. Returns the write latency (ms) if acknowledged, and whether
    /// the read was answered.
    async fn quorum(&self, urls: &[String], at: Ms) -> (Option<u64>, bool) {
        if urls.is_empty() {
            return (None, false);
        }
        let deadline = Instant::now() + self.timeout;
        let start = Instant::now();
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        let mut write = None;
        let mut read = false;
        for i in 0..urls.len() * 2 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let url = (self.map)(&urls[(turn + i) % urls.len()]);
            if write.is_none() {
                let r = self
                    .pool
                    .call(&url, left, |mut c| async move {
                        c.put(PROBE_KEY, at.to_string(), None).await
                    })
                    .await;
                if r.is_ok() {
                    write = Some(u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX));
                } else {
                    continue;
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let r = self
                .pool
                .call(
                    &url,
                    left,
                    |mut c| async move { c.get(PROBE_KEY, None).await },
                )
                .await;
            if r.is_ok() {
                read = true;
                break;
            }
        }
        (write, read)
    }

    /// A KV hash checkpoint at the lowest revision all members have, if the
    /// newest sample shows them all healthy (or always, for the final one).
    pub async fn checkpoint(&self, latest: &Sample, final_check: bool) -> Option<Checkpoint> {
        if latest.views.is_empty() {
            return None;
        }
        let revision = latest.views.iter().map(|v| v.revision).min()?;
        let hashes = futures::future::join_all(latest.views.iter().map(|v| async move {
            let url = (self.map)(&v.url);
            let r = self
                .pool
                .call(&url, Duration::from_secs(5), |mut c| async move {
                    c.hash_kv(revision).await
                })
                .await
                .map(|h| (h.hash(), h.compact_version()))
                .map_err(|e| e.short());
            (v.url.clone(), r)
        }))
        .await;
        Some(Checkpoint {
            at: now_ms(),
            revision,
            hashes,
            final_check,
        })
    }
}

/// What the probes need from a published resource.
pub fn published(c: &EtcdCluster) -> Published {
    let s = c.status.clone().unwrap_or_default();
    let backup = s.backup.unwrap_or_default();
    let ms = |t: &str| {
        humantime::parse_rfc3339_weak(t)
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    };
    Published {
        phase: s.phase.as_str().to_string(),
        ready: s.ready_members,
        members: s.members.len(),
        backup_time: backup.last_backup_time.as_deref().and_then(ms),
        backup_revision: backup.last_backup_revision,
        chain_synced: backup
            .continuous
            .as_ref()
            .and_then(|c| c.synced_time.as_deref())
            .and_then(ms),
        chain_problem: backup
            .continuous
            .as_ref()
            .and_then(|c| c.problem.clone().or_else(|| c.last_error.clone())),
        backup_error: backup.last_error,
        restore_check: backup
            .last_restore_check
            .map(|c| crate::history::RestoreCheckSeen {
                backup: c.backup,
                time: c.time,
                result: c.result,
                message: c.message,
            }),
        restore: s.last_recovery.as_ref().and_then(|r| {
            Some(crate::history::Restore {
                at: ms(&r.recovered_at)?,
                // Where the rebuilt cluster starts: the backup plus the
                // delta segments replayed on it (continuous backups).
                backup_revision: r.seed_revision.max(r.backup_revision),
            })
        }),
    }
}

/// Probes every `interval` until `stop`; publishes the members' URLs to
/// `endpoints` for the load.
pub async fn run(
    prober: Arc<Prober>,
    rec: SharedRecorder,
    interval: Duration,
    endpoints: watch::Sender<Vec<String>>,
    stop: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => break,
        }
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            continue; // every slot busy: skip this tick
        };
        let (prober, rec, endpoints) = (prober.clone(), rec.clone(), endpoints.clone());
        tokio::spawn(async move {
            let sample = prober.tick().await;
            let eps = prober.endpoints();
            if !eps.is_empty() {
                endpoints.send_if_modified(|old| {
                    let changed = *old != eps;
                    if changed {
                        old.clone_from(&eps);
                    }
                    changed
                });
            }
            lock(&rec).push(sample);
            drop(permit);
        });
    }
    // Let the ticks in flight finish (each is bounded by its timeouts).
    let _ = permits
        .acquire_many(u32::try_from(IN_FLIGHT).unwrap_or(8))
        .await;
}

/// Takes a KV hash checkpoint every `every` while the cluster is healthy.
pub async fn checkpoints(
    prober: Arc<Prober>,
    rec: SharedRecorder,
    every: Duration,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => return,
        }
        let latest = {
            let r = lock(&rec);
            r.healthy_now().then(|| r.samples.last().cloned()).flatten()
        };
        if let Some(latest) = latest
            && let Some(cp) = prober.checkpoint(&latest, false).await
        {
            let mut r = lock(&rec);
            if let Some(v) = crate::invariants::hash::compare(&cp) {
                r.violations.push(v);
            }
            r.checkpoints.push(cp);
        }
    }
}
