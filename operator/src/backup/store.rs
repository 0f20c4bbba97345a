//! The backup port: where a cluster's backups are kept, behind its platform
//! ([`crate::platform::Platform::backups`]). The controller and the
//! schedule save, list, verify, delete and restore backups through a
//! [`BackupStore`] and never touch files or etcd tools themselves; the rules
//! that must hold on every platform (retention never deletes the last good
//! backup, a rebuild takes the newest backup that checks out) are written
//! once, here, on top of those calls.

use std::fmt;
use std::future::Future;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{BackupMeta, Candidate, Result, Retained};
use crate::validate::BackupPolicy;

/// Where a cluster's backups are kept, as its spec says
/// (`spec.backup.location`); a store resolves it (a folder locally).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The cluster (backups are named after it, and its default place).
    pub cluster: String,
    /// The cluster's uid ([`super::owner`]): part of every backup's name
    /// and meta, so that a store sees only this cluster's backups. `None`
    /// where it is not known (a deleted cluster's listing).
    pub uid: Option<String>,
    /// `spec.backup.location.path`: a folder (local platform).
    pub path: Option<PathBuf>,
    /// `spec.backup.location.persistentVolumeClaim` (Kubernetes).
    pub claim: Option<String>,
    /// `spec.backup.location.size`: of a claim the store creates.
    pub claim_size: Option<String>,
    /// `spec.backup.location.storageClassName`: of a claim the store
    /// creates.
    pub storage_class: Option<String>,
    /// `spec.backup.location.objectStore`: a bucket (its backups under
    /// `PREFIX/CLUSTER/`).
    pub object: Option<super::object::ObjectLocation>,
    /// The cluster whose backups these are, when they are not `cluster`'s
    /// own: a restore of another cluster's backup (`spec.restore.cluster`).
    /// Its place is looked up, never created, and only its backups count;
    /// `cluster` still runs the work (a Job, the copy set aside).
    pub source: Option<String>,
    /// Where a restore stops (`spec.restore.toRevision` / `toTime`): the
    /// chain is replayed up to it, exactly, or the restore is refused.
    pub until: Option<super::point::PointInTime>,
}

impl Location {
    /// The backups of `cluster` under `policy` (none: the default place).
    pub fn of(cluster: &str, policy: Option<&BackupPolicy>) -> Self {
        Location {
            cluster: cluster.to_string(),
            uid: None,
            path: policy.and_then(|p| p.path.clone()),
            claim: policy.and_then(|p| p.persistent_volume_claim.clone()),
            claim_size: policy.and_then(|p| p.claim_size.clone()),
            storage_class: policy.and_then(|p| p.storage_class.clone()),
            object: policy.and_then(|p| p.object.clone()),
            source: None,
            until: None,
        }
    }

    /// Where `cluster` restores `from` from: the backups of
    /// `from.cluster` (default: the cluster the backup's name says) in
    /// `from`'s folder or claim (default: that cluster's default place).
    pub fn restore(cluster: &str, backup: &str, from: &crate::validate::RestoreFrom) -> Self {
        let source = from
            .cluster
            .clone()
            .or_else(|| super::owner::cluster_of(backup).map(str::to_string))
            .unwrap_or_else(|| cluster.to_string());
        Location {
            cluster: cluster.to_string(),
            uid: None,
            path: from.path.clone(),
            claim: from.claim.clone(),
            claim_size: None,
            storage_class: None,
            object: from.object.clone(),
            source: Some(source),
            until: from.until,
        }
    }

    /// The cluster whose backups these are.
    pub fn owner(&self) -> &str {
        self.source.as_deref().unwrap_or(&self.cluster)
    }

    /// This location, for the cluster whose uid is `uid`.
    #[must_use]
    pub fn with_uid(mut self, uid: Option<&str>) -> Self {
        self.uid = uid.map(str::to_string);
        self
    }

    /// Whether `meta` is a backup of this location's cluster
    /// ([`super::owned`]).
    pub fn owns(&self, meta: &BackupMeta) -> bool {
        match &self.source {
            // Another cluster's: any of its backups (its uid is not known).
            Some(source) => super::owned(meta, source, None),
            None => super::owned(meta, &self.cluster, self.uid.as_deref()),
        }
    }
}

/// The member a backup is taken from.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    /// Member name.
    pub member: &'a str,
    /// Its client URL.
    pub url: &'a str,
    /// The CAs and client certificate for an `https://` URL.
    pub tls: Option<&'a crate::tls::ClientTls>,
}

/// A snapshot a store set aside for a cluster's bootstrap to restore every
/// member from ([`BackupStore::open_for_restore`]), as the store names it
/// (locally the path of a copy in the cluster's state folder). The
/// controller keeps it in the cluster's record and hands it to
/// [`crate::platform::Platform::create`]; only the store and its platform
/// read it. Serialized as a plain string.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RestoreSource(String);

impl RestoreSource {
    /// A source named `name` by its store.
    pub fn new(name: impl Into<String>) -> Self {
        RestoreSource(name.into())
    }

    /// The store's name for it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RestoreSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A snapshot set aside for a rebuild, with its delta segments replayed
/// ([`BackupStore::open_chain_for_restore`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainRestore {
    /// The snapshot the members restore from.
    pub source: RestoreSource,
    /// What the replay did (`revision`: the revision the snapshot holds).
    pub replayed: super::replay::Replayed,
    /// Why segments after the replayed ones were not used (a cut chain, a
    /// replay that failed), if any were not.
    pub problem: Option<String>,
}

/// Where backups are kept: a folder of snapshot files locally. A backup
/// is a snapshot as etcd streams it (the database, then its SHA-256) and
/// its [`BackupMeta`], written only once the snapshot is complete and
/// verified, so a backup without its meta is never trusted.
pub trait BackupStore: Send + Sync + 'static {
    /// Where `location` is, in words for logs and messages.
    fn describe(&self, location: &Location) -> String;

    /// Takes a backup: streams a snapshot from `source`, verifies it (its
    /// SHA-256 trailer, and the etcd tools agree on it) and records its
    /// meta.
    fn save(
        &self,
        location: &Location,
        source: Source<'_>,
    ) -> impl Future<Output = Result<BackupMeta>> + Send;

    /// Every backup of the location's cluster ([`Location::owns`]) that
    /// has its meta, newest first; other clusters' backups in the same
    /// place are never listed.
    fn list(&self, location: &Location) -> impl Future<Output = Result<Vec<BackupMeta>>> + Send;

    /// Checks a backup again: its trailer, and its hash against the meta.
    fn verify(
        &self,
        location: &Location,
        backup: &BackupMeta,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Deletes a backup (already gone is done).
    fn delete(
        &self,
        location: &Location,
        backup: &BackupMeta,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Drops what interrupted saves of the location's cluster left behind
    /// (nothing, where a save leaves nothing), and nothing else.
    fn sweep(&self, location: &Location) -> impl Future<Output = ()> + Send {
        let _ = location;
        async {}
    }

    /// Whether `backup` (a name, or locally a snapshot file's path) can
    /// be restored into the cluster of `location`: it is found (in
    /// `location`, or in another cluster's default place) and checks out.
    fn check_restorable(
        &self,
        location: &Location,
        backup: &str,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Finds and checks `backup` as [`Self::check_restorable`] does, and
    /// sets a copy aside for the bootstrap of the cluster of `location`,
    /// so that retention cannot take it while members restore from it.
    fn open_for_restore(
        &self,
        location: &Location,
        backup: &str,
    ) -> impl Future<Output = Result<RestoreSource>> + Send;

    /// [`Self::open_for_restore`] of `base` with its chain of delta
    /// segments (continuous backups) replayed into the copy set aside, up
    /// to the last intact segment. Platforms without continuous backups
    /// set the snapshot aside as it is.
    fn open_chain_for_restore(
        &self,
        location: &Location,
        base: &BackupMeta,
    ) -> impl Future<Output = Result<ChainRestore>> + Send {
        async move {
            let source = self.open_for_restore(location, &base.name).await?;
            Ok(ChainRestore {
                source,
                replayed: super::replay::Replayed {
                    revision: base.revision,
                    ..Default::default()
                },
                problem: None,
            })
        }
    }

    /// [`Self::open_for_restore`] of `backup` (a name, or locally a
    /// snapshot file's path) for a new cluster (`spec.restore`), with the
    /// delta segments of its chain replayed when it is a backup that has
    /// some, as [`Self::open_chain_for_restore`] does for a rebuild.
    /// Platforms without continuous backups set the snapshot aside as it
    /// is (`replayed.revision` 0: not known).
    fn open_named_for_restore(
        &self,
        location: &Location,
        backup: &str,
    ) -> impl Future<Output = Result<ChainRestore>> + Send {
        async move {
            let source = self.open_for_restore(location, backup).await?;
            Ok(ChainRestore {
                source,
                replayed: super::replay::Replayed::default(),
                problem: None,
            })
        }
    }

    /// Drops the copy once the bootstrap it was for has formed.
    fn close_restore(&self, source: &RestoreSource) -> impl Future<Output = ()> + Send;

    /// Proves `backup` restores: restores it into a scratch member and
    /// compares its KV hash at the backup's revision with `live`'s
    /// ([`super::proof`]). Platforms that cannot say so.
    fn restore_check(
        &self,
        location: &Location,
        backup: &BackupMeta,
        live: Source<'_>,
    ) -> impl Future<Output = Result<super::proof::RestoreCheck>> + Send {
        let _ = (location, backup, live);
        async {
            Err(super::Error::Unsupported(
                "restore checks are not supported on this platform yet".into(),
            ))
        }
    }

    /// The intact start of the chain of delta segments of `base`
    /// (continuous backups). Platforms without them say so.
    fn chain(
        &self,
        location: &Location,
        base: &BackupMeta,
    ) -> impl Future<Output = Result<super::chain::Chain>> + Send {
        let _ = (location, base);
        async {
            Err(super::Error::Unsupported(
                "continuous backups are supported on the local platform only".into(),
            ))
        }
    }

    /// [`Self::chain`] read on from `chain` (read before): only the
    /// segments numbered after its last one are read. Stores that cannot
    /// read a part read it whole.
    fn chain_on(
        &self,
        location: &Location,
        base: &BackupMeta,
        chain: super::chain::Chain,
    ) -> impl Future<Output = Result<super::chain::Chain>> + Send {
        let _ = chain;
        self.chain(location, base)
    }

    /// The segments that follow `chain` (read before), each read by its
    /// name with no listing of the store (cheap enough to poll often);
    /// stops at the first one not there. Stores without such a read read
    /// on with [`Self::chain_on`].
    fn chain_next(
        &self,
        location: &Location,
        base: &BackupMeta,
        chain: super::chain::Chain,
    ) -> impl Future<Output = Result<super::chain::Chain>> + Send {
        self.chain_on(location, base, chain)
    }

    /// Writes a delta segment beside its base backup.
    fn append(
        &self,
        location: &Location,
        segment: &super::delta::Segment,
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (location, segment);
        async {
            Err(super::Error::Unsupported(
                "continuous backups are supported on the local platform only".into(),
            ))
        }
    }

    /// Follows the cluster's changes into delta segments (continuous
    /// backups) until aborted, keeping `status.continuous` and asking for
    /// a full backup through `want_full` when the chain ends. The local
    /// platform runs [`super::follow::run`] right here; a store whose
    /// follower runs elsewhere (Kubernetes) reports on it instead.
    fn follow(
        self: std::sync::Arc<Self>,
        policy: crate::validate::ContinuousPolicy,
        location: Location,
        candidates: tokio::sync::watch::Receiver<Vec<Candidate>>,
        status: std::sync::Arc<std::sync::Mutex<crate::crd::BackupStatus>>,
        want_full: std::sync::Arc<tokio::sync::Notify>,
    ) -> impl Future<Output = ()> + Send
    where
        Self: Sized,
    {
        super::follow::run(policy, location, self, candidates, status, want_full)
    }

    /// The other clusters whose backups are in `location` too
    /// ([`crate::crd::BackupStatus::shared_with`]); none where a store
    /// keeps each cluster's backups apart.
    fn shared_with(&self, location: &Location) -> impl Future<Output = Vec<String>> + Send {
        let _ = location;
        async { Vec::new() }
    }

    /// Whether a backup that checks out exists. Asked on every pass while
    /// quorum is lost: a store may remember its answer for a backup that
    /// did not change.
    fn any_good(&self, location: &Location) -> impl Future<Output = bool> + Send {
        async move {
            for meta in self.list(location).await.unwrap_or_default() {
                if self.verify(location, &meta).await.is_ok() {
                    return true;
                }
            }
            false
        }
    }

    /// The newest backup that still checks out; the damaged ones newer
    /// than it are skipped and described in the returned list.
    fn newest_good(
        &self,
        location: &Location,
    ) -> impl Future<Output = Result<(Option<BackupMeta>, Vec<String>)>> + Send {
        async move {
            let mut problems = Vec::new();
            for meta in self.list(location).await? {
                match self.verify(location, &meta).await {
                    Ok(()) => return Ok((Some(meta), problems)),
                    Err(e) => problems.push(e.to_string()),
                }
            }
            Ok((None, problems))
        }
    }

    /// Keeps the newest `keep` backups that check out (at least one), and
    /// deletes every backup older than the oldest of those, then sweeps. A
    /// damaged backup never counts, so the last good one is never deleted.
    fn retain(
        &self,
        location: &Location,
        keep: usize,
    ) -> impl Future<Output = Result<Retained>> + Send {
        async move {
            let keep = keep.max(1);
            let mut out = Retained::default();
            for meta in self.list(location).await? {
                if out.good.len() < keep {
                    match self.verify(location, &meta).await {
                        Ok(()) => out.good.push(meta.name),
                        Err(_) => out.damaged.push(meta.name),
                    }
                    continue;
                }
                self.delete(location, &meta).await?;
                out.deleted.push(meta.name);
            }
            self.sweep(location).await;
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::ClusterRecord;

    #[test]
    fn a_record_restoring_from_a_snapshot_path_still_loads() {
        // `restoreFrom` was a path before it became a RestoreSource.
        let old = r#"{"token":"demo-1","bootstrapped":false,"nextIndex":3,"generation":1,
                      "restoreFrom":"/state/clusters/demo/restore.db"}"#;
        let record: ClusterRecord = serde_json::from_str(old).expect("an old record");
        let source = record.restore_from.clone().expect("a source");
        assert_eq!(source.as_str(), "/state/clusters/demo/restore.db");
        let json = serde_json::to_value(&record).expect("json");
        assert_eq!(json["restoreFrom"], "/state/clusters/demo/restore.db");
    }

    #[test]
    fn a_location_is_what_the_spec_says() {
        let policy = BackupPolicy {
            interval: std::time::Duration::from_secs(60),
            max_backups: 2,
            path: Some("b".into()),
            persistent_volume_claim: None,
            claim_size: None,
            storage_class: None,
            object: None,
            restore_check: None,
            continuous: None,
        };
        let loc = Location::of("demo", Some(&policy));
        assert_eq!(loc.path.as_deref(), Some(std::path::Path::new("b")));
        assert_eq!(Location::of("demo", None).path, None);
        assert_ne!(loc, Location::of("demo", None));
    }
}
