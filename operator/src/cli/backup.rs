//! The `backups CLUSTER` and `backup CLUSTER` commands. They work from the
//! state folder (the cluster's published spec and member URLs), so they need
//! no running operator.

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use super::backup_table::{Checked, chains, restore_check, table};
use super::status;
use crate::backup::{self, BackupMeta, BackupStore, Location, Source};
use crate::crd::EtcdCluster;
use crate::platform::local::backups::LocalBackups;
use crate::platform::local::binaries::Binaries;
use crate::tls::ClientTls;

/// Why a backup command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cluster's status could not be read.
    #[error(transparent)]
    Status(#[from] status::Error),
    /// The backup failed.
    #[error(transparent)]
    Backup(#[from] backup::Error),
    /// The name given is no cluster name (it would become part of a path).
    #[error(transparent)]
    Name(#[from] crate::names::NameError),
    /// The client certificate the status names cannot be read.
    #[error("the cluster uses client TLS, but its client certificate cannot be read: {0}")]
    Tls(#[from] crate::tls::Error),
    /// An object store could not be listed.
    #[error(transparent)]
    Listing(#[from] super::store_listing::Error),
}

/// Where a published cluster's backups are kept, and its retention.
pub(crate) fn location(cluster: &EtcdCluster) -> (Location, Option<usize>) {
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    let b = cluster.spec.backup.as_ref();
    let path = b
        .and_then(|b| b.location.as_ref()?.path.as_ref())
        .map(PathBuf::from);
    let keep = b.and_then(|b| usize::try_from(b.max_backups).ok());
    let location = Location {
        cluster: name.to_string(),
        uid: cluster.metadata.uid.clone(),
        path,
        claim: None,
        claim_size: None,
        storage_class: None,
        object: b
            .and_then(|b| b.location.as_ref()?.object_store.as_ref())
            .and_then(|o| {
                backup::object::ObjectLocation::parse(o, "spec.backup.location.objectStore").ok()
            }),
        source: None,
        until: None,
    };
    (location, keep)
}

/// The backup folder of `cluster` and each backup in it, newest first. A
/// deleted cluster's backups are kept: they are still listed from the
/// default folder, `STATE/backups/NAME`. Only the cluster's own backups
/// are listed ([`backup::owned`]: by its uid when its status names one, by
/// its name for a deleted cluster), never another's in the same folder.
pub fn list(state_dir: &Path, cluster: &str) -> Result<(PathBuf, Vec<Checked>), Error> {
    crate::names::check_cluster_name(cluster)?;
    let (dir, uid) = match status::load(state_dir, Some(cluster)) {
        Ok(mut found) => {
            let (location, _) = location(&found.remove(0));
            if location.object.is_some() {
                return Ok(super::store_listing::list_in_store(&location)?);
            }
            let dir = backup::backup_dir(state_dir, cluster, location.path.as_deref());
            (dir, location.uid)
        }
        Err(status::Error::NoCluster { .. })
            if backup::backup_dir(state_dir, cluster, None).is_dir() =>
        {
            (backup::backup_dir(state_dir, cluster, None), None)
        }
        Err(e) => return Err(e.into()),
    };
    let out = backup::list_own(&dir, cluster, uid.as_deref())?
        .into_iter()
        .map(|m| {
            let check = backup::check_file(&m.path(&dir), Some(&m.sha256))
                .map(|_| ())
                .map_err(|e| e.to_string());
            (m, check)
        })
        .collect();
    Ok((dir, out))
}

/// [`chains`] of `cluster`'s backups wherever they are: from `dir`, or for
/// an object store, from a temporary folder its segments are downloaded
/// to (never the operator's own copies).
pub fn chains_for(state_dir: &Path, cluster: &str, dir: &Path, backups: &[Checked]) -> String {
    let object = status::load(state_dir, Some(cluster))
        .ok()
        .and_then(|mut found| {
            let (l, _) = location(&found.remove(0));
            l.object.is_some().then_some(l)
        });
    let Some(location) = object else {
        return chains(dir, backups);
    };
    match super::store_listing::Reader::new() {
        Ok(reader) => reader.chains(&location, backups),
        Err(e) => format!("chains not read: {e}\n"),
    }
}

/// Takes a backup of `cluster` now, from a ready member (a follower when
/// there is one), and applies the cluster's retention.
pub async fn take_now(
    state_dir: &Path,
    cluster: &str,
    binaries: Arc<Binaries>,
) -> Result<BackupMeta, Error> {
    let resource = status::load(state_dir, Some(cluster))?.remove(0);
    let (location, keep) = location(&resource);
    let store = LocalBackups::new(state_dir, binaries);
    let mut members: Vec<_> = resource
        .status
        .iter()
        .flat_map(|s| s.members.iter())
        .filter(|m| m.ready && !m.learner)
        .cloned()
        .collect();
    members.sort_by_key(|m| m.leader);
    let tls = ClientTls::from_status(resource.status.as_ref())?;
    let mut last = backup::Error::NoMember;
    for m in &members {
        let source = Source {
            member: &m.name,
            url: &m.client_url,
            tls: tls.as_ref(),
        };
        match store.save(&location, source).await {
            Ok(meta) => {
                if let Some(keep) = keep {
                    let r = store.retain(&location, keep).await?;
                    for name in &r.damaged {
                        eprintln!("warning: backup {name} is damaged and not counted as kept");
                    }
                }
                return Ok(meta);
            }
            Err(e) => last = e,
        }
    }
    Err(last.into())
}
