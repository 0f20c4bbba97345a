//! Backups on Kubernetes: a volume claim holds them (the spec's
//! `backup.location.persistentVolumeClaim`, default `CLUSTER-backups`,
//! created when it does not exist, with the spec's size and storage
//! class, and never deleted by the operator), and short-lived Jobs do the
//! work in it ([`super::jobs`]): the operator's own image runs
//! `etcd-operator backup-job`, the local platform's folder store with the
//! claim as its state folder. So a snapshot is streamed from a member
//! inside the cluster straight into the claim, verified there as locally
//! (SHA-256 trailer, `etcdutl` and `etcdctl snapshot status` agreeing),
//! and never passes through the operator; every step is a Job a user can
//! see and read the log of.
//!
//! Each Job reports the cluster's backups after its work; the store keeps
//! that list, so listing (which the schedule does every round) costs no
//! Job once one ran. A call that failed is answered with the same error
//! for [`FAILURE_HOLD`] instead of starting a Job again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Client;
use kube::api::{Patch, PatchParams};

use super::FIELD_MANAGER;
use super::jobs::{
    BACKUP_CONTAINER, Jobs, backup_claim, backup_job, default_backup_claim, job_name,
};
use crate::backup::job::{JobTls, Op, Report};
use crate::backup::{
    BackupMeta, BackupStore, Error, Location, RestoreSource, Result, Retained, Source,
};

/// How long a failed call's error is given again without a new Job.
pub const FAILURE_HOLD: Duration = Duration::from_secs(30);
/// Prefix of a [`RestoreSource`] on this platform:
/// `persistentvolumeclaims/CLAIM/PATH-IN-CLAIM`.
pub const SOURCE_PREFIX: &str = "persistentvolumeclaims/";

/// The snapshot a restore reads: its claim and its path in it.
pub fn parse_source(source: &RestoreSource) -> Option<(&str, &str)> {
    let rest = source.as_str().strip_prefix(SOURCE_PREFIX)?;
    let (claim, path) = rest.split_once('/')?;
    let safe = crate::kube_names::check_object_name(claim).is_ok()
        && !path
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..");
    safe.then_some((claim, path))
}

/// A cluster and the claim its backups are in.
type Key = (String, String);

/// Backups in volume claims, worked on by Jobs.
pub struct KubeBackups {
    jobs: Jobs,
    image: Option<String>,
    owners: Mutex<HashMap<String, OwnerReference>>,
    index: Mutex<HashMap<Key, Vec<BackupMeta>>>,
    /// The backups (name/sha256) last checked, and whether one was good.
    verdicts: Mutex<HashMap<Key, (Vec<String>, bool)>>,
    failures: Mutex<HashMap<String, (Instant, String)>>,
}

impl std::fmt::Debug for KubeBackups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeBackups")
            .field("jobs", &self.jobs)
            .field("image", &self.image)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl KubeBackups {
    /// Backups of clusters in `namespace`, worked on by Jobs of `image`
    /// (the operator's own; `None`: backups cannot be taken, and every
    /// call says how to set it).
    pub fn new(client: Client, namespace: &str, image: Option<String>) -> Self {
        KubeBackups {
            jobs: Jobs::new(client, namespace),
            image,
            owners: Mutex::default(),
            index: Mutex::default(),
            verdicts: Mutex::default(),
            failures: Mutex::default(),
        }
    }

    /// The operator's own image, which the Jobs run (`None`: not set).
    pub fn image(&self) -> Option<&str> {
        self.image.as_deref()
    }

    /// The resource of `cluster` owns its Jobs from now on.
    pub fn own(&self, cluster: &str, owner: OwnerReference) {
        lock(&self.owners).insert(cluster.into(), owner);
    }

    /// `cluster` is gone: forget what is kept about it.
    pub fn forget(&self, cluster: &str) {
        lock(&self.owners).remove(cluster);
        lock(&self.index).retain(|(c, _), _| c != cluster);
        lock(&self.verdicts).retain(|(c, _), _| c != cluster);
    }

    /// The claim of `location`: where its backups are, or with an object
    /// store the working space of the cluster's Jobs (its own, whoever's
    /// backups it restores).
    pub fn claim(location: &Location) -> String {
        let whose = match location.object {
            Some(_) => &location.cluster,
            None => location.owner(),
        };
        location
            .claim
            .clone()
            .unwrap_or_else(|| default_backup_claim(whose))
    }

    fn key(location: &Location) -> Key {
        (location.cluster.clone(), Self::claim(location))
    }

    /// Creates the claim of `location` unless it exists (and is not being
    /// deleted).
    async fn ensure_claim(&self, location: &Location) -> Result<String> {
        let name = Self::claim(location);
        let api = self.jobs.api::<PersistentVolumeClaim>();
        let found = api
            .get_opt(&name)
            .await
            .map_err(|e| Error::Job(format!("cannot read persistentvolumeclaim {name}: {e}")))?;
        match found {
            Some(c) if c.metadata.deletion_timestamp.is_some() => Err(Error::Job(format!(
                "persistentvolumeclaim {name} is being deleted; backups wait for it to go"
            ))),
            Some(_) => Ok(name),
            // Another cluster's backups are read where they are: their
            // claim is never made (an empty claim left behind by a restore
            // that could not find its backup).
            None if location.source.is_some() && location.object.is_none() => {
                Err(Error::NotFound {
                    name: format!("a claim of {}'s backups", location.owner()),
                    dir: format!("persistentvolumeclaim {name}"),
                    known: format!(
                        "no such claim in the namespace; name the claim that holds {}'s backups in \
                     spec.restore.location.persistentVolumeClaim",
                        location.owner()
                    ),
                })
            }
            None => {
                let claim = backup_claim(
                    &location.cluster,
                    &name,
                    location.claim_size.as_deref(),
                    location.storage_class.as_deref(),
                );
                let params = PatchParams::apply(FIELD_MANAGER).force();
                crate::fence::check().map_err(|e| Error::Job(e.to_string()))?;
                api.patch(&name, &params, &Patch::Apply(&claim))
                    .await
                    .map_err(|e| {
                        Error::Job(format!("cannot create persistentvolumeclaim {name}: {e}"))
                    })?;
                tracing::info!(cluster = %location.cluster, claim = %name, "backup claim created");
                Ok(name)
            }
        }
    }

    /// Runs `op` on the backups of `location` in a Job and returns its
    /// report; an error of the Job, or one it reports, is an error.
    pub(super) async fn run(&self, location: &Location, op: Op) -> Result<Report> {
        let cluster = &location.cluster;
        let key = format!(
            "{cluster}/{}/{}",
            Self::claim(location),
            op.args().join(" ")
        );
        if let Some((at, e)) = lock(&self.failures).get(&key)
            && at.elapsed() < FAILURE_HOLD
        {
            return Err(Error::Job(e.clone()));
        }
        let result = self.run_now(location, &op).await;
        match &result {
            Ok(report) if op != Op::Close => {
                lock(&self.index).insert(Self::key(location), report.backups.clone());
                lock(&self.failures).remove(&key);
            }
            Ok(_) => {}
            Err(e) => {
                lock(&self.failures).insert(key, (Instant::now(), e.to_string()));
            }
        }
        result
    }

    async fn run_now(&self, location: &Location, op: &Op) -> Result<Report> {
        let cluster = &location.cluster;
        let Some(image) = &self.image else {
            return Err(Error::Unsupported(
                "backups on Kubernetes run as Jobs of the operator's own image: start the \
                 operator with --backup-image IMAGE (ETCD_OPERATOR_BACKUP_IMAGE; \
                 deploy/base/operator.yaml sets it)"
                    .into(),
            ));
        };
        let owner = lock(&self.owners).get(cluster).cloned().ok_or_else(|| {
            Error::Job(format!(
                "cluster {cluster} is not known to the Kubernetes platform"
            ))
        })?;
        let claim = self.ensure_claim(location).await?;
        if op.tls().is_some() {
            self.client_tls_ready(cluster).await?;
        }
        let name = job_name(cluster, op.word());
        let job = backup_job(&name, location, &claim, image, op, &owner);
        let outcome = self
            .jobs
            .run(&job, BACKUP_CONTAINER)
            .await
            .map_err(|e| Error::Job(e.to_string()))?;
        let report = Report::find(&outcome.log)
            .map_err(|e| Error::Job(format!("backup job {name} left {e}")))?;
        match report {
            Some(Report { error: Some(e), .. }) => Err(Error::Job(e)),
            Some(report) if outcome.succeeded => Ok(report),
            _ => Err(Error::Job(format!(
                "backup job {name} failed{}",
                outcome
                    .why
                    .map(|w| format!(": {w}"))
                    .unwrap_or_else(|| " without a report".into())
            ))),
        }
    }

    /// The cluster's client certificate Secret is there for a Job to mount
    /// (a pod whose Secret volume is missing waits, unseen, until its
    /// Job's deadline): the operator makes it once client TLS is on.
    async fn client_tls_ready(&self, cluster: &str) -> Result<()> {
        let name = super::tls::client_secret_name(cluster);
        let found = self
            .jobs
            .api::<Secret>()
            .get_opt(&name)
            .await
            .map_err(|e| Error::Job(format!("cannot read secret {name}: {e}")))?;
        match found {
            Some(_) => Ok(()),
            None => Err(Error::Job(format!(
                "secret {name} (the client certificate the backup Jobs use) is not there yet; \
                 the operator makes it once client TLS is set up"
            ))),
        }
    }

    /// Runs [`Op::OpenChain`] for `backup`.
    async fn open_chain(
        &self,
        location: &Location,
        backup: &str,
    ) -> Result<crate::backup::ChainRestore> {
        let op = Op::OpenChain {
            backup: backup.into(),
        };
        let report = match self.run(location, op).await {
            Ok(report) => report,
            Err(e) => return Err(self.missing(location, backup, e).await),
        };
        let path = report
            .source
            .ok_or_else(|| Error::Job("the backup job set no copy aside".into()))?;
        Ok(crate::backup::ChainRestore {
            source: Self::source(&Self::claim(location), &path),
            replayed: report.replayed.unwrap_or_default(),
            problem: report.replay_problem,
        })
    }

    /// The restore source of the copy a Job set aside at `path` in `claim`.
    fn source(claim: &str, path: &str) -> RestoreSource {
        RestoreSource::new(format!("{SOURCE_PREFIX}{claim}/{path}"))
    }
}

impl BackupStore for KubeBackups {
    fn describe(&self, location: &Location) -> String {
        match &location.object {
            Some(o) => format!("{}/ in {o}", o.cluster_prefix(location.owner())),
            None => format!(
                "persistentvolumeclaim {} (folder backups/{})",
                Self::claim(location),
                location.owner()
            ),
        }
    }

    async fn save(&self, location: &Location, source: Source<'_>) -> Result<BackupMeta> {
        let op = Op::Save {
            member: source.member.into(),
            url: source.url.into(),
            tls: JobTls::of(source.tls),
        };
        let report = self.run(location, op).await?;
        report
            .saved
            .ok_or_else(|| Error::Job("the backup job reported no backup".into()))
    }

    async fn list(&self, location: &Location) -> Result<Vec<BackupMeta>> {
        if let Some(known) = lock(&self.index).get(&Self::key(location)) {
            return Ok(known.clone());
        }
        Ok(self.run(location, Op::List).await?.backups)
    }

    async fn verify(&self, location: &Location, backup: &BackupMeta) -> Result<()> {
        let op = Op::Check {
            backup: backup.name.clone(),
        };
        self.run(location, op).await.map(|_| ())
    }

    async fn delete(&self, location: &Location, backup: &BackupMeta) -> Result<()> {
        let op = Op::Delete {
            backup: backup.name.clone(),
        };
        self.run(location, op).await.map(|_| ())
    }

    async fn check_restorable(&self, location: &Location, backup: &str) -> Result<()> {
        let op = Op::Check {
            backup: backup.into(),
        };
        self.run(location, op).await.map(|_| ())
    }

    async fn open_for_restore(&self, location: &Location, backup: &str) -> Result<RestoreSource> {
        let op = Op::Open {
            backup: backup.into(),
        };
        let report = self.run(location, op).await?;
        let path = report
            .source
            .ok_or_else(|| Error::Job("the backup job set no copy aside".into()))?;
        Ok(Self::source(&Self::claim(location), &path))
    }

    /// One Job sets the backup aside with its chain replayed
    /// ([`Op::OpenChain`]: the local platform's replay, in the claim).
    async fn open_chain_for_restore(
        &self,
        location: &Location,
        base: &BackupMeta,
    ) -> Result<crate::backup::ChainRestore> {
        let mut restore = self.open_chain(location, &base.name).await?;
        if restore.replayed.revision == 0 {
            restore.replayed.revision = base.revision;
        }
        Ok(restore)
    }

    async fn open_named_for_restore(
        &self,
        location: &Location,
        backup: &str,
    ) -> Result<crate::backup::ChainRestore> {
        self.open_chain(location, backup).await
    }

    async fn close_restore(&self, source: &RestoreSource) {
        let Some((claim, path)) = parse_source(source) else {
            tracing::warn!("not dropping {source}: not a snapshot this operator set aside");
            return;
        };
        let mut parts = path.split('/');
        let cluster = match (parts.next(), parts.next(), parts.next()) {
            (Some("clusters"), Some(cluster), Some("restore.db")) => cluster,
            _ => {
                tracing::warn!("not dropping {source}: not a snapshot this operator set aside");
                return;
            }
        };
        let location = Location {
            claim: Some(claim.into()),
            ..Location::of(cluster, None)
        };
        if let Err(e) = self.run(&location, Op::Close).await {
            tracing::warn!(%cluster, "cannot drop the copy {source} (it stays in the claim): {e}");
        }
    }

    /// In a Job ([`super::proof`]).
    async fn restore_check(
        &self,
        location: &Location,
        backup: &BackupMeta,
        live: Source<'_>,
    ) -> Result<crate::backup::proof::RestoreCheck> {
        let op = super::proof::prove(backup, &live);
        super::proof::result(self.run(location, op).await?)
    }

    /// Answered from the last [`newest_good`](Self::newest_good) while the
    /// list of backups is the same: asked on every pass while quorum is
    /// lost, and each answer is a Job.
    async fn any_good(&self, location: &Location) -> bool {
        let Ok(list) = self.list(location).await else {
            return false;
        };
        let names: Vec<String> = list
            .iter()
            .map(|m| format!("{}/{}", m.name, m.sha256))
            .collect();
        let key = Self::key(location);
        if let Some((known, good)) = lock(&self.verdicts).get(&key)
            && *known == names
        {
            return *good;
        }
        let good = matches!(self.newest_good(location).await, Ok((Some(_), _)));
        lock(&self.verdicts).insert(key, (names, good));
        good
    }

    /// One Job checks the backups, newest first, until one checks out.
    async fn newest_good(&self, location: &Location) -> Result<(Option<BackupMeta>, Vec<String>)> {
        let report = self.run(location, Op::NewestGood).await?;
        Ok((report.newest, report.skipped))
    }

    /// The follower runs in its own Deployment ([`super::follow`]): here
    /// its log is read for the status.
    fn follow(
        self: std::sync::Arc<Self>,
        _policy: crate::validate::ContinuousPolicy,
        location: Location,
        _candidates: tokio::sync::watch::Receiver<Vec<crate::backup::Candidate>>,
        status: std::sync::Arc<Mutex<crate::crd::BackupStatus>>,
        want_full: std::sync::Arc<tokio::sync::Notify>,
    ) -> impl std::future::Future<Output = ()> + Send {
        let jobs = self.jobs.clone();
        super::follow_status::report(jobs, location.cluster, status, want_full)
    }

    /// One Job applies retention (and sweeps) in the claim.
    async fn retain(&self, location: &Location, keep: usize) -> Result<Retained> {
        let report = self.run(location, Op::Retain { keep }).await?;
        Ok(report.retained.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_sources_name_a_claim_and_a_path_in_it() {
        let s = KubeBackups::source("demo-backups", "clusters/demo/restore.db");
        assert_eq!(
            s.as_str(),
            "persistentvolumeclaims/demo-backups/clusters/demo/restore.db"
        );
        assert_eq!(
            parse_source(&s),
            Some(("demo-backups", "clusters/demo/restore.db"))
        );
        for bad in [
            "/state/clusters/demo/restore.db",
            "persistentvolumeclaims/../x/restore.db",
            "persistentvolumeclaims/b/../../etc/passwd",
            "persistentvolumeclaims/b//x",
            "persistentvolumeclaims/b",
        ] {
            assert_eq!(parse_source(&RestoreSource::new(bad)), None, "{bad}");
        }
    }
}
