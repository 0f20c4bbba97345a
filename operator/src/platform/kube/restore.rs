//! A new member's data restored from a snapshot before its pod starts: a
//! restore Job ([`super::jobs::restore_job`]) of the member's own etcd
//! image reads the copy set aside in the backup claim and writes the
//! member's data folder in its data claim, which is then marked with the
//! snapshot it came from. A restore that fails leaves a data folder no one
//! may use: the claim is deleted, and the next create restores again onto
//! a new one. A restore whose backup is not there says where it looked in
//! the user's terms ([`KubeBackups::missing`]).

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch};

use super::backups::{KubeBackups, parse_source};
use super::config::started;
use super::jobs::{Jobs, RESTORE_CONTAINER, job_name, restore_job};
use super::objects::claim_name;
use super::{Error, KubePlatform, Registration};
use crate::backup::{BackupStore, Error as BackupError, Location, RestoreSource};
use crate::member::MemberConfig;

/// Annotation on a member's data claim: the snapshot its data was restored
/// from.
pub const ANNOTATION_RESTORED: &str = "etcdoperator.dev/restored-from";

impl KubePlatform {
    /// Restores `config`'s data claim from `source` unless it was already
    /// (a create repeated after a crash), or holds data that ran.
    pub(super) async fn restore_member(
        &self,
        cluster: &str,
        config: &MemberConfig,
        source: &RestoreSource,
        reg: &Registration,
    ) -> Result<(), Error> {
        let member = &config.addr.name;
        let (backup_claim, path) = parse_source(source).ok_or_else(|| Error::Config {
            object: format!("member {member}"),
            message: format!("{source} is no snapshot this operator set aside in a claim"),
        })?;
        let claim = claim_name(member);
        if let Some(c) = self.get::<PersistentVolumeClaim>(&claim).await? {
            let annotations = c.annotations();
            let done =
                annotations.get(ANNOTATION_RESTORED).map(String::as_str) == Some(source.as_str());
            if done || started(Some(annotations)) {
                return Ok(());
            }
        }
        let name = job_name(cluster, "restore");
        let job = restore_job(
            &name,
            cluster,
            config,
            &claim,
            (backup_claim, path),
            config.pod.repository_or(&self.image),
            &reg.owner,
        );
        tracing::info!(%cluster, %member, %source, job = %name, "restoring the member's data");
        let jobs = Jobs::new(self.client.clone(), &self.namespace);
        let outcome = jobs.run(&job, RESTORE_CONTAINER).await?;
        if !outcome.succeeded {
            self.remove::<PersistentVolumeClaim>(&claim, &DeleteParams::default())
                .await?;
            let said = outcome.log.lines().rev().find(|l| !l.trim().is_empty());
            let why = [outcome.why.clone(), said.map(|l| l.trim().to_string())];
            let why: Vec<String> = why.into_iter().flatten().collect();
            return Err(Error::Busy(format!(
                "restoring member {member} from {source} failed ({}); its claim {claim} was \
                 deleted and the restore is tried again on a new one",
                if why.is_empty() {
                    "no reason given".into()
                } else {
                    why.join(": ")
                }
            )));
        }
        let patch = serde_json::json!({"metadata": {"annotations": {
            ANNOTATION_RESTORED: source.as_str(),
        }}});
        self.merge::<PersistentVolumeClaim>(&claim, Patch::Merge(patch))
            .await
    }
}

impl KubeBackups {
    /// `e`, the failed open of `backup`; when it is not listed there, said
    /// in the user's terms (the claim and folder, or bucket and prefix,
    /// never a path in the Job's pod) with the backups that are there.
    pub(super) async fn missing(
        &self,
        location: &Location,
        backup: &str,
        e: BackupError,
    ) -> BackupError {
        let Ok(list) = self.list(location).await else {
            return e;
        };
        let names: Vec<&str> = list.iter().map(|m| m.name.as_str()).collect();
        if matches!(e, BackupError::NotFound { .. }) || names.contains(&backup) {
            return e;
        }
        let known = if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        };
        let dir = self.describe(location);
        BackupError::NotFound {
            name: backup.into(),
            dir,
            known,
        }
    }
}
