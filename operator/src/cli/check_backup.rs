//! The `check-backup CLUSTER [BACKUP]` command: proves a backup restores
//! to what the cluster held at its revision
//! ([`crate::platform::local::restore_check`]), records the result in the
//! backup's meta (shown by `backups CLUSTER`) and logs it.

use std::path::Path;
use std::sync::Arc;

use super::backup::{Error, location};
use super::status;
use crate::backup::proof::{RestoreCheck, Verdict};
use crate::backup::{self, BackupMeta, BackupStore, Source};
use crate::platform::local::backups::LocalBackups;
use crate::platform::local::binaries::Binaries;
use crate::tls::ClientTls;

/// Restore-checks backup `name` of `cluster` (`None`: its newest backup
/// that checks out) against a ready member of the running cluster, and
/// records the result in the backup's meta.
pub async fn run(
    state_dir: &Path,
    cluster: &str,
    name: Option<&str>,
    binaries: Arc<Binaries>,
) -> Result<(BackupMeta, RestoreCheck), Error> {
    crate::names::check_cluster_name(cluster)?;
    let resource = status::load(state_dir, Some(cluster))?.remove(0);
    let (location, _) = location(&resource);
    let store = LocalBackups::new(state_dir, binaries);
    let dir = store.dir(&location);
    let mut meta = match name {
        Some(name) => {
            let metas = store.list(&location).await?;
            let known: Vec<String> = metas.iter().map(|m| m.name.clone()).collect();
            let meta = metas.into_iter().find(|m| m.name == name).ok_or_else(|| {
                backup::Error::NotFound {
                    name: name.into(),
                    dir: dir.display().to_string(),
                    known: if known.is_empty() {
                        "none".into()
                    } else {
                        known.join(", ")
                    },
                }
            })?;
            store.verify(&location, &meta).await?;
            meta
        }
        None => {
            let (good, problems) = store.newest_good(&location).await?;
            for p in &problems {
                tracing::warn!(cluster, problem = %p, "restore check: skipping a damaged backup");
            }
            good.ok_or_else(|| backup::Error::NotFound {
                name: "(the newest good backup)".into(),
                dir: dir.display().to_string(),
                known: "no backup that checks out".into(),
            })?
        }
    };
    let member = resource
        .status
        .iter()
        .flat_map(|s| s.members.iter())
        .find(|m| m.ready && !m.learner)
        .cloned()
        .ok_or(backup::Error::NoMember)?;
    let tls = ClientTls::from_status(resource.status.as_ref())?;
    let live = Source {
        member: &member.name,
        url: &member.client_url,
        tls: tls.as_ref(),
    };
    let check = store.restore_check(&location, &meta, live).await?;
    match check.result {
        Verdict::Verified => {
            tracing::info!(cluster, backup = %meta.name, revision = meta.revision, "restore check: {}", check.message)
        }
        Verdict::Mismatch | Verdict::Unverifiable => {
            tracing::warn!(cluster, backup = %meta.name, revision = meta.revision, result = %check.result, "restore check: {}", check.message)
        }
    }
    meta.restore_check = Some(check.clone());
    Ok((meta, check))
}
