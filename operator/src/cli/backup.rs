//! The `backups CLUSTER` and `backup CLUSTER` commands. They work from the
//! state folder (the cluster's published spec and member URLs), so they need
//! no running operator.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::status;
use super::table::render;
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
    /// Flags that do not name a store.
    #[error("{0}")]
    Flags(String),
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

/// A backup and the result of checking its file again now.
pub type Checked = (BackupMeta, Result<(), String>);

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
                return super::store_listing::list_in_store(&location);
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

/// A table of backups.
pub fn table(backups: &[Checked]) -> String {
    let mut rows = vec![vec![
        "NAME".to_string(),
        "TIME".into(),
        "REVISION".into(),
        "KEYS".into(),
        "SIZE".into(),
        "FROM".into(),
        "CHECK".into(),
        "RESTORE CHECK".into(),
    ]];
    for (m, check) in backups {
        rows.push(vec![
            m.name.clone(),
            m.time.clone(),
            m.revision.to_string(),
            m.total_keys.to_string(),
            format!("{:.1} MiB", m.size as f64 / (1 << 20) as f64),
            format!("{} ({})", m.member, m.etcd_version),
            match check {
                Ok(()) => "ok".into(),
                Err(e) => format!("DAMAGED: {e}"),
            },
            restore_check(m),
        ]);
    }
    render(&rows)
}

/// The chains of delta segments (continuous backups) of the backups in
/// `dir`, a line each for those that have segments: how many are intact,
/// the last revision and time they hold, and where the chain is cut.
pub fn chains(dir: &Path, backups: &[Checked]) -> String {
    let mut out = String::new();
    for (m, _) in backups {
        let chain = backup::chain::read(dir, m);
        if chain.files == 0 {
            continue;
        }
        let last = chain
            .last_unix_ms()
            .map_or("-".into(), backup::follow::rfc3339_ms);
        out.push_str(&format!(
            "chain of {}: {} segments, last revision {}, last written {last}; point-in-time \
             restore (spec.restore.toRevision/toTime) from revision {} ({}) to {} ({last})",
            m.name,
            chain.segments.len(),
            chain.last_revision(),
            m.revision,
            m.time,
            chain.last_revision(),
        ));
        match &chain.cut {
            Some(cut) => out.push_str(&format!(
                "; CUT: {cut} ({} segment files after it are not used)\n",
                chain.files - chain.segments.len()
            )),
            None => out.push('\n'),
        }
    }
    out
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

/// The last restore check of a backup, in a few words (`check-backup`).
pub fn restore_check(m: &BackupMeta) -> String {
    use crate::backup::proof::Verdict;
    match &m.restore_check {
        None => "never".into(),
        Some(c) => match (c.result, c.backup_hash, c.live_hash) {
            (Verdict::Mismatch, Some(b), Some(l)) => {
                format!("MISMATCH at {} (hash {b}, live {l})", c.time)
            }
            (Verdict::Mismatch, ..) => format!("MISMATCH at {}: {}", c.time, c.message),
            (Verdict::Unverifiable, ..) => format!("unverifiable at {} (compacted)", c.time),
            (Verdict::Verified, ..) => format!("verified at {}", c.time),
        },
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
