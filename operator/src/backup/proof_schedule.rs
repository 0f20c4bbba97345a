//! Scheduled restore checks (`spec.backup.restoreCheck`): a task beside a
//! cluster's backup schedule that, every interval, proves the newest good
//! backup restores ([`BackupStore::restore_check`]) against a ready member
//! and keeps the result in the cluster's `status.backup.lastRestoreCheck`.
//! A check is due one interval after the newest backup's last check (at
//! once when it never had one), so an operator restart does not postpone
//! it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use super::Candidate;
use super::proof::Verdict;
use super::{BackupStore, Location, task};
use crate::crd::{BackupStatus, RestoreCheckStatus};

/// How long to wait before looking again when there is nothing to check
/// (no good backup yet) or the check could not run.
const RETRY: Duration = Duration::from_secs(5);

/// Runs restore checks every `every` until aborted.
pub async fn run<S: BackupStore>(
    every: Duration,
    location: Location,
    store: Arc<S>,
    candidates: watch::Receiver<Vec<Candidate>>,
    status: Arc<Mutex<BackupStatus>>,
) {
    let mut sources = task::Sources::new(candidates);
    loop {
        let newest = match store.newest_good(&location).await {
            Ok((Some(m), _)) => m,
            Ok((None, _)) => {
                tokio::time::sleep(RETRY).await;
                continue;
            }
            Err(e) => {
                tracing::warn!("restore check: cannot list backups: {e}");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        let last = newest
            .restore_check
            .as_ref()
            .and_then(|c| humantime::parse_rfc3339_weak(&c.time).ok());
        let wait = last
            .map(|t| {
                (t + every)
                    .duration_since(SystemTime::now())
                    .unwrap_or_default()
            })
            .unwrap_or_default();
        if !wait.is_zero() {
            tokio::time::sleep(wait.min(every)).await;
            continue; // look again: a newer backup may have come in
        }
        let Some(candidate) = sources.pick().await else {
            continue;
        };
        let source = task::source(&candidate);
        let shown = match store.restore_check(&location, &newest, source).await {
            Ok(check) => {
                if check.result == Verdict::Verified {
                    tracing::info!(backup = %newest.name, revision = newest.revision, "restore check: {}", check.message);
                } else {
                    tracing::warn!(backup = %newest.name, revision = newest.revision, result = %check.result, "restore check: {}", check.message);
                }
                RestoreCheckStatus {
                    backup: newest.name.clone(),
                    time: check.time,
                    result: check.result.to_string(),
                    message: check.message,
                }
            }
            Err(e) => {
                tracing::warn!(backup = %newest.name, "restore check could not run: {e}");
                RestoreCheckStatus {
                    backup: newest.name.clone(),
                    time: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
                    result: "failed".into(),
                    message: e.to_string(),
                }
            }
        };
        let failed = shown.result == "failed";
        if failed {
            sources.failed(); // another member next time
        }
        task::update(&status, |s| {
            if shown.result == Verdict::Mismatch.to_string() {
                s.last_error = Some(format!(
                    "restore check of backup {}: mismatch: {}",
                    shown.backup, shown.message
                ));
            }
            s.last_restore_check = Some(shown.clone());
        });
        // A check that ran is recorded in the meta and next due one
        // interval on; one that could not run is tried again sooner.
        tokio::time::sleep(if failed {
            RETRY.max(every.min(RETRY * 12))
        } else {
            Duration::from_millis(100)
        })
        .await;
    }
}
