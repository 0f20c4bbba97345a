//! The local platform's backups: a folder of snapshot files per cluster
//! (the spec's `location.path`, relative to the state folder, else
//! `STATE/backups/CLUSTER`), in the format of [`crate::backup`], verified
//! with the SHA-256 trailer and `etcdutl`/`etcdctl snapshot status`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::binaries::Binaries;
use super::object_backups::{self, ObjectBackups};
use super::safe_path;
use crate::backup::{
    self, BackupMeta, BackupStore, Error, Location, RestoreSource, Result, Source, chain,
    check_file, delta, io_err, snapshot,
};
use crate::backup::{ChainRestore, replay::Replayed};

/// The copy of the snapshot a bootstrap restores from, in the cluster's
/// folder.
const RESTORE_FILE: &str = "restore.db";

/// A snapshot file as last seen: its size and modification time.
type FileKey = (u64, Option<SystemTime>);

/// Backups in folders under (or named relative to) a state folder.
#[derive(Debug)]
pub struct LocalBackups {
    state_dir: PathBuf,
    binaries: Arc<Binaries>,
    /// What [`BackupStore::any_good`] found for each file, while unchanged.
    checked: Mutex<HashMap<PathBuf, (FileKey, bool)>>,
    /// Every location with an object store is kept there.
    object: ObjectBackups,
}

impl LocalBackups {
    /// Backups of the operator whose state folder is `state_dir`, checked
    /// and restored with `binaries`.
    pub fn new(state_dir: impl Into<PathBuf>, binaries: Arc<Binaries>) -> Self {
        let state_dir = state_dir.into();
        LocalBackups {
            object: ObjectBackups::new(state_dir.clone(), Arc::clone(&binaries)),
            state_dir,
            binaries,
            checked: Mutex::default(),
        }
    }

    /// This store, its object stores reached with `env` over the
    /// environment (a Job's environment, where a test runs its work).
    #[must_use]
    pub fn with_store_env(mut self, env: crate::backup::object::client::StoreEnv) -> Self {
        self.object = self.object.with_env(env);
        self
    }

    /// The state folder's `clusters` folder.
    fn clusters_dir(&self) -> PathBuf {
        self.state_dir.join("clusters")
    }

    /// Where backup `backup` of `location` (or the snapshot file at path
    /// `backup`) is, and the SHA-256 its meta records; only metas are read.
    /// A name is looked up in the location's folder only, among the
    /// backups of the location's cluster ([`Location::owner`]): never
    /// another cluster's backup of the same name, never another folder.
    pub fn locate(&self, location: &Location, backup: &str) -> Result<(PathBuf, Option<String>)> {
        if crate::names::is_snapshot_path(backup) {
            return backup::locate(backup, &[], &self.state_dir);
        }
        let dir = self.dir(location);
        let metas: Vec<BackupMeta> = backup::list(&dir)?
            .into_iter()
            .filter(|m| location.owns(m))
            .collect();
        if let Some(m) = metas.iter().find(|m| m.name == backup) {
            return Ok((m.path(&dir), Some(m.sha256.clone())));
        }
        Err(Error::NotFound {
            name: backup.into(),
            dir: format!("{} (backups of {})", dir.display(), location.owner()),
            known: if metas.is_empty() {
                "none".into()
            } else {
                metas
                    .iter()
                    .map(|m| m.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        })
    }

    /// Downloads the delta segments of `base` from `location`'s object
    /// store into `dir` (for reading its chain there, as `backups` does).
    pub async fn object_segments_into(
        &self,
        location: &Location,
        base: &BackupMeta,
        dir: &std::path::Path,
    ) -> Result<()> {
        self.object.fetch_segments(location, base, dir).await
    }

    /// The backups of `location` in its object store, each snapshot's size
    /// checked against its meta (nothing downloaded: see
    /// [`super::object_backups::ObjectBackups::list_sized`]).
    pub async fn list_sized(
        &self,
        location: &Location,
    ) -> Result<Vec<(BackupMeta, std::result::Result<(), String>)>> {
        self.object.list_sized(location).await
    }

    /// The folder of `location`: its path, else the default folder of the
    /// cluster whose backups it holds.
    pub fn dir(&self, location: &Location) -> PathBuf {
        backup::backup_dir(&self.state_dir, location.owner(), location.path.as_deref())
    }

    /// What [`BackupStore::any_good`] found for `path` when it was `key`.
    fn remembered(&self, path: &std::path::Path, key: FileKey) -> Option<bool> {
        let checked = self.checked.lock().unwrap_or_else(|e| e.into_inner());
        checked
            .get(path)
            .filter(|(k, _)| *k == key)
            .map(|(_, g)| *g)
    }
}

impl BackupStore for LocalBackups {
    fn describe(&self, location: &Location) -> String {
        if location.object.is_some() {
            return self.object.describe(location);
        }
        self.dir(location).display().to_string()
    }

    /// Checks the free-space floor first ([`super::space`]): a backup
    /// about the size of the member's database must leave it free.
    async fn save(&self, location: &Location, source: Source<'_>) -> Result<BackupMeta> {
        if location.object.is_some() {
            return self.object.save(location, source).await;
        }
        let dir = self.dir(location);
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(io_err(format!("cannot create {}", dir.display())))?;
        let expected = super::space::db_size(source.url).await;
        super::space::check(&dir, expected)?;
        snapshot::take(
            &location.cluster,
            location.uid.as_deref(),
            source,
            &dir,
            &self.binaries,
        )
        .await
    }

    async fn list(&self, location: &Location) -> Result<Vec<BackupMeta>> {
        if location.object.is_some() {
            return self.object.list(location).await;
        }
        own_list(&self.dir(location), location)
    }

    async fn verify(&self, location: &Location, backup: &BackupMeta) -> Result<()> {
        if location.object.is_some() {
            return self.object.verify(location, backup).await;
        }
        let path = backup.path(&self.dir(location));
        let sha = backup.sha256.clone();
        tokio::task::spawn_blocking(move || check_file(&path, Some(&sha)))
            .await
            .map_err(|e| Error::Tool(format!("verification task failed: {e}")))?
            .map(|_| ())
    }

    /// Deletes the backup's delta segments first, then the snapshot and
    /// its meta: a chain goes with its base.
    async fn delete(&self, location: &Location, backup: &BackupMeta) -> Result<()> {
        if !location.owns(backup) {
            return Err(Error::Unsupported(format!(
                "not deleting backup {}: it is not a backup of cluster {} (uid {})",
                backup.name,
                location.cluster,
                location.uid.as_deref().unwrap_or("unknown")
            )));
        }
        if location.object.is_some() {
            return self.object.delete(location, backup).await;
        }
        let dir = self.dir(location);
        chain::delete(&dir, &backup.name)?;
        for path in [backup.path(&dir), dir.join(format!("{}.json", backup.name))] {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err(format!("cannot delete {}", path.display()))(e)),
            }
        }
        Ok(())
    }

    /// Deletes only files of the location's cluster ([`backup::owned_file`]):
    /// a meta whose snapshot was deleted by hand (alone it is no backup,
    /// and nothing else would ever delete it), delta segments whose base is
    /// gone, and, once untouched for [`backup::ORPHAN_AGE`], temporary
    /// files and snapshots without a meta (a save cut off between its
    /// rename and its meta). Anything else in the folder stays.
    async fn sweep(&self, location: &Location) {
        if location.object.is_some() {
            return self.object.sweep(location).await;
        }
        let dir = self.dir(location);
        let (cluster, uid) = (location.cluster.as_str(), location.uid.as_deref());
        chain::sweep(&dir, &|base| {
            backup::owned_file(&format!("{base}.db"), cluster, uid).is_some()
        });
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            let file = e.file_name();
            let Some(file) = file.to_str() else { continue };
            let Some(name) = backup::owned_file(file, cluster, uid) else {
                continue;
            };
            let leftover = if file.starts_with(".tmp-") {
                chain::old_file(&e)
            } else if file.ends_with(".db") {
                !dir.join(format!("{name}.json")).exists() && chain::old_file(&e)
            } else {
                backup::orphan_meta(&dir, &path, cluster, uid)
            };
            if leftover {
                tracing::info!(cluster, file = %path.display(), "deleting what a cut-off save left behind");
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    async fn shared_with(&self, location: &Location) -> Vec<String> {
        if location.object.is_some() {
            return self.object.shared_with(location).await;
        }
        let mut out: Vec<String> = backup::list(&self.dir(location))
            .unwrap_or_default()
            .into_iter()
            .filter(|m| !location.owns(m))
            .map(|m| backup::sharer(m, &location.cluster))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    async fn chain(&self, location: &Location, base: &BackupMeta) -> Result<chain::Chain> {
        if location.object.is_some() {
            return self.object.chain(location, base).await;
        }
        let dir = self.dir(location);
        let base = base.clone();
        tokio::task::spawn_blocking(move || chain::read(&dir, &base))
            .await
            .map_err(|e| Error::Tool(format!("reading the chain failed: {e}")))
    }

    async fn chain_on(
        &self,
        location: &Location,
        base: &BackupMeta,
        chain: chain::Chain,
    ) -> Result<chain::Chain> {
        if chain.base != base.name {
            return self.chain(location, base).await;
        }
        if location.object.is_some() {
            return self.object.chain_on(location, chain).await;
        }
        let dir = self.dir(location);
        tokio::task::spawn_blocking(move || chain::read_on(&dir, chain))
            .await
            .map_err(|e| Error::Tool(format!("reading the chain failed: {e}")))
    }

    async fn chain_next(
        &self,
        location: &Location,
        base: &BackupMeta,
        chain: chain::Chain,
    ) -> Result<chain::Chain> {
        if location.object.is_some() && chain.base == base.name {
            return self.object.chain_next(location, chain).await;
        }
        self.chain_on(location, base, chain).await
    }

    async fn append(&self, location: &Location, segment: &delta::Segment) -> Result<()> {
        if location.object.is_some() {
            return self.object.append(location, segment).await;
        }
        let dir = self.dir(location);
        let segment = segment.clone();
        tokio::task::spawn_blocking(move || chain::write(&dir, &segment).map(|_| ()))
            .await
            .map_err(|e| Error::Tool(format!("writing a segment failed: {e}")))?
    }

    async fn check_restorable(&self, location: &Location, backup: &str) -> Result<()> {
        if location.object.is_some() && !crate::names::is_snapshot_path(backup) {
            let (_, meta) = self.object.fetch_named(location, backup, false).await?;
            self.object.close(location, object_backups::RESTORING);
            return self.object.verify(location, &meta).await;
        }
        let (path, sha256) = self.locate(location, backup)?;
        tokio::task::spawn_blocking(move || check_file(&path, sha256.as_deref()))
            .await
            .map_err(|e| Error::Tool(format!("the check failed: {e}")))?
            .map(|_| ())
    }

    /// Copies the snapshot to `STATE/clusters/CLUSTER/restore.db`, then
    /// checks the copy ([`LocalBackups::set_aside`]).
    async fn open_for_restore(&self, location: &Location, backup: &str) -> Result<RestoreSource> {
        if location.object.is_some() && !crate::names::is_snapshot_path(backup) {
            return Ok(self.object_restore(location, backup, false).await?.source);
        }
        let (found, sha256) = self.locate(location, backup)?;
        self.set_aside(location, &found, sha256.as_deref()).await
    }

    /// With segments, the base is restored into a scratch member, the
    /// segments replayed and its snapshot set aside ([`super::merge`]);
    /// when that fails, the base alone is set aside and the failure said.
    async fn open_chain_for_restore(
        &self,
        location: &Location,
        base: &BackupMeta,
    ) -> Result<ChainRestore> {
        if location.object.is_some() {
            return self.object_restore(location, &base.name, true).await;
        }
        self.chain_restore(location, self.dir(location), base).await
    }

    /// A backup found by name (in the cluster's folder or another
    /// cluster's default one) is restored with its chain, as for a
    /// rebuild; a snapshot file named by its path is set aside as it is.
    async fn open_named_for_restore(
        &self,
        location: &Location,
        backup: &str,
    ) -> Result<ChainRestore> {
        if location.object.is_some() && !crate::names::is_snapshot_path(backup) {
            return self.object_restore(location, backup, true).await;
        }
        match self.find(location, backup)? {
            Some((dir, meta)) => self.chain_restore(location, dir, &meta).await,
            None => Ok(ChainRestore {
                source: self.open_for_restore(location, backup).await?,
                replayed: Replayed::default(),
                problem: None,
            }),
        }
    }

    /// Deletes the copy, and only a copy this store made: the source comes
    /// from the cluster's record, a file on disk that may have been edited.
    async fn close_restore(&self, source: &RestoreSource) {
        let path = std::path::Path::new(source.as_str());
        let cluster = path
            .parent()
            .and_then(|d| d.file_name())
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let clusters = self.clusters_dir();
        match safe_path::cluster_path(&clusters, cluster, &[RESTORE_FILE]) {
            Ok(own) if own == path => {
                let _ = safe_path::remove_file(&clusters, cluster, &[RESTORE_FILE]);
            }
            _ => tracing::warn!(
                "not deleting {}: not a snapshot this operator set aside",
                path.display()
            ),
        }
    }

    /// Restores into `STATE/clusters/CLUSTER/restore-check/`
    /// ([`super::restore_check`]) and records the result in the backup's
    /// meta, unless retention deleted the backup meanwhile.
    async fn restore_check(
        &self,
        location: &Location,
        backup: &BackupMeta,
        live: Source<'_>,
    ) -> Result<crate::backup::proof::RestoreCheck> {
        if location.object.is_some() {
            let snapshot = self
                .object
                .fetch(location, backup, object_backups::CHECKING)
                .await?;
            let check = super::restore_check::check(
                &self.state_dir,
                &self.binaries,
                backup,
                &snapshot,
                live,
            )
            .await;
            self.object.close(location, object_backups::CHECKING);
            let check = check?;
            let mut meta = backup.clone();
            meta.restore_check = Some(check.clone());
            self.object.record_check(location, &meta).await?;
            return Ok(check);
        }
        let dir = self.dir(location);
        let snapshot = backup.path(&dir);
        let check =
            super::restore_check::check(&self.state_dir, &self.binaries, backup, &snapshot, live)
                .await?;
        if snapshot.is_file() {
            let mut meta = backup.clone();
            meta.restore_check = Some(check.clone());
            backup::write_meta(&dir, &meta)?;
        }
        Ok(check)
    }

    /// Each file is hashed once: the answer is kept by path, size and
    /// modification time, so a long wait without quorum does not re-read
    /// the backups every pass.
    async fn any_good(&self, location: &Location) -> bool {
        if location.object.is_some() {
            for meta in self.object.list(location).await.unwrap_or_default() {
                if self.object.verify(location, &meta).await.is_ok() {
                    return true;
                }
            }
            return false;
        }
        let dir = self.dir(location);
        let Ok(metas) = own_list(&dir, location) else {
            return false;
        };
        for meta in metas {
            let path = meta.path(&dir);
            let Ok(stat) = std::fs::metadata(&path) else {
                continue;
            };
            let key = (stat.len(), stat.modified().ok());
            let known = self.remembered(&path, key);
            let good = match known {
                Some(good) => good,
                None => {
                    let good = self.verify(location, &meta).await.is_ok();
                    let mut checked = self.checked.lock().unwrap_or_else(|e| e.into_inner());
                    checked.insert(path, (key, good));
                    good
                }
            };
            if good {
                return true;
            }
        }
        false
    }
}

/// The backups of `location`'s cluster in `dir`.
/// The backups of `location`'s owner in `dir` ([`Location::owns`]: the
/// cluster's own, or for another cluster's backups, any of that cluster's).
fn own_list(dir: &std::path::Path, location: &Location) -> Result<Vec<BackupMeta>> {
    let mut all = backup::list(dir)?;
    all.retain(|m| location.owns(m));
    Ok(all)
}

#[cfg(test)]
#[path = "backups_tests.rs"]
mod tests;

#[path = "backups_restore.rs"]
mod restore;
