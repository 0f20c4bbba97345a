//! `kubectl etcd` (the `kubectl-etcd` binary): the operator's commands for
//! clusters on Kubernetes, worked from their `EtcdCluster` resources
//! through the API server, as a user's kubeconfig allows:
//!
//! * `status [NAME]`: the table and one-cluster screen of the local
//!   `etcd-operator status` ([`crate::cli::status`]), from the resources;
//! * `backups NAME`: what the status says of the cluster's backups and
//!   where they are, and for an object store the bucket's listing
//!   ([`crate::cli::store_listing`], the user's credentials);
//! * `backup NAME`: a backup now, by the very backup Job the operator runs
//!   ([`backup`], through [`crate::platform::kube::backups::KubeBackups`]);
//! * `restore NAME --backup B --into NEW`: a new `EtcdCluster` restoring
//!   `B` ([`restore`]), printed or created.
//!
//! The binary parses flags and builds the client; everything that talks to
//! the API server is here, tested against the stand-in API server.

pub mod backup;
pub mod restore;
#[cfg(test)]
mod tests;

use std::time::SystemTime;

use kube::Client;
use kube::api::{Api, ListParams};

use crate::backup::object::ObjectLocation;
use crate::cli::status::STALE_LIVE;
use crate::crd::EtcdCluster;

/// Why a `kubectl etcd` command failed, in words that say what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No such cluster in the namespace.
    #[error(
        "no EtcdCluster {name} in namespace {namespace} (there: {known}); pass -n NAMESPACE \
         for another namespace"
    )]
    NoCluster {
        /// The name asked for.
        name: String,
        /// Where it was looked for.
        namespace: String,
        /// The clusters there.
        known: String,
    },
    /// The API server refused or failed a request.
    #[error("{what}: {source}{}", hint(source))]
    Api {
        /// What was asked.
        what: String,
        /// The API server's answer.
        source: kube::Error,
    },
    /// A backup could not be taken.
    #[error("backup of {cluster} failed: {source}")]
    Backup {
        /// The cluster.
        cluster: String,
        /// Why.
        source: crate::backup::Error,
    },
    /// What was asked cannot be done, and why.
    #[error("{0}")]
    Refused(String),
}

/// What to do about an API error a user can fix.
fn hint(e: &kube::Error) -> &'static str {
    match e {
        kube::Error::Api(s) if s.code == 403 => {
            " (your kubeconfig's user may not do this: ask for the rights, or pass --context)"
        }
        kube::Error::Api(s) if s.code == 404 && s.message.contains("the server could not find") => {
            " (is the EtcdCluster CRD installed? kubectl apply -k deploy/)"
        }
        _ => "",
    }
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The API requests of `kubectl etcd`, in one namespace.
#[derive(Clone)]
pub struct Plugin {
    client: Client,
    namespace: String,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl Plugin {
    /// Commands on the clusters of `namespace`.
    pub fn new(client: Client, namespace: &str) -> Self {
        Plugin {
            client,
            namespace: namespace.to_string(),
        }
    }

    /// The namespace worked in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn api(&self) -> Api<EtcdCluster> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The cluster `name`; a name that is not there says which are.
    pub async fn cluster(&self, name: &str) -> Result<EtcdCluster> {
        let found = self
            .api()
            .get_opt(name)
            .await
            .map_err(|source| Error::Api {
                what: format!(
                    "cannot read EtcdCluster {name} in namespace {}",
                    self.namespace
                ),
                source,
            })?;
        if let Some(c) = found {
            return Ok(c);
        }
        let known: Vec<String> = self
            .clusters()
            .await?
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect();
        Err(Error::NoCluster {
            name: name.to_string(),
            namespace: self.namespace.clone(),
            known: if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            },
        })
    }

    /// Every cluster of the namespace.
    pub async fn clusters(&self) -> Result<Vec<EtcdCluster>> {
        let list = self
            .api()
            .list(&ListParams::default())
            .await
            .map_err(|source| Error::Api {
                what: format!("cannot list EtcdClusters in namespace {}", self.namespace),
                source,
            })?;
        Ok(list.items)
    }

    /// The clusters `status` shows: `name`'s, or every one.
    pub async fn status(&self, name: Option<&str>) -> Result<Vec<EtcdCluster>> {
        match name {
            Some(n) => Ok(vec![self.cluster(n).await?]),
            None => self.clusters().await,
        }
    }

    /// What `backups NAME` shows from the API server: the cluster, and
    /// its backups' object store when they are in one (listed by the
    /// caller, outside the async runtime: [`crate::cli::store_listing`]).
    pub async fn backups(&self, name: &str) -> Result<(EtcdCluster, Option<ObjectLocation>)> {
        let cluster = self.cluster(name).await?;
        let object = cluster
            .spec
            .backup
            .as_ref()
            .and_then(|b| b.location.as_ref()?.object_store.as_ref())
            .map(|o| ObjectLocation::parse(o, "spec.backup.location.objectStore"))
            .transpose()
            .map_err(|problems| {
                let said: Vec<String> = problems
                    .into_iter()
                    .map(|(f, m)| format!("{f}: {m}"))
                    .collect();
                Error::Refused(format!(
                    "{name}'s object store cannot be read: {}",
                    said.join("; ")
                ))
            })?;
        Ok((cluster, object))
    }
}

/// The `status` text: the local command's table (and for one cluster its
/// members and the rest of its status), then where it came from.
pub fn status_text(
    clusters: &[EtcdCluster],
    one: bool,
    namespace: &str,
    now: SystemTime,
) -> String {
    let mut text = crate::cli::status::table(clusters, one, now, STALE_LIVE);
    text.push_str(&format!(
        "\nsource: the EtcdCluster resources in namespace {namespace}, as the operator last \
         wrote their status\n"
    ));
    text
}

/// The `backups NAME` text before any listing: what the status says of
/// the backups, and where they are.
pub fn backups_text(cluster: &EtcdCluster, now: SystemTime) -> String {
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    let Some(b) = cluster.spec.backup.as_ref() else {
        return format!("{name} takes no backups: spec.backup is not set\n");
    };
    let mut out = crate::cli::status_detail::backup_lines(cluster.status.as_ref(), now);
    if out.is_empty() {
        out = "backups: no status yet (is the operator running?)\n".into();
    }
    let location = b.location.as_ref();
    let place = match location.and_then(|l| l.object_store.as_ref()) {
        Some(o) => format!("the object store {}, under {name}/", o.url),
        None => format!(
            "the volume claim {} (folder backups/{name}); `kubectl etcd restore {name} --backup \
             NAME` restores one",
            location
                .and_then(|l| l.persistent_volume_claim.clone())
                .unwrap_or_else(|| crate::platform::kube::jobs::default_backup_claim(name))
        ),
    };
    out.push_str(&format!("where: {place}\n"));
    out
}
