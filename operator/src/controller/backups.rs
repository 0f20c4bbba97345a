//! The controller's side of backups: running a cluster's schedule, choosing
//! the snapshot a bootstrap restores from, and rebuilding a cluster whose
//! quorum is lost for good.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use super::act::Error;
use super::{Cluster, SpecState};
use crate::backup::{self, BackupMeta, schedule::Schedule};
use crate::crd::RecoveryStatus;
use crate::observe::Observation;
use crate::platform::Platform;
use crate::platform::local::binaries::Binaries;
use crate::validate::ValidSpec;

/// Where backups live and the tools that check and restore them.
#[derive(Debug)]
pub struct BackupEnv {
    /// The operator's state folder (default backup folders are below it).
    pub state_dir: PathBuf,
    /// etcd tools.
    pub binaries: Arc<Binaries>,
}

impl BackupEnv {
    /// The backup folder of `cluster` under `spec`.
    pub fn dir(&self, cluster: &str, spec: &ValidSpec) -> PathBuf {
        let path = spec.backup.as_ref().and_then(|b| b.path.as_deref());
        backup::backup_dir(&self.state_dir, cluster, path)
    }

    /// Folders a backup name is looked up in: the cluster's own, then every
    /// default backup folder (a new cluster restores another's backups).
    pub fn lookup_dirs(&self, cluster: &str, spec: &ValidSpec) -> Vec<PathBuf> {
        let mut dirs = vec![self.dir(cluster, spec)];
        if let Ok(entries) = std::fs::read_dir(self.state_dir.join("backups")) {
            let mut more: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            more.sort();
            more.retain(|d| *d != dirs[0]);
            dirs.extend(more);
        }
        dirs
    }

    /// Copies a snapshot into the cluster's folder, so retention cannot take
    /// it away while members are restored from it.
    fn stash(&self, cluster: &str, snapshot: &Path) -> Result<PathBuf, Error> {
        let dest = self
            .state_dir
            .join("clusters")
            .join(cluster)
            .join("restore.db");
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir).map_err(|e| backup_io(&dest, e))?;
        }
        std::fs::copy(snapshot, &dest).map_err(|e| backup_io(&dest, e))?;
        Ok(dest)
    }
}

fn backup_io(path: &Path, source: std::io::Error) -> Error {
    Error::Backup(backup::Error::Io {
        what: format!("cannot copy the snapshot to {}", path.display()),
        source,
    })
}

impl<P: Platform> Cluster<P> {
    /// Starts, restarts or stops the backup schedule to match the spec.
    pub(super) fn sync_schedule(&mut self) {
        let (SpecState::Valid { spec, .. }, Some(env)) = (&self.spec, &self.backup_env) else {
            return;
        };
        let Some(policy) = &spec.backup else {
            self.schedule = None;
            return;
        };
        let dir = env.dir(&self.name, spec);
        if self.schedule.as_ref().is_some_and(|s| s.runs(policy, &dir)) {
            return;
        }
        tracing::info!(
            cluster = %self.name, dir = %dir.display(), interval = ?policy.interval,
            keep = policy.max_backups, "backup schedule"
        );
        self.schedule = Some(Schedule::start(
            &self.name,
            policy.clone(),
            dir,
            env.binaries.clone(),
        ));
    }

    /// Offers the ready members (followers first) to the schedule.
    pub(super) fn offer_backup_sources(&self, obs: &Observation) {
        let Some(schedule) = &self.schedule else {
            return;
        };
        let mut ready: Vec<_> = obs
            .members
            .iter()
            .filter(|m| m.ready && obs.observed.membership_known && !m.learner)
            .collect();
        ready.sort_by_key(|m| m.leader);
        schedule.offer(
            ready
                .iter()
                .map(|m| (m.name.clone(), m.client_url.clone()))
                .collect(),
        );
    }

    /// Whether a verified backup exists to rebuild from.
    ///
    /// Only asked while quorum is lost, and only worth an answer when the
    /// spec allows a rebuild. Each file is hashed once: the answer is kept
    /// by name, size and modification time, so a long wait without quorum
    /// does not re-read the backups every pass.
    pub(super) fn backup_available(&mut self) -> bool {
        let (SpecState::Valid { spec, .. }, Some(env)) = (&self.spec, &self.backup_env) else {
            return false;
        };
        if !spec.restore_from_backup {
            return false;
        }
        let dir = env.dir(&self.name, spec);
        let Ok(metas) = backup::list(&dir) else {
            return false;
        };
        for meta in metas {
            let path = meta.path(&dir);
            let Ok(stat) = std::fs::metadata(&path) else {
                continue;
            };
            let key = (stat.len(), stat.modified().ok());
            let good = match self.checked_backups.get(&meta.name) {
                Some((k, good)) if *k == key => *good,
                _ => {
                    let good = backup::check_file(&path, Some(&meta.sha256)).is_ok();
                    self.checked_backups.insert(meta.name.clone(), (key, good));
                    good
                }
            };
            if good {
                return true;
            }
        }
        false
    }

    /// The snapshot a new bootstrap restores every member from: the one a
    /// recovery chose, or `spec.restore` for a cluster created from a backup.
    pub(super) fn restore_source(&mut self, spec: &ValidSpec) -> Result<Option<PathBuf>, Error> {
        if self.record.restore_from.is_some() || !self.record.initial.is_empty() {
            return Ok(self.record.restore_from.clone());
        }
        let (Some(name), Some(env)) = (&spec.restore, &self.backup_env) else {
            return Ok(None);
        };
        let found = backup::resolve(name, &env.lookup_dirs(&self.name, spec))?;
        let stashed = env.stash(&self.name, &found)?;
        tracing::info!(cluster = %self.name, from = %found.display(), "creating the cluster from a backup");
        self.record.restore_from = Some(stashed);
        self.record.created_from = Some(name.clone());
        Ok(self.record.restore_from.clone())
    }

    /// Rebuilds a cluster whose quorum is lost for good from the newest
    /// verified backup, and records what was lost.
    pub(super) async fn rebuild_from_backup(&mut self, spec: &ValidSpec) -> Result<(), Error> {
        let env = self.backup_env.as_ref().ok_or(Error::NoBackup)?;
        let dir = env.dir(&self.name, spec);
        let (meta, skipped) = backup::newest_good(&dir)?;
        for p in &skipped {
            tracing::error!(cluster = %self.name, "skipping a damaged backup: {p}");
        }
        let meta: BackupMeta = meta.ok_or(Error::NoBackup)?;
        let stashed = env.stash(&self.name, &meta.path(&dir))?;
        let now = SystemTime::now();
        let tag = humantime::format_rfc3339_seconds(now)
            .to_string()
            .replace(':', "");
        let old_data = self.platform.retire_members(&self.name, &tag).await?;
        let last_seen = self.record.last_revision;
        let lost = (last_seen - meta.revision).max(0);
        let recovery = RecoveryStatus {
            backup: meta.name.clone(),
            backup_time: meta.time.clone(),
            backup_revision: meta.revision,
            last_seen_revision: last_seen,
            lost_revisions: lost,
            recovered_at: humantime::format_rfc3339_seconds(now).to_string(),
            old_data,
        };
        tracing::error!(
            cluster = %self.name,
            "quorum lost for good: rebuilding from backup {} taken at {} (revision {}); the last \
             revision seen before the loss was {last_seen}, so {lost} revisions written after the \
             backup are lost; the old members' data is kept in {}",
            meta.name, meta.time, meta.revision, recovery.old_data
        );
        self.record.bootstrapped = false;
        self.record.initial.clear();
        self.record.restore_from = Some(stashed);
        self.record.last_recovery = Some(recovery);
        // The rebuilt cluster starts at the backup's revision: a later loss
        // is measured from there, not from the old cluster's history.
        self.record.last_revision = meta.revision;
        self.save_record().await;
        Ok(())
    }

    /// Once a bootstrap from a snapshot formed, the stashed copy goes.
    pub(super) async fn restore_done(&mut self) {
        if let Some(path) = self.record.restore_from.take() {
            let _ = std::fs::remove_file(&path);
            self.save_record().await;
        }
    }
}
