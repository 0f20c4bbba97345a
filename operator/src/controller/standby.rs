//! The controller's side of a standby (`spec.standby`,
//! [`crate::standby`]): its bootstrap from the source's newest good full
//! backup with the chain replayed, the applier started once the cluster
//! formed and offered the ready members, promotion, and what status says;
//! while it is a standby, every call to its members carries the root
//! credentials of its etcd auth ([`crate::standby::auth`]).

use std::time::SystemTime;

use super::act::Error;
use super::{Cluster, SpecState};
use crate::backup::{BackupStore, Location, RestoreSource};
use crate::crd::{OnGap, RestoreStatus, RevisionRange, StandbyRebootstrap, StandbyStatus};
use crate::observe::Observation;
use crate::platform::Platform;
use crate::platform::{ClusterRecord, Notice};
use crate::standby::{Applier, auth, state};
use crate::validate::standby::Standby;

/// How long after a failed attempt to create the standby again past a gap
/// the next one is made (each reads the source's newest backup and its
/// chain).
const REBOOTSTRAP_RETRY: std::time::Duration = std::time::Duration::from_secs(30);

/// Where the source's backups are, as `standby` says, read for `cluster`.
fn source_location(cluster: &str, standby: &Standby) -> Location {
    let mut l = Location::restore(cluster, standby.source(), &standby.from);
    l.source = Some(standby.source().to_string());
    l
}

impl<P: Platform> Cluster<P> {
    /// The snapshot a new standby's members restore from: the source's
    /// newest good full backup with its chain replayed on it, the source's
    /// identity pinned in the record.
    pub(super) async fn standby_source(
        &mut self,
        standby: &Standby,
    ) -> Result<RestoreSource, Error> {
        let store = self.platform.backups();
        let location = source_location(&self.name, standby);
        let (meta, skipped) = store.newest_good(&location).await?;
        for p in &skipped {
            tracing::error!("standby: skipping a damaged backup of the source: {p}");
        }
        let meta = meta.ok_or_else(|| {
            Error::NoStandbySource(format!(
                "no good backup of {} in {}{}",
                standby.source(),
                store.describe(&location),
                if skipped.is_empty() {
                    String::new()
                } else {
                    format!(" (only damaged ones: {})", skipped.join("; "))
                }
            ))
        })?;
        let restored = store.open_chain_for_restore(&location, &meta).await?;
        let replayed = restored.replayed;
        let revision = replayed.revision.max(meta.revision);
        tracing::info!(
            source = %standby.source(), backup = %meta.name, segments = replayed.segments,
            revision, "creating a standby from the source's newest backup"
        );
        let written = replayed.last_unix_ms.unwrap_or(meta.unix_ms);
        self.record.restored = Some(RestoreStatus {
            backup: meta.name.clone(),
            restored_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            replayed_segments: i64::try_from(replayed.segments).unwrap_or(i64::MAX),
            replayed_revision: revision,
            last_segment_time: replayed.last_unix_ms.map(crate::units::rfc3339_ms),
            replay_problem: restored.problem,
        });
        self.record.standby = Some(StandbyStatus {
            state: state::FOLLOWING.into(),
            source: standby.source().to_string(),
            source_uid: meta.uid.clone(),
            applied_revision: revision,
            applied_time: Some(crate::units::rfc3339_ms(written)),
            source_revision: revision,
            source_time: Some(crate::units::rfc3339_ms(written)),
            ..StandbyStatus::default()
        });
        self.record.restore_from = Some(restored.source.clone());
        Ok(restored.source)
    }

    /// Starts, keeps or stops the applier to match the spec; asks it to
    /// promote when the spec says so (or no longer names a source), and
    /// keeps its final word in the record once it is promoted.
    pub(super) async fn sync_standby(&mut self, obs: &Observation) {
        let standby = match &self.spec {
            SpecState::Valid { spec, .. } => spec.standby.clone(),
            SpecState::Invalid { .. } => return,
        };
        let promoted =
            |r: &Option<StandbyStatus>| r.as_ref().is_some_and(|s| s.state == state::PROMOTED);
        if let Some(applier) = &self.standby
            && applier.promoted()
        {
            self.record.standby = Some(applier.status());
            self.standby = None;
            self.save_record().await;
            let notice = Notice::normal(
                "Promoted",
                "the standby is promoted: etcd's auth is off, it takes clients' writes",
            );
            self.platform.announce(&self.name, &notice).await;
        }
        if promoted(&self.record.standby) || !self.record.bootstrapped {
            return;
        }
        let Some(record) = self.record.standby.clone() else {
            return;
        };
        let Some(standby) = standby else {
            // spec.standby removed: promote.
            match &self.standby {
                Some(a) => a.promote(),
                None => {
                    // Everyone's writes from now on: etcd's auth off (it
                    // may be on from before a restart).
                    if let Err(e) = self.open_writes(obs).await {
                        tracing::warn!("promoting: cannot turn etcd's auth off (will retry): {e}");
                        return;
                    }
                    self.record.standby = Some(StandbyStatus {
                        state: state::PROMOTED.into(),
                        promoted_at: Some(
                            crate::units::rfc3339_ms(crate::backup::follow::now_ms()),
                        ),
                        message: Some("spec.standby was removed before following began".into()),
                        read_only: Some(false),
                        read_user: None,
                        read_password_file: None,
                        read_password_secret: None,
                        ..record
                    });
                    self.save_record().await;
                }
            }
            return;
        };
        if let Some(missing) = self.standby_gap(&standby) {
            if self
                .rebootstrap_failed
                .is_some_and(|at| at.elapsed() < REBOOTSTRAP_RETRY)
            {
                return;
            }
            match self.rebootstrap_standby(&standby, missing).await {
                Ok(()) => self.rebootstrap_failed = None,
                Err(e) => {
                    tracing::error!("standby: cannot create it again past the gap: {e}");
                    self.rebootstrap_failed = Some(std::time::Instant::now());
                }
            }
            return;
        }
        let location = source_location(&self.name, &standby);
        let stream = standby.stream.as_ref();
        // Asked on every pass: on Kubernetes a credentials Secret changed
        // opens the store again, and the applier goes on through it.
        let reads = self.platform.standby_reads(&self.name, &location).await;
        let keep = self.standby.as_ref().is_some_and(|a| {
            a.follows(&location, stream) && reads.as_ref().map_or(true, |s| a.reads_through(s))
        });
        if !keep {
            let store = match reads {
                Ok(s) => s,
                Err(e) => {
                    return self.standby_waits(format!("cannot read the source's backups: {e}"));
                }
            };
            let secrets = match self.standby_secrets().await {
                Ok(s) => s,
                Err(e) => {
                    let e = format!("{e}; not following until clients' writes can be refused");
                    return self.standby_waits(e);
                }
            };
            let how = (location, standby.stream.clone());
            // Where the applier it replaces left off, else the record;
            // what kept it from starting is past.
            let from = self.standby.as_ref().map_or(record, Applier::status);
            let from = StandbyStatus {
                message: None,
                ..from
            };
            self.standby = Some(Applier::start(store, how, from, Some(secrets)));
        }
        if standby.promote
            && let Some(a) = &self.standby
        {
            a.promote();
        }
    }

    /// The revisions a stopped standby cannot apply one by one, when the
    /// spec lets it be created again past them.
    fn standby_gap(&self, standby: &Standby) -> Option<RevisionRange> {
        if standby.on_gap != OnGap::Rebootstrap || standby.promote {
            return None;
        }
        let status = self.standby.as_ref()?.status();
        (status.state == state::STOPPED)
            .then_some(status.missing)
            .flatten()
    }

    /// Creates the standby again past a gap in its source's chains: from
    /// the source's newest good backup (with its chain replayed), once it
    /// is past the gap; the applier stops, the members' data is moved
    /// aside (never deleted) and the cluster bootstraps from that backup
    /// as a new standby does. Status and a Warning Event say which
    /// revisions it never applied one by one.
    async fn rebootstrap_standby(
        &mut self,
        standby: &Standby,
        missing: RevisionRange,
    ) -> Result<(), Error> {
        let before = self.record.clone();
        let source = self.standby_source(standby).await.inspect_err(|_| {
            self.record = before.clone();
        })?;
        let store = self.platform.backups();
        let (backup, revision) = match (&self.record.restored, &self.record.standby) {
            (Some(r), Some(s)) => (r.backup.clone(), s.applied_revision),
            _ => (String::new(), 0),
        };
        let uid = |r: &ClusterRecord| r.standby.as_ref().and_then(|s| s.source_uid.clone());
        let refused = if uid(&self.record) != uid(&before) {
            Some(format!(
                "the source's newest good backup ({backup}) is another cluster's (uid {:?}; this \
                 standby follows {:?}): never followed",
                uid(&self.record),
                uid(&before)
            ))
        } else if revision < missing.to {
            Some(format!(
                "the source's newest good backup ({backup}) holds revision {revision}, not past \
                 the gap (revisions {} to {}): waiting for a newer one",
                missing.from, missing.to
            ))
        } else {
            None
        };
        if let Some(why) = refused {
            store.close_restore(&source).await;
            self.record = before;
            return Err(Error::NoStandbySource(why));
        }
        self.standby = None;
        let now = SystemTime::now();
        let old_data = match self.retire_all(now).await {
            Ok(d) => d,
            Err(e) => {
                store.close_restore(&source).await;
                self.record = before;
                return Err(e);
            }
        };
        self.restore_from(source, revision);
        let source_name = standby.source().to_string();
        if let Some(s) = self.record.standby.as_mut() {
            s.rebootstrapped = Some(StandbyRebootstrap {
                at: humantime::format_rfc3339_seconds(now).to_string(),
                skipped: missing,
                backup: backup.clone(),
                revision,
                old_data: old_data.clone(),
            });
        }
        self.save_record().await;
        let message = format!(
            "revisions {} to {} of {source_name} are in no chain in its store: the standby is \
             created again from its backup {backup} at revision {revision} (every key as the \
             source held it there; those revisions were never applied one by one, so a watch of \
             the standby never saw them); the old members' data is kept: {old_data}",
            missing.from, missing.to
        );
        tracing::warn!("{message}");
        let notice = Notice::warning("StandbyRebootstrapped", message);
        self.platform.announce(&self.name, &notice).await;
        Ok(())
    }

    /// Why the applier cannot start yet, in the log and in status.
    fn standby_waits(&mut self, why: String) {
        tracing::error!("standby: {why}");
        if let Some(s) = self.record.standby.as_mut() {
            s.message = Some(why);
        }
    }

    /// Offers the ready members to the applier, the leader first (every
    /// transaction goes through it anyway), where the operator calls them
    /// (on Kubernetes their pod IPs: the applier runs in the operator's
    /// process, not in a pod of the cluster's namespace).
    pub(super) fn offer_standby_members(&self, obs: &Observation) {
        if let Some(applier) = &self.standby {
            applier.offer(self.standby_candidates(obs));
        }
    }

    /// The ready members, the leader first, at the URLs the operator
    /// calls them at.
    fn standby_candidates(&self, obs: &Observation) -> Vec<crate::backup::Candidate> {
        let mut ready = self.ready_candidates(obs, true);
        for (name, url, _) in &mut ready {
            if let Some(call) = obs.call_url(name) {
                *url = call.to_string();
            }
        }
        ready
    }

    /// The operator's calls to the members carry root's credentials while
    /// the standby's etcd auth is on, none otherwise.
    pub(super) fn standby_credentials(&self, obs: &Observation) {
        let root = self.standby.as_ref().and_then(Applier::credentials);
        let platform = obs
            .platform
            .iter()
            .flat_map(|m| m.call_url.iter().chain([&m.addr.client_url]));
        let listed = obs.listed.iter().flatten().flat_map(|m| &m.client_urls);
        for url in platform.chain(listed) {
            self.clients.set_auth(url, root.clone());
        }
    }

    /// The root's and the reader's passwords of the standby's etcd auth
    /// (made the first time).
    async fn standby_secrets(&self) -> Result<auth::Secrets, crate::platform::Error> {
        let (root, _) = self
            .platform
            .standby_password(&self.name, auth::ROOT)
            .await?;
        let (reader, reader_place) = self
            .platform
            .standby_password(&self.name, auth::READER)
            .await?;
        Ok(auth::Secrets {
            root: crate::etcd::Credentials::new(auth::ROOT, root),
            reader: crate::etcd::Credentials::new(auth::READER, reader),
            reader_place,
        })
    }

    /// Turns the standby's etcd auth off through a ready member (spec.standby
    /// removed while no applier runs: after a restart).
    async fn open_writes(&self, obs: &Observation) -> Result<(), String> {
        let Some(member) = self.standby_candidates(obs).into_iter().next() else {
            return Err("no member is ready".into());
        };
        if !auth::is_on(&member).await.map_err(|e| e.to_string())? {
            return Ok(());
        }
        let secrets = self.standby_secrets().await.map_err(|e| e.to_string())?;
        auth::disable(&member, &secrets.root)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

impl<P> Cluster<P> {
    /// Whether the spec names a source and the cluster is not promoted
    /// yet: it takes no backups of its own (etcd's auth refuses everyone
    /// but the applier, and it holds its source's revisions, which the
    /// source's backups have).
    pub(super) fn standby_holds_backups(&self) -> bool {
        let SpecState::Valid { spec, .. } = &self.spec else {
            return false;
        };
        let promoted = self
            .record
            .standby
            .as_ref()
            .is_some_and(|s| s.state == state::PROMOTED);
        spec.standby.is_some() && !promoted
    }

    /// Whether the standby is being promoted (its applier applies what is
    /// left).
    pub(super) fn standby_promoting(&self) -> bool {
        self.standby.as_ref().is_some_and(Applier::promoting)
    }

    /// What status says of the standby: the applier's word, else the
    /// record's (before it starts, once promoted).
    pub(super) fn standby_status(&self) -> Option<StandbyStatus> {
        self.standby
            .as_ref()
            .map(Applier::status)
            .or_else(|| self.record.standby.clone())
    }
}
