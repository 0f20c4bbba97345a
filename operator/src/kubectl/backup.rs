//! `kubectl etcd backup NAME`: a backup now, taken the way the operator
//! takes every backup on Kubernetes: a Job of the operator's own image
//! (`etcd-operator backup-job save`) streams a snapshot from a ready
//! member (a follower when there is one) into the cluster's backup claim
//! or object store and verifies it there
//! ([`crate::platform::kube::backups::KubeBackups`], the same code). The
//! Job is owned by the cluster, labelled as the operator's, and deleted
//! once its report is read. The operator counts the backup at its next
//! backup Job (its list is refreshed by each Job's report) and applies the
//! retention then.
//!
//! The image is `--image`, or the operator Deployment's
//! `ETCD_OPERATOR_BACKUP_IMAGE` (or its image), found by its label
//! `app.kubernetes.io/name=etcd-operator` in any namespace.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::Deployment;
use kube::Resource;
use kube::api::{Api, ListParams};

use super::{Error, Plugin, Result};
use crate::backup::{BackupMeta, BackupStore, Location, Source};
use crate::crd::EtcdCluster;
use crate::platform::kube::KubeVersions;
use crate::platform::kube::backups::KubeBackups;

/// The label the operator's Deployment carries.
pub const OPERATOR_SELECTOR: &str = "app.kubernetes.io/name=etcd-operator";
/// The operator's variable naming the image its backup Jobs run.
pub const IMAGE_VARIABLE: &str = "ETCD_OPERATOR_BACKUP_IMAGE";

impl Plugin {
    /// The image the operator's backup Jobs run: its Deployment's
    /// [`IMAGE_VARIABLE`], else its container's image.
    pub async fn operator_image(&self) -> Result<String> {
        let api: Api<Deployment> = Api::all(self.client.clone());
        let lp = ListParams::default().labels(OPERATOR_SELECTOR);
        let list = api.list(&lp).await.map_err(|e| {
            Error::Refused(format!(
                "cannot list Deployments labelled {OPERATOR_SELECTOR} to find the operator's \
                 image ({e}): pass --image IMAGE, the image of the operator's backup Jobs (its \
                 {IMAGE_VARIABLE})"
            ))
        })?;
        let images: BTreeSet<String> = list.items.iter().filter_map(image_of).collect();
        let mut images = images.into_iter();
        match (images.next(), images.next()) {
            (Some(one), None) => Ok(one),
            (None, _) => Err(Error::Refused(format!(
                "found no operator Deployment (labelled {OPERATOR_SELECTOR}) to take its image \
                 from: pass --image IMAGE, the image of the operator's backup Jobs (its \
                 {IMAGE_VARIABLE})"
            ))),
            (Some(a), Some(b)) => Err(Error::Refused(format!(
                "operator Deployments name different images ({a}, {b}{}): pass --image IMAGE",
                if images.next().is_some() { ", ..." } else { "" }
            ))),
        }
    }

    /// Takes a backup of `name` now in a backup Job of `image`, from a
    /// ready member (a follower first); returns what the Job saved.
    pub async fn backup_now(&self, name: &str, image: &str) -> Result<BackupMeta> {
        let cluster = self.cluster(name).await?;
        let location = location(&cluster)?;
        let owner = cluster.controller_owner_ref(&()).ok_or_else(|| {
            Error::Refused(format!("EtcdCluster {name} has no uid yet: try again"))
        })?;
        let mut members: Vec<_> = cluster
            .status
            .iter()
            .flat_map(|s| s.members.iter())
            .filter(|m| m.ready && !m.learner)
            .collect();
        if members.is_empty() {
            return Err(Error::Refused(format!(
                "{name} has no ready member to take a backup from (kubectl etcd status {name})"
            )));
        }
        // Followers first: a snapshot loads the member it is taken from.
        members.sort_by_key(|m| m.leader);
        let store = KubeBackups::new(self.client.clone(), &self.namespace, Some(image.into()));
        store.own(name, owner);
        let mut last = None;
        for m in members {
            let tls = m.client_url.starts_with("https://").then(job_tls);
            let source = Source {
                member: &m.name,
                url: &m.client_url,
                tls: tls.as_ref(),
            };
            match store.save(&location, source).await {
                Ok(meta) => return Ok(meta),
                Err(e) => last = Some(e),
            }
        }
        Err(Error::Backup {
            cluster: name.to_string(),
            source: last.unwrap_or(crate::backup::Error::NoMember),
        })
    }
}

/// Where `cluster`'s backups go, as the operator reads its spec.
fn location(cluster: &EtcdCluster) -> Result<Location> {
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    if cluster.spec.backup.is_none() {
        return Err(Error::Refused(format!(
            "{name} has no spec.backup: set one (where backups go, how many to keep) to take \
             backups"
        )));
    }
    let valid = crate::validate::validate(name, &cluster.spec, &KubeVersions)
        .map_err(|e| Error::Refused(format!("{name}'s spec is invalid: {e}")))?;
    Ok(Location::of(name, valid.backup.as_ref()).with_uid(cluster.metadata.uid.as_deref()))
}

/// The client TLS of a save Job: it mounts the Secret `CLUSTER-client-tls`
/// the operator made ([`crate::platform::kube::tls::client_secret_name`])
/// and reads it itself; the store only needs to know that TLS is on, so no
/// certificate or key passes through this program (this one holds none).
fn job_tls() -> crate::tls::ClientTls {
    crate::tls::ClientTls {
        ca: String::new(),
        cert_key: crate::tls::CertKey {
            cert: String::new(),
            key: String::new(),
        },
        server_name: None,
    }
}

/// The image of an operator Deployment's backup Jobs.
fn image_of(d: &Deployment) -> Option<String> {
    let containers = &d.spec.template.spec.as_ref()?.containers;
    let c = containers
        .iter()
        .find(|c| c.name == "etcd-operator")
        .or_else(|| containers.first())?;
    let from_env = c
        .env
        .iter()
        .flatten()
        .find(|e| e.name == IMAGE_VARIABLE)
        .and_then(|e| e.value.clone())
        .filter(|v| !v.is_empty());
    from_env.or_else(|| c.image.clone())
}
