//! The controller's side of backups: running a cluster's schedule, choosing
//! the snapshot a bootstrap restores from, and rebuilding a cluster whose
//! quorum is lost for good. Every backup goes through the platform's
//! [`BackupStore`]: nothing here touches files or etcd tools.

use std::time::{Duration, Instant, SystemTime};

use super::act::Error;
use super::{Cluster, SpecState};
use crate::backup::schedule::Schedule;
use crate::backup::{BackupStore, Location, RestoreSource};
use crate::crd::{RecoverySource, RecoveryStatus, RestoreStatus};
use crate::observe::Observation;
use crate::plan::{Step, Wait};
use crate::platform::{Notice, Platform};
use crate::validate::ValidSpec;

/// How long a cluster whose `spec.restore` names a backup that is not
/// there waits before it looks again, while the spec stays the same (the
/// backup may be copied in by hand): a spec change looks again at once.
pub const RESTORE_RETRY: Duration = Duration::from_secs(600);

/// A `spec.restore` refused because its backup is not where it was
/// looked for.
#[derive(Clone, Debug)]
pub(super) struct RestoreRefusal {
    /// The spec's generation it was refused for.
    generation: i64,
    /// Where it was looked for and what is there.
    why: String,
    /// When it is looked for again.
    retry: Instant,
    /// The same, for status.
    retry_at: SystemTime,
}

/// The uid of the resource of `spec` (Kubernetes), if it has one.
pub(super) fn spec_uid(spec: &SpecState) -> Option<String> {
    match spec {
        SpecState::Valid { resource, .. } => resource.metadata.uid.clone(),
        SpecState::Invalid { resource, .. } => {
            resource.as_ref().and_then(|r| r.metadata.uid.clone())
        }
    }
}

impl<P> Cluster<P> {
    /// The cluster's identity beside its name: its resource's uid on
    /// Kubernetes, the one kept in its record locally
    /// ([`crate::platform::ClusterRecord::uid`]). Its backups carry it
    /// ([`crate::backup::owner`]).
    pub(crate) fn uid(&self) -> Option<String> {
        spec_uid(&self.spec).or_else(|| self.record.uid.clone())
    }
}

impl<P: Platform> Cluster<P> {
    /// Where the cluster's backups are kept under `spec`.
    fn backup_location(&self, spec: &ValidSpec) -> Location {
        Location::of(&self.name, spec.backup.as_ref()).with_uid(self.uid().as_deref())
    }

    /// Starts, restarts or stops the backup schedule to match the spec. A
    /// standby takes backups of its own once promoted: until then etcd's
    /// auth refuses everyone but the applier (and it holds its source's
    /// revisions, which the source's backups have).
    pub(super) fn sync_schedule(&mut self) {
        let SpecState::Valid { spec, .. } = &self.spec else {
            return;
        };
        let Some(policy) = &spec.backup else {
            self.schedule = None;
            return;
        };
        if self.standby_holds_backups() {
            self.schedule = None;
            return;
        }
        let location = self.backup_location(spec);
        if self
            .schedule
            .as_ref()
            .is_some_and(|s| s.runs(policy, &location))
        {
            return;
        }
        let store = self.platform.backups();
        tracing::info!(
            dir = %store.describe(&location), interval = ?policy.interval,
            keep = policy.max_backups, "backup schedule"
        );
        let metrics = self.metrics.clone();
        self.schedule = Some(Schedule::start(
            policy.clone(),
            location,
            store,
            metrics,
            false,
        ));
    }

    /// What status says of backups the spec asks for and a standby does
    /// not take yet.
    pub(super) fn backups_waiting(&self) -> Option<crate::crd::BackupStatus> {
        let SpecState::Valid { spec, .. } = &self.spec else {
            return None;
        };
        (spec.backup.is_some() && self.standby_holds_backups()).then(|| crate::crd::BackupStatus {
            waiting: Some(
                "a standby takes backups of its own once it is promoted; until then it \
                     holds its source's revisions, which the source's backups have"
                    .into(),
            ),
            ..crate::crd::BackupStatus::default()
        })
    }

    /// After a rebuild the cluster's history goes on from another point:
    /// the schedule starts again and takes a full backup as soon as a
    /// member is ready, whatever the newest backup's age.
    pub(super) fn new_backup_chain(&mut self) {
        let SpecState::Valid { spec, .. } = &self.spec else {
            return;
        };
        let Some(policy) = &spec.backup else {
            return;
        };
        let location = self.backup_location(spec);
        let store = self.platform.backups();
        let metrics = self.metrics.clone();
        self.schedule = None;
        self.schedule = Some(Schedule::start(
            policy.clone(),
            location,
            store,
            metrics,
            true,
        ));
    }

    /// Offers the ready members (followers first) to the schedule.
    pub(super) fn offer_backup_sources(&self, obs: &Observation) {
        if let Some(schedule) = &self.schedule {
            schedule.offer(self.ready_candidates(obs, false));
        }
    }

    /// The ready voting members as candidates to work through (with the
    /// client certificate for `https://` URLs), the leader first or last.
    pub(super) fn ready_candidates(
        &self,
        obs: &Observation,
        leader_first: bool,
    ) -> Vec<crate::backup::Candidate> {
        let mut ready: Vec<_> = obs
            .members
            .iter()
            .filter(|m| m.ready && obs.observed.membership_known && !m.learner)
            .collect();
        ready.sort_by_key(|m| m.leader != leader_first);
        ready
            .iter()
            .map(|m| {
                let tls = crate::tls::is_https(&m.client_url)
                    .then(|| self.tls.client().cloned())
                    .flatten();
                (m.name.clone(), m.client_url.clone(), tls)
            })
            .collect()
    }

    /// The revision of the newest verified backup to rebuild from, if one
    /// exists: the plan prefers a survivor unless that backup holds more.
    /// Only asked while quorum is lost, and only worth an answer when the
    /// spec allows a rebuild from backups (the store remembers what it
    /// checked, see [`BackupStore::any_good`]).
    pub(super) async fn backup_available(&self) -> Option<i64> {
        let SpecState::Valid { spec, .. } = &self.spec else {
            return None;
        };
        if !spec.restore_from_backup {
            return None;
        }
        let location = self.backup_location(spec);
        let store = self.platform.backups();
        if !store.any_good(&location).await {
            return None;
        }
        match store.newest_good(&location).await {
            Ok((Some(meta), _)) => Some(meta.revision),
            _ => None,
        }
    }

    /// The snapshot a new bootstrap restores every member from: the one a
    /// recovery chose, or `spec.restore` for a cluster created from a backup.
    pub(super) async fn restore_source(
        &mut self,
        spec: &ValidSpec,
    ) -> Result<Option<RestoreSource>, Error> {
        if self.record.restore_from.is_some() || !self.record.initial.is_empty() {
            return Ok(self.record.restore_from.clone());
        }
        // A new standby starts from its source's newest backup (never
        // again once it was promoted: it is a cluster of its own then).
        let promoted = self
            .record
            .standby
            .as_ref()
            .is_some_and(|s| s.state == crate::standby::state::PROMOTED);
        if let Some(standby) = spec.standby.as_ref().filter(|s| !s.promote && !promoted) {
            return self.standby_source(standby).await.map(Some);
        }
        let Some(name) = &spec.restore else {
            return Ok(None);
        };
        // Another cluster's backups, in their own place (spec.restore).
        let location = Location::restore(&self.name, name, &spec.restore_from);
        // With continuous backups, the snapshot set aside holds the delta
        // segments of the backup's chain replayed on it, as for a rebuild.
        let restored = self
            .platform
            .backups()
            .open_named_for_restore(&location, name)
            .await?;
        let replayed = restored.replayed;
        if let Some(p) = &restored.problem {
            tracing::error!(backup = %name, "delta segments not replayed: {p}");
        }
        tracing::info!(
            backup = %name, segments = replayed.segments, revision = replayed.revision,
            "creating the cluster from a backup"
        );
        self.record.restored = Some(RestoreStatus {
            backup: name.clone(),
            restored_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            replayed_segments: i64::try_from(replayed.segments).unwrap_or(i64::MAX),
            replayed_revision: replayed.revision,
            last_segment_time: replayed.last_unix_ms.map(crate::backup::follow::rfc3339_ms),
            replay_problem: restored.problem,
        });
        self.record.restore_from = Some(restored.source);
        self.record.created_from = Some(name.clone());
        Ok(self.record.restore_from.clone())
    }

    /// Rebuilds a cluster whose quorum is lost for good from the newest
    /// verified backup, and records what was lost.
    pub(super) async fn rebuild_from_backup(&mut self, spec: &ValidSpec) -> Result<(), Error> {
        let store = self.platform.backups();
        let location = self.backup_location(spec);
        let (meta, skipped) = store.newest_good(&location).await?;
        for p in &skipped {
            tracing::error!("skipping a damaged backup: {p}");
        }
        let meta = meta.ok_or(Error::NoBackup)?;
        // With continuous backups, the snapshot set aside holds the delta
        // segments replayed on top of the backup.
        let restored = store.open_chain_for_restore(&location, &meta).await?;
        let staged = restored.source;
        let replayed = restored.replayed;
        let now = SystemTime::now();
        let old_data = self.retire_all(now).await?;
        let last_seen = self.last_seen_revision();
        let reached = replayed.revision.max(meta.revision);
        let lost = (last_seen - reached).max(0);
        // The loss window: from the newest change kept (the last segment
        // replayed, else the backup) to the last revision seen.
        let kept_ms = replayed.last_unix_ms.unwrap_or(meta.unix_ms);
        // Nothing seen is lost: no window, whatever the clocks say.
        let loss_window_ms = if lost == 0 {
            Some(0)
        } else {
            (self.record.last_revision_ms > 0).then(|| {
                i64::try_from(self.record.last_revision_ms.saturating_sub(kept_ms))
                    .unwrap_or(i64::MAX)
            })
        };
        let recovery = RecoveryStatus {
            source: RecoverySource::Backup,
            seed_revision: reached,
            backup: meta.name.clone(),
            backup_time: meta.time.clone(),
            backup_revision: meta.revision,
            last_seen_revision: last_seen,
            lost_revisions: lost,
            recovered_at: humantime::format_rfc3339_seconds(now).to_string(),
            old_data,
            replayed_segments: i64::try_from(replayed.segments).unwrap_or(i64::MAX),
            replayed_revision: reached,
            last_segment_time: replayed.last_unix_ms.map(crate::backup::follow::rfc3339_ms),
            loss_window_ms,
            replay_problem: restored.problem.clone(),
            ..RecoveryStatus::default()
        };
        if let Some(p) = &restored.problem {
            tracing::error!("delta segments not replayed: {p}");
        }
        let deltas = if replayed.segments > 0 {
            format!(
                " plus {} delta segments up to revision {reached} (the last written at {})",
                replayed.segments,
                recovery.last_segment_time.as_deref().unwrap_or("?")
            )
        } else {
            String::new()
        };
        let window = loss_window_ms.map_or(String::new(), |ms| {
            format!(", a loss window of {:.1} s", ms as f64 / 1000.0)
        });
        tracing::error!(
            "quorum lost for good: rebuilding from backup {} taken at {} (revision {}){deltas}; \
             the last revision seen before the loss was {last_seen}, so {lost} revisions written \
             after it are lost{window}; the old members' data is kept in {}",
            meta.name,
            meta.time,
            meta.revision,
            recovery.old_data
        );
        self.restore_from(staged, reached);
        let notice = Notice::warning(
            "RestoredFromBackup",
            format!(
                "quorum was lost for good: rebuilt from backup {} taken at {} (revision \
                 {}){deltas}; the last revision seen was {last_seen}, so up to {lost} revisions \
                 written after it are lost{window}; the old members' data is kept: {}",
                meta.name, meta.time, meta.revision, recovery.old_data
            ),
        );
        self.record.last_recovery = Some(recovery);
        self.lost = Some(super::facts::Lost::Quorum {
            from: format!("backup {}", meta.name),
        });
        self.save_record().await;
        self.new_backup_chain();
        self.platform.announce(&self.name, &notice).await;
        Ok(())
    }

    /// Stops every member and moves their data aside (never deleted: it may
    /// hold what a restore loses), tagged with `now`; says where it went.
    pub(super) async fn retire_all(&mut self, now: SystemTime) -> Result<String, Error> {
        let tag = humantime::format_rfc3339_seconds(now)
            .to_string()
            .replace(':', "");
        Ok(self.platform.retire_members(&self.name, &tag).await?)
    }

    /// The next bootstrap restores every member from `staged`, at
    /// `revision`: a later loss is measured from there, not from the old
    /// members' history.
    pub(super) fn restore_from(&mut self, staged: RestoreSource, revision: i64) {
        self.record.bootstrapped = false;
        self.record.reseeding = None;
        self.record.initial.clear();
        self.record.restore_from = Some(staged);
        self.record.last_revision = revision;
    }

    /// Notes that the bootstrap's restore found no backup by the name
    /// `spec.restore` gives (`e` says where it looked, in the user's terms,
    /// and what is there): the cluster is not created until the spec
    /// changes or [`RESTORE_RETRY`] passes. Said once per spec as a
    /// Warning.
    pub(super) async fn refuse_restore(&mut self, e: &crate::backup::Error) {
        let why = format!("spec.restore.backup: {e}");
        let first = self
            .restore_refused
            .as_ref()
            .is_none_or(|r| r.generation != self.record.generation || r.why != why);
        self.restore_refused = Some(RestoreRefusal {
            generation: self.record.generation,
            why: why.clone(),
            retry: Instant::now() + RESTORE_RETRY,
            retry_at: SystemTime::now() + RESTORE_RETRY,
        });
        if first {
            let message = format!(
                "{why}; the cluster is not created until spec.restore names a backup that is there"
            );
            self.tell(vec![Notice::warning("RestoreRefused", message)])
                .await;
        }
    }

    /// `step`, or the wait a bootstrap becomes while the restore stays
    /// refused for this spec (a new spec, or the retry's time, lets it
    /// go on).
    pub(super) fn restore_wait(&mut self, step: Step) -> Step {
        let generation = self.record.generation;
        if self
            .restore_refused
            .as_ref()
            .is_some_and(|r| r.generation != generation)
        {
            self.restore_refused = None;
        }
        match &self.restore_refused {
            Some(r) if step == Step::Bootstrap && Instant::now() < r.retry => {
                let at = humantime::format_rfc3339_seconds(r.retry_at);
                Step::Wait(Wait::RestoreNotFound {
                    message: format!(
                        "{}; the cluster is not created: name a backup that is there in \
                         spec.restore.backup (with spec.restore.cluster and location when it is \
                         another cluster's) and it is looked for again at once, else at {at}",
                        r.why
                    ),
                })
            }
            _ => step,
        }
    }

    /// Once a bootstrap from a snapshot formed, the copy set aside goes.
    pub(super) async fn restore_done(&mut self) {
        if let Some(source) = self.record.restore_from.take() {
            self.platform.backups().close_restore(&source).await;
            self.save_record().await;
        }
    }
}
