//! The backup schedule of one cluster: a task of its own, so a long
//! snapshot never delays healing. The cluster's reconcile loop offers it
//! the members that are ready; the task takes a backup when one is due
//! (the newest good backup's time plus the interval, so the schedule
//! survives an operator restart), retries failures with backoff, applies
//! retention, and keeps a [`BackupStatus`] for the cluster's status. Every
//! backup goes through the cluster's [`BackupStore`]. With continuous
//! backups, the follower of [`super::follow`] runs beside it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use tracing::Instrument;

use super::{BackupStore, Location, task};
use crate::crd::BackupStatus;
use crate::metrics::ClusterMetrics;
use crate::validate::BackupPolicy;

use super::Candidate;

/// A running schedule. Dropping it stops the task.
#[derive(Debug)]
pub struct Schedule {
    policy: BackupPolicy,
    location: Location,
    candidates: watch::Sender<Vec<Candidate>>,
    status: Arc<Mutex<BackupStatus>>,
    task: JoinHandle<()>,
    /// The restore checks (`policy.restore_check`), when on.
    checks: Option<JoinHandle<()>>,
    /// The follower of continuous backups (`policy.continuous`), when on.
    follower: Option<JoinHandle<()>>,
    /// Set when one of its tasks panicked (a bug): the schedule then no
    /// longer [`Schedule::runs`], so the controller starts a new one.
    panicked: Arc<AtomicBool>,
}

/// Spawns `task`, setting `panicked` if it panics instead of leaving the
/// cluster without backups and nobody told.
fn spawn_watched<F>(task: F, panicked: &Arc<AtomicBool>) -> JoinHandle<()>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    use futures::FutureExt;
    let panicked = Arc::clone(panicked);
    tokio::spawn(async move {
        if std::panic::AssertUnwindSafe(task)
            .catch_unwind()
            .await
            .is_err()
        {
            tracing::error!("a backup task panicked (a bug): the schedule starts again");
            panicked.store(true, Ordering::SeqCst);
        }
    })
}

impl Schedule {
    /// Starts backing a cluster up into `location` of `store` on `policy`;
    /// each backup taken or failed is counted in `metrics`; with
    /// `full_now`, the first backup is due at once (after a rebuild: the
    /// backups kept hold another history).
    pub fn start<S: BackupStore>(
        policy: BackupPolicy,
        location: Location,
        store: Arc<S>,
        metrics: ClusterMetrics,
        full_now: bool,
    ) -> Self {
        let (candidates, rx) = watch::channel(Vec::new());
        let status = Arc::new(Mutex::new(BackupStatus::default()));
        let span = tracing::info_span!("backups", cluster = %location.cluster);
        let panicked = Arc::new(AtomicBool::new(false));
        let checks = policy.restore_check.map(|every| {
            spawn_watched(
                super::proof_schedule::run(
                    every,
                    location.clone(),
                    store.clone(),
                    candidates.subscribe(),
                    status.clone(),
                )
                .instrument(span.clone()),
                &panicked,
            )
        });
        let want_full = Arc::new(Notify::new());
        let follower = policy.continuous.map(|c| {
            spawn_watched(
                store
                    .clone()
                    .follow(
                        c,
                        location.clone(),
                        candidates.subscribe(),
                        status.clone(),
                        want_full.clone(),
                    )
                    .instrument(span.clone()),
                &panicked,
            )
        });
        let task = spawn_watched(
            run(
                policy.clone(),
                location.clone(),
                store,
                rx,
                (status.clone(), metrics, want_full),
                full_now,
            )
            .instrument(span),
            &panicked,
        );
        Schedule {
            policy,
            location,
            candidates,
            status,
            task,
            checks,
            follower,
            panicked,
        }
    }

    /// Whether this schedule runs `policy` into `location`.
    /// A schedule one of whose tasks panicked runs nothing.
    pub fn runs(&self, policy: &BackupPolicy, location: &Location) -> bool {
        !self.panicked.load(Ordering::SeqCst)
            && self.policy == *policy
            && self.location == *location
    }

    /// The members backups may come from now, preferred first (empty when
    /// the cluster has no quorum).
    pub fn offer(&self, candidates: Vec<Candidate>) {
        self.candidates.send_if_modified(|c| {
            let changed = *c != candidates;
            *c = candidates;
            changed
        });
    }

    /// Where backups stand.
    pub fn status(&self) -> BackupStatus {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for Schedule {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(checks) = &self.checks {
            checks.abort();
        }
        if let Some(follower) = &self.follower {
            follower.abort();
        }
    }
}

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis(),
    )
    .unwrap_or(u64::MAX)
}

/// `ms` since the epoch as RFC 3339, capped at the last second of 9999
/// (RFC 3339 has four-digit years; past it the formatter panics).
fn rfc3339(ms: u64) -> String {
    const MAX_MS: u64 = 253_402_300_799_000; // 9999-12-31T23:59:59Z
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms.min(MAX_MS)))
        .to_string()
}

async fn run<S: BackupStore>(
    policy: BackupPolicy,
    location: Location,
    store: Arc<S>,
    candidates: watch::Receiver<Vec<Candidate>>,
    (status, metrics, want_full): (Arc<Mutex<BackupStatus>>, ClusterMetrics, Arc<Notify>),
    mut full_now: bool,
) {
    let set = |f: &dyn Fn(&mut BackupStatus)| task::update(&status, f);
    let mut sources = task::Sources::new(candidates);
    let interval_ms = u64::try_from(policy.interval.as_millis()).unwrap_or(u64::MAX);
    let mut damaged = match store.retain(&location, policy.max_backups).await {
        Ok(r) => r.damaged,
        Err(e) => {
            tracing::warn!("retention failed: {e}");
            Vec::new()
        }
    };
    let mut failures: u32 = 0;
    loop {
        let kept = store.list(&location).await.unwrap_or_default();
        let due = match kept.first() {
            Some(m) if !full_now => m.unix_ms.saturating_add(interval_ms),
            _ => 0,
        };
        let good = kept.iter().filter(|m| !damaged.contains(&m.name)).count();
        let shared = store.shared_with(&location).await;
        set(&|s| {
            s.shared_with.clone_from(&shared);
            s.damaged.clone_from(&damaged);
            s.kept = i64::try_from(good).unwrap_or(i64::MAX);
            if let Some(m) = kept.first() {
                s.last_backup = Some(m.name.clone());
                s.last_backup_time = Some(m.time.clone());
                s.last_backup_revision = Some(m.revision);
            }
            s.next_backup_time = Some(rfc3339(due.max(now_ms())));
        });
        let wait = due.saturating_sub(now_ms());
        if wait > 0 {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
                // The chain of delta segments ended: a full backup now
                // starts the next one.
                _ = want_full.notified() => full_now = true,
            }
            continue; // list again: a manual backup may have come in
        }
        // No member ready yet (the cluster forming or healing): the backup
        // waits, which its time in the past says; that is no failure.
        let Some(candidate) = sources.pick().await else {
            continue;
        };
        match store.save(&location, task::source(&candidate)).await {
            Ok(meta) => {
                failures = 0;
                let taken = UNIX_EPOCH + Duration::from_millis(meta.unix_ms);
                metrics.backup_taken(meta.size, taken);
                full_now = false;
                tracing::info!(
                    backup = %meta.name, revision = meta.revision, bytes = meta.size,
                    from = %meta.member, "backup taken and verified"
                );
                match store.retain(&location, policy.max_backups).await {
                    Ok(r) => {
                        if !r.deleted.is_empty() {
                            tracing::info!("retention deleted {}", r.deleted.join(", "));
                        }
                        if !r.damaged.is_empty() {
                            tracing::error!(
                                "damaged backups, not counted as kept: {}",
                                r.damaged.join(", ")
                            );
                        }
                        damaged = r.damaged;
                    }
                    Err(e) => tracing::warn!("retention failed: {e}"),
                }
                set(&|s| s.last_error = None);
            }
            Err(e) => {
                failures += 1;
                sources.failed(); // try another member next time
                metrics.backup_failed();
                tracing::warn!("backup failed (attempt {failures}): {e}");
                let message = format!("backup failed (attempt {failures}, will retry): {e}");
                set(&|s| s.last_error = Some(message.clone()));
                let backoff = Duration::from_secs(1 << failures.min(6))
                    .min(policy.interval.max(Duration::from_secs(1)));
                tokio::time::sleep(backoff).await;
            }
        }
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
