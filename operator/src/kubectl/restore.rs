//! `kubectl etcd restore NAME --backup B [--to-revision R | --to-time T]
//! --into NEW`: a new `EtcdCluster` NEW with NAME's spec (size, version,
//! storage, TLS, backups, tuning...) and `spec.restore` naming NAME's
//! backup B where NAME's backups are (its claim or object store), up to a
//! point in time when asked. Checked as the operator checks a spec before
//! anything is written; printed as YAML, or created with `--apply` (never
//! over an existing cluster). The operator then restores it: on
//! Kubernetes a Job sets the backup aside in NEW's claim (its chain
//! replayed up to the point) and every member starts from it.

use kube::api::{Api, PostParams};

use super::{Error, Plugin, Result};
use crate::crd::{EtcdCluster, RestoreLocation, RestoreSpec};

/// What to restore, and into what.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// The backup (as `kubectl etcd backups NAME` lists it).
    pub backup: String,
    /// The new cluster's name.
    pub into: String,
    /// `spec.restore.toRevision`.
    pub to_revision: Option<i64>,
    /// `spec.restore.toTime` (RFC 3339).
    pub to_time: Option<String>,
}

/// The field manager of a cluster `--apply` creates.
pub const FIELD_MANAGER: &str = "kubectl-etcd";

/// The new cluster restoring `request` from `source`'s backups: pure,
/// checked as the operator checks a spec on Kubernetes (every problem at
/// once, naming the field).
pub fn build(source: &EtcdCluster, namespace: &str, request: &Request) -> Result<EtcdCluster> {
    let name = source.metadata.name.as_deref().unwrap_or_default();
    if request.into == name {
        return Err(Error::Refused(format!(
            "--into {}: a restore makes a new cluster; name one that does not exist",
            request.into
        )));
    }
    let location = source
        .spec
        .backup
        .as_ref()
        .and_then(|b| b.location.as_ref());
    let restore = RestoreSpec {
        backup: request.backup.clone(),
        cluster: Some(name.to_string()),
        location: location
            .map(|l| RestoreLocation {
                path: None,
                persistent_volume_claim: l.persistent_volume_claim.clone(),
                object_store: l.object_store.clone(),
            })
            .filter(|l| l.persistent_volume_claim.is_some() || l.object_store.is_some()),
        to_revision: request.to_revision,
        to_time: request.to_time.clone(),
    };
    let mut spec = source.spec.clone();
    spec.restore = Some(restore);
    let mut new = EtcdCluster::new(&request.into, spec);
    new.metadata.namespace = Some(namespace.to_string());
    let mut problems: Vec<String> = Vec::new();
    if let Err(e) = crate::validate::validate(
        &request.into,
        &new.spec,
        &crate::platform::kube::KubeVersions,
    ) {
        problems.push(e.to_string());
    }
    problems.extend(crate::controller::kube::kube_checks(&new));
    if !problems.is_empty() {
        return Err(Error::Refused(format!(
            "the cluster {} would be refused: {}",
            request.into,
            problems.join("; ")
        )));
    }
    Ok(new)
}

impl Plugin {
    /// The new cluster restoring `request` from `name`'s backups
    /// ([`build`]); with `apply`, created in the namespace.
    pub async fn restore(&self, name: &str, request: &Request, apply: bool) -> Result<EtcdCluster> {
        let source = self.cluster(name).await?;
        let new = build(&source, &self.namespace, request)?;
        if !apply {
            return Ok(new);
        }
        let api: Api<EtcdCluster> = Api::namespaced(self.client.clone(), &self.namespace);
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        match api.create(&pp, &new).await {
            Ok(created) => Ok(created),
            Err(kube::Error::Api(s)) if s.code == 409 => Err(Error::Refused(format!(
                "an EtcdCluster {} exists already in namespace {}: pick another --into",
                request.into, self.namespace
            ))),
            Err(source) => Err(Error::Api {
                what: format!(
                    "cannot create EtcdCluster {} in namespace {}",
                    request.into, self.namespace
                ),
                source,
            }),
        }
    }
}
