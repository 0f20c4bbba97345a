//! Restores from the local platform's store: a backup (with its chain of
//! delta segments replayed into it) set aside as `restore.db` in the
//! cluster's folder, from a backup folder or downloaded from an object
//! store first.

use std::path::PathBuf;

use super::object_backups;
use super::{LocalBackups, RESTORE_FILE};
use crate::backup::replay::Replayed;
use crate::backup::{
    BackupMeta, ChainRestore, Error, Location, RestoreSource, Result, chain, check_file, io_err,
};
use crate::platform::local::safe_path;

impl LocalBackups {
    /// The folder and meta of the backup named `name`, looked up as
    /// [`BackupStore::open_for_restore`] does; `None` for the path of a
    /// snapshot file (no meta, no chain).
    pub(super) fn find(
        &self,
        location: &Location,
        name: &str,
    ) -> Result<Option<(PathBuf, BackupMeta)>> {
        let (_, sha256) = self.locate(location, name)?;
        if sha256.is_none() {
            return Ok(None);
        }
        let dir = self.dir(location);
        let meta = crate::backup::list(&dir)?
            .into_iter()
            .find(|m| m.name == name && location.owns(m));
        Ok(meta.map(|m| (dir, m)))
    }

    /// Sets `base` (a backup in `dir`) aside for a bootstrap of the
    /// cluster of `location`, with the segments of its chain replayed.
    pub(super) async fn chain_restore(
        &self,
        location: &Location,
        dir: PathBuf,
        base: &BackupMeta,
    ) -> Result<ChainRestore> {
        let chain = {
            let (dir, base) = (dir.clone(), base.clone());
            tokio::task::spawn_blocking(move || chain::read(&dir, &base))
                .await
                .map_err(|e| Error::Tool(format!("reading the chain failed: {e}")))?
        };
        // A point in time: the chain cut there, or no restore at all.
        let chain = match location.until {
            Some(point) => crate::backup::point::cut(&chain, base.unix_ms, point)
                .map_err(|m| Error::Point(format!("spec.restore: {m}")))?,
            None => chain,
        };
        let plain = |problem: Option<String>| {
            let replayed = Replayed {
                revision: base.revision,
                ..Replayed::default()
            };
            (replayed, problem)
        };
        let snapshot = base.path(&dir);
        if chain.segments.is_empty() {
            let source = self
                .set_aside(location, &snapshot, Some(&base.sha256))
                .await?;
            let (replayed, problem) = plain(chain.cut.clone());
            return Ok(ChainRestore {
                source,
                replayed,
                problem,
            });
        }
        {
            let (path, sha) = (snapshot.clone(), base.sha256.clone());
            tokio::task::spawn_blocking(move || check_file(&path, Some(&sha)))
                .await
                .map_err(|e| Error::Tool(format!("verification task failed: {e}")))??;
        }
        let dest =
            safe_path::cluster_path(&self.clusters_dir(), &location.cluster, &[RESTORE_FILE])
                .map_err(|e| Error::Io {
                    what: "cannot set the snapshot aside".into(),
                    source: e.into_io(),
                })?;
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir)
                .map_err(io_err(format!("cannot create {}", dir.display())))?;
        }
        let merged = crate::platform::local::merge::merge(
            &self.state_dir,
            &self.binaries,
            &location.cluster,
            base,
            &snapshot,
            &chain,
            &dest,
        )
        .await;
        match merged {
            Ok(replayed) => {
                tracing::info!(
                    cluster = %location.cluster, base = %base.name, segments = replayed.segments,
                    revision = replayed.revision, "delta segments replayed into the snapshot set aside"
                );
                Ok(ChainRestore {
                    source: RestoreSource::new(dest.to_string_lossy()),
                    replayed,
                    problem: chain.cut,
                })
            }
            Err(e) if location.until.is_some() => Err(Error::Point(format!(
                "replaying the delta segments of {} up to the point asked for failed: {e}; \
                 nothing was created",
                base.name
            ))),
            Err(e) => {
                let m = format!(
                    "replaying the {} delta segments of {} failed ({e}); restoring the backup alone",
                    chain.segments.len(),
                    base.name
                );
                tracing::error!(cluster = %location.cluster, "{m}");
                let source = self
                    .set_aside(location, &snapshot, Some(&base.sha256))
                    .await?;
                let (replayed, problem) = plain(Some(m));
                Ok(ChainRestore {
                    source,
                    replayed,
                    problem,
                })
            }
        }
    }
}

impl LocalBackups {
    /// Copies the snapshot at `found` to `STATE/clusters/CLUSTER/restore.db`,
    /// then checks the copy (its trailer, and `sha256` when a meta records
    /// one): what is restored is exactly what was checked, even if
    /// retention deletes or replaces the original meanwhile.
    pub(super) async fn set_aside(
        &self,
        location: &Location,
        found: &std::path::Path,
        sha256: Option<&str>,
    ) -> Result<RestoreSource> {
        let dest =
            safe_path::cluster_path(&self.clusters_dir(), &location.cluster, &[RESTORE_FILE])
                .map_err(|e| Error::Io {
                    what: "cannot set the snapshot aside".into(),
                    source: e.into_io(),
                })?;
        let (from, to, sha) = (
            found.to_path_buf(),
            dest.clone(),
            sha256.map(str::to_string),
        );
        tokio::task::spawn_blocking(move || copy_checked(&from, &to, sha.as_deref()))
            .await
            .map_err(|e| Error::Tool(format!("setting the snapshot aside failed: {e}")))??;
        tracing::info!(cluster = %location.cluster, from = %found.display(), "snapshot set aside for a restore");
        Ok(RestoreSource::new(dest.to_string_lossy()))
    }

    /// [`BackupStore::open_named_for_restore`] from an object store: the
    /// backup and its chain downloaded and checked, then restored as from
    /// a folder; the download is deleted once the snapshot is set aside.
    pub(super) async fn object_restore(
        &self,
        location: &Location,
        backup: &str,
        segments: bool,
    ) -> Result<ChainRestore> {
        let (dir, meta) = self.object.fetch_named(location, backup, segments).await?;
        let restored = if segments {
            self.chain_restore(location, dir, &meta).await
        } else {
            self.set_aside(location, &meta.path(&dir), Some(&meta.sha256))
                .await
                .map(|source| ChainRestore {
                    source,
                    replayed: Replayed {
                        revision: meta.revision,
                        ..Replayed::default()
                    },
                    problem: None,
                })
        };
        self.object.close(location, object_backups::RESTORING);
        restored
    }
}

/// Copies `from` to `to`, then checks the copy as a snapshot (with the
/// SHA-256 `sha256` when a meta records one); a copy that fails the check
/// is removed.
pub(super) fn copy_checked(
    from: &std::path::Path,
    to: &std::path::Path,
    sha256: Option<&str>,
) -> Result<()> {
    let what = format!("cannot copy the snapshot to {}", to.display());
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(io_err(what.clone()))?;
    }
    std::fs::copy(from, to).map_err(io_err(what))?;
    if let Err(e) = check_file(to, sha256) {
        let _ = std::fs::remove_file(to);
        return Err(e);
    }
    Ok(())
}
