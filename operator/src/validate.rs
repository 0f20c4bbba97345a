//! Checks on an `EtcdCluster` that serde's types cannot express, turning the
//! spec into a [`ValidSpec`] the rest of the operator can trust.
//!
//! Every problem names its field and says what is allowed; all problems of a
//! spec are reported at once so a user fixes them in one edit.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::backup::object::ObjectLocation;
use crate::crd::{EtcdClusterSpec, StoragePolicy};
use crate::member::Tuning;
use crate::member::backend::{self, Backend, DefragPolicy};
use crate::member::tuning::check_tuning;
use crate::version::Version;

pub mod continuous;
pub mod pod;
mod restore;
pub mod standby;
pub mod storage;
mod tls;
pub use self::continuous::ContinuousPolicy;
pub use self::restore::{MIN_REVISION, TIME_PREFIX_PATTERN};
pub use self::storage::{VolumeSize, Volumes};
use self::tls::check_tls;
pub use self::tls::{MAX_SECRET_NAME_LEN, SECRET_NAME_PATTERN, TlsPolicy, TlsSource};
pub use crate::units::{FieldError, MAX_DURATION, MAX_INTERVAL, parse_duration, parse_interval};

/// Smallest cluster the operator manages.
pub const MIN_SIZE: i64 = 1;
/// Largest cluster the operator manages.
pub const MAX_SIZE: i64 = 9;
/// Longest cluster name (see [`crate::names`]).
pub const MAX_NAME_LEN: usize = crate::names::MAX_CLUSTER_NAME_LEN;
/// Fewest backups kept (`spec.backup.maxBackups`).
pub const MIN_BACKUPS: i64 = 1;
/// Most backups kept (`spec.backup.maxBackups`).
pub const MAX_BACKUPS: i64 = 10_000;
/// Shortest backup interval.
pub const MIN_BACKUP_INTERVAL: Duration = Duration::from_secs(1);
/// Shortest validity of a certificate or CA the operator issues.
pub const MIN_TLS_VALIDITY: Duration = Duration::from_secs(60);
/// Default validity of the certificates the operator issues (90 days).
pub const DEFAULT_CERT_VALIDITY: Duration = Duration::from_secs(90 * 86_400);
/// Default validity of the CA the operator creates (5 years).
pub const DEFAULT_CA_VALIDITY: Duration = Duration::from_secs(5 * 365 * 86_400);

/// A spec that passed every check.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidSpec {
    /// Number of voting members.
    pub size: usize,
    /// etcd version to run.
    pub version: Version,
    /// Observe only.
    pub paused: bool,
    /// Whether member data survives a member's stop.
    pub storage: StoragePolicy,
    /// Backup policy, if any.
    pub backup: Option<BackupPolicy>,
    /// Backup name or snapshot path to create the cluster from.
    pub restore: Option<String>,
    /// Whose backup `restore` names and where it is (for a name, not a
    /// snapshot file's path).
    pub restore_from: RestoreFrom,
    /// Rebuild from the newest backup when a majority is lost for good.
    pub restore_from_backup: bool,
    /// Raft timing of every member.
    pub tuning: Tuning,
    /// Rebuild from the most advanced surviving member when a majority is
    /// lost for good (`spec.recovery.fromSurvivor`, by default
    /// `restoreFromBackup` on persistent storage).
    pub from_survivor: bool,
    /// TLS of members and clients.
    pub tls: TlsPolicy,
    /// etcd's quota and auto-compaction ([`crate::member::backend`]).
    pub backend: Backend,
    /// Scheduled defragmentation, if any.
    pub defrag: Option<DefragPolicy>,
    /// A standby of another cluster (`spec.standby`), if it is one.
    pub standby: Option<standby::Standby>,
    /// The members' data volume claims (`spec.storage.size`,
    /// `storageClassName`; Kubernetes).
    pub volumes: Volumes,
    /// The image repository and pod settings members run with
    /// (`spec.image`, `spec.pod`; Kubernetes).
    pub pod: crate::member::PodSettings,
}

/// Where a backup named in `spec.restore` is: whose it is and in which
/// folder or claim (each `None`: the default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreFrom {
    /// `spec.restore.cluster`.
    pub cluster: Option<String>,
    /// `spec.restore.location.path`.
    pub path: Option<PathBuf>,
    /// `spec.restore.location.persistentVolumeClaim`.
    pub claim: Option<String>,
    /// `spec.restore.location.objectStore`.
    pub object: Option<crate::backup::object::ObjectLocation>,
    /// `spec.restore.toRevision` or `toTime`.
    pub until: Option<crate::backup::point::PointInTime>,
}

/// A checked backup policy.
#[derive(Clone, Debug, PartialEq)]
pub struct BackupPolicy {
    /// Time between backups.
    pub interval: Duration,
    /// Number of verified backups kept.
    pub max_backups: usize,
    /// Folder for backups (local platform), when set in the spec.
    pub path: Option<PathBuf>,
    /// PersistentVolumeClaim for backups (Kubernetes), when set in the spec.
    pub persistent_volume_claim: Option<String>,
    /// Size of the claim the operator creates (Kubernetes).
    pub claim_size: Option<String>,
    /// Storage class of the claim the operator creates (Kubernetes).
    pub storage_class: Option<String>,
    /// An object store, when set in the spec.
    pub object: Option<crate::backup::object::ObjectLocation>,
    /// Time between restore checks (`restoreCheck.interval`); none: off.
    pub restore_check: Option<Duration>,
    /// Continuous backups (`continuous`); none: off.
    pub continuous: Option<ContinuousPolicy>,
}

/// All problems found in a spec.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct Invalid(pub Vec<FieldError>);

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", e.field, e.message)?;
        }
        Ok(())
    }
}

/// What the platform can run, asked while validating `spec.version`.
pub trait Versions {
    /// `Ok` when members of this version can be run, else why not (for
    /// example, which binary is missing and how to install it).
    fn check(&self, version: Version) -> Result<(), String>;
}

/// Checks a cluster's name and spec.
pub fn validate(
    name: &str,
    spec: &EtcdClusterSpec,
    versions: &dyn Versions,
) -> Result<ValidSpec, Invalid> {
    let mut errors = Vec::new();
    let mut err = |field: &str, message: String| {
        errors.push(FieldError {
            field: field.to_string(),
            message,
        })
    };
    if let Err(m) = check_name(name) {
        err("metadata.name", m);
    }
    if !(MIN_SIZE..=MAX_SIZE).contains(&spec.size) {
        err(
            "spec.size",
            format!(
                "must be between {MIN_SIZE} and {MAX_SIZE}, got {}",
                spec.size
            ),
        );
    }
    let version = match spec.version.parse::<Version>() {
        Ok(v) => {
            if let Err(m) = versions.check(v) {
                err("spec.version", m);
            }
            Some(v)
        }
        Err(e) => {
            err("spec.version", e.to_string());
            None
        }
    };
    let backup = spec.backup.as_ref().and_then(|b| {
        let interval = match parse_interval(&b.interval, MIN_BACKUP_INTERVAL) {
            Ok(d) => Some(d),
            Err(m) => {
                err("spec.backup.interval", m);
                None
            }
        };
        if !(MIN_BACKUPS..=MAX_BACKUPS).contains(&b.max_backups) {
            err(
                "spec.backup.maxBackups",
                format!(
                    "must be at least {MIN_BACKUPS} and at most {MAX_BACKUPS}, got {}",
                    b.max_backups
                ),
            );
        }
        let location = b.location.clone().unwrap_or_default();
        if location.path.as_deref() == Some("") {
            err(
                "spec.backup.location.path",
                "must not be empty; leave it out for the default folder".into(),
            );
        }
        let named = [
            (
                "spec.backup.location.persistentVolumeClaim",
                &location.persistent_volume_claim,
            ),
            (
                "spec.backup.location.storageClassName",
                &location.storage_class_name,
            ),
        ];
        let mut bad_names = false;
        for (field, value) in named {
            if let Some(Err(m)) = value.as_deref().map(crate::kube_names::check_object_name) {
                err(field, m);
                bad_names = true;
            }
        }
        if let Some(Err(m)) = location.size.as_deref().map(crate::kube_names::check_size) {
            err("spec.backup.location.size", m);
            bad_names = true;
        }
        let object = match location
            .object_store
            .as_ref()
            .map(|o| ObjectLocation::parse(o, "spec.backup.location.objectStore"))
        {
            None => None,
            Some(Ok(o)) => Some(o),
            Some(Err(problems)) => {
                for (field, m) in problems {
                    err(&field, m);
                }
                bad_names = true;
                None
            }
        };
        if object.is_some()
            && (location.path.is_some() || location.persistent_volume_claim.is_some())
        {
            err(
                "spec.backup.location.objectStore",
                "is a place of its own: drop path or persistentVolumeClaim (one location per \
                 cluster)"
                    .into(),
            );
            bad_names = true;
        }
        let restore_check = match b
            .restore_check
            .as_ref()
            .map(|r| parse_interval(&r.interval, MIN_BACKUP_INTERVAL))
        {
            None => None,
            Some(Ok(d)) => Some(d),
            Some(Err(m)) => {
                err("spec.backup.restoreCheck.interval", m);
                bad_names = true;
                None
            }
        };
        let continuous = match b.continuous.as_ref().map(continuous::check) {
            None => None,
            Some(Ok(c)) => Some(c),
            Some(Err(problems)) => {
                for (field, m) in problems {
                    err(field, m);
                }
                bad_names = true;
                None
            }
        };
        if bad_names {
            return None;
        }
        Some(BackupPolicy {
            restore_check,
            continuous,
            interval: interval?,
            max_backups: usize::try_from(b.max_backups).ok().filter(|n| *n > 0)?,
            path: location.path.map(PathBuf::from),
            persistent_volume_claim: location.persistent_volume_claim,
            claim_size: location.size,
            storage_class: location.storage_class_name,
            object,
        })
    });
    if let Some(r) = &spec.restore {
        restore::check(r, &mut err);
    }
    let restore_from = spec
        .restore
        .as_ref()
        .map(|r| RestoreFrom {
            cluster: r.cluster.clone(),
            path: r
                .location
                .as_ref()
                .and_then(|l| l.path.clone())
                .map(PathBuf::from),
            claim: r
                .location
                .as_ref()
                .and_then(|l| l.persistent_volume_claim.clone()),
            object: r
                .location
                .as_ref()
                .and_then(|l| l.object_store.as_ref())
                .and_then(|o| ObjectLocation::parse(o, "spec.restore.location.objectStore").ok()),
            until: restore::point_in_time(r).ok().flatten(),
        })
        .unwrap_or_default();
    let standby = standby::check(name, spec, &mut err);
    let restore_from_backup = spec
        .recovery
        .as_ref()
        .is_some_and(|r| r.restore_from_backup);
    if restore_from_backup && spec.backup.is_none() {
        err(
            "spec.recovery.restoreFromBackup",
            "needs spec.backup: without backups there is nothing to restore from".into(),
        );
    }
    let tls = check_tls(spec, &mut err);
    let tuning = match spec.tuning.as_ref().map(check_tuning) {
        None => Some(Tuning::default()),
        Some(Ok(t)) => Some(t),
        Some(Err(problems)) => {
            for (field, message) in problems {
                err(field, message);
            }
            None
        }
    };
    let persistent = spec.storage.policy == StoragePolicy::Persistent;
    let from_survivor = match spec.recovery.as_ref().and_then(|r| r.from_survivor) {
        Some(true) if !persistent => {
            err(
                "spec.recovery.fromSurvivor",
                "needs spec.storage.policy: Persistent: with Ephemeral storage a member's data \
                 does not outlive the restart that would rebuild the cluster from it; remove \
                 fromSurvivor or use Persistent storage"
                    .into(),
            );
            false
        }
        Some(on) => on,
        None => restore_from_backup && persistent,
    };
    let volumes = storage::check(spec, &mut err);
    let pod = pod::check(spec, &mut err);
    let (backend, defrag) = backend::check(spec, &mut errors);
    match (version, tuning) {
        (Some(version), Some(tuning)) if errors.is_empty() => Ok(ValidSpec {
            size: usize::try_from(spec.size).unwrap_or(1),
            version,
            paused: spec.paused,
            storage: spec.storage.policy,
            backup,
            restore: spec.restore.as_ref().map(|r| r.backup.trim().to_string()),
            restore_from,
            restore_from_backup,
            tls,
            tuning,
            backend,
            defrag,
            from_survivor,
            standby,
            volumes,
            pod,
        }),
        _ => Err(Invalid(errors)),
    }
}

/// A cluster name: a DNS label of at most [`MAX_NAME_LEN`] characters
/// (the rule is [`crate::names::check_cluster_name`]).
pub fn check_name(name: &str) -> Result<(), String> {
    crate::names::check_cluster_name(name).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
