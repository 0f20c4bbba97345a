//! Checking restore sources off the local controller's main loop.
//!
//! A cluster created from a backup (`spec.restore.backup`) is created only
//! once its snapshot checks out like a backup: its SHA-256 trailer matches
//! its content (and its meta's SHA-256, for a named backup), and
//! `etcdutl`/`etcdctl snapshot status` open it and agree. Hashing a large
//! file takes seconds, so it runs in a task of its own, once per version
//! of the file (path, size, modification time, inode): the folder rescan
//! only looks up the verdict, and member exits of every other cluster are
//! handled while it runs. A finished check wakes the controller.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use tokio::sync::mpsc;

use crate::backup::{self, Location};
use crate::platform::local::backups::LocalBackups;
use crate::platform::local::binaries::Binaries;

/// One version of a file: a check of it stays valid while these match.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileVersion {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl FileVersion {
    fn of(path: &Path) -> std::io::Result<Self> {
        let m = std::fs::metadata(path)?;
        Ok(FileVersion {
            path: path.to_path_buf(),
            len: m.len(),
            modified: m.modified().ok(),
            inode: m.ino(),
        })
    }
}

/// What is known about a restore source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It checks out: the cluster may be created from it.
    Good,
    /// It does not (why, naming the file).
    Bad(String),
    /// Its check runs; nothing is created until it is done.
    Checking(String),
}

#[derive(Debug)]
struct Entry {
    version: FileVersion,
    /// `None` while the check runs.
    result: Option<Result<(), String>>,
    stop: Arc<AtomicBool>,
    /// When the check ended (object stores: a refusal is retried).
    done: Option<Instant>,
}

/// How long a refusal of a backup in an object store stands before it is
/// checked again (the store may have been down or slow).
const OBJECT_RETRY: std::time::Duration = std::time::Duration::from_secs(30);

/// The checks of restore sources, by cluster and source.
#[derive(Debug)]
pub struct RestoreChecks {
    entries: Arc<Mutex<HashMap<(String, String), Entry>>>,
    binaries: Arc<Binaries>,
    done: mpsc::UnboundedSender<()>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RestoreChecks {
    /// Checks with these tools; `done` gets a message when a check ends.
    pub fn new(binaries: Arc<Binaries>, done: mpsc::UnboundedSender<()>) -> Self {
        RestoreChecks {
            entries: Arc::default(),
            binaries,
            done,
        }
    }

    /// The verdict on `source` (a backup name, or a path) for `cluster`,
    /// starting a check when this version of the file has none. Only cheap
    /// work here: finding the file and its metadata.
    pub fn verdict(
        &self,
        cluster: &str,
        source: &str,
        store: &Arc<LocalBackups>,
        location: &Location,
    ) -> Verdict {
        if location.object.is_some() && !crate::names::is_snapshot_path(source) {
            return self.object_verdict(cluster, source, store, location);
        }
        let (path, sha256) = match store.locate(location, source) {
            Ok(found) => found,
            Err(e) => return Verdict::Bad(e.to_string()),
        };
        let version = match FileVersion::of(&path) {
            Ok(v) => v,
            Err(e) => return Verdict::Bad(format!("cannot read {}: {e}", path.display())),
        };
        let key = (cluster.to_string(), source.to_string());
        let mut entries = lock(&self.entries);
        if let Some(e) = entries.get(&key)
            && e.version == version
        {
            return match &e.result {
                Some(Ok(())) => Verdict::Good,
                Some(Err(m)) => Verdict::Bad(m.clone()),
                None => checking(&path),
            };
        }
        if let Some(old) = entries.get(&key) {
            old.stop.store(true, Ordering::Relaxed);
        }
        let stop = Arc::new(AtomicBool::new(false));
        entries.insert(
            key.clone(),
            Entry {
                version: version.clone(),
                result: None,
                stop: stop.clone(),
                done: None,
            },
        );
        drop(entries);
        tracing::info!(%cluster, file = %path.display(), "checking the restore source");
        let verdict = checking(&path);
        let (all, binaries, done) = (
            self.entries.clone(),
            self.binaries.clone(),
            self.done.clone(),
        );
        tokio::spawn(async move {
            let result = check(&path, sha256, &binaries, stop.clone()).await;
            if let Err(e) = &result {
                tracing::warn!(cluster = %key.0, "restore source refused: {e}");
            }
            let mut entries = lock(&all);
            if let Some(e) = entries.get_mut(&key)
                && e.version == version
                && Arc::ptr_eq(&e.stop, &stop)
            {
                e.result = Some(result);
            }
            drop(entries);
            let _ = done.send(());
        });
        verdict
    }

    /// [`RestoreChecks::verdict`] for a backup in an object store: the
    /// store downloads and checks it ([`crate::backup::BackupStore::check_restorable`])
    /// in a task; a refusal (the store may have been down) is checked
    /// again after [`OBJECT_RETRY`].
    fn object_verdict(
        &self,
        cluster: &str,
        source: &str,
        store: &Arc<LocalBackups>,
        location: &Location,
    ) -> Verdict {
        use crate::backup::BackupStore as _;
        let place = location
            .object
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        let version = FileVersion {
            path: PathBuf::from(format!("{place}/{}/{source}", location.owner())),
            len: 0,
            modified: None,
            inode: 0,
        };
        let key = (cluster.to_string(), source.to_string());
        let checking = Verdict::Checking(format!(
            "downloading and checking backup {source} from {place} (its SHA-256, then \
             etcdutl/etcdctl snapshot status); nothing is created until it checks out"
        ));
        let mut entries = lock(&self.entries);
        if let Some(e) = entries.get(&key)
            && e.version == version
        {
            match &e.result {
                Some(Ok(())) => return Verdict::Good,
                Some(Err(m)) if e.done.is_none_or(|t| t.elapsed() < OBJECT_RETRY) => {
                    return Verdict::Bad(m.clone());
                }
                None => return checking,
                Some(Err(_)) => {}
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        entries.insert(
            key.clone(),
            Entry {
                version: version.clone(),
                result: None,
                stop: stop.clone(),
                done: None,
            },
        );
        drop(entries);
        tracing::info!(%cluster, source, %place, "checking the restore source in the object store");
        let (all, done, store, location) = (
            self.entries.clone(),
            self.done.clone(),
            Arc::clone(store),
            location.clone(),
        );
        let source = source.to_string();
        tokio::spawn(async move {
            let result = store
                .check_restorable(&location, &source)
                .await
                .map_err(|e| e.to_string());
            if let Err(e) = &result {
                tracing::warn!(cluster = %key.0, "restore source refused: {e}");
            }
            let mut entries = lock(&all);
            if let Some(e) = entries.get_mut(&key)
                && Arc::ptr_eq(&e.stop, &stop)
            {
                e.result = Some(result);
                e.done = Some(Instant::now());
            }
            drop(entries);
            let _ = done.send(());
        });
        checking
    }

    /// Forgets the checks of clusters not in `keep` (stopping those that
    /// run).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        lock(&self.entries).retain(|(cluster, _), e| {
            let kept = keep(cluster);
            if !kept {
                e.stop.store(true, Ordering::Relaxed);
            }
            kept
        });
    }
}

impl Drop for RestoreChecks {
    /// Running checks stop (an operator that shuts down does not wait for
    /// a hash of a large file).
    fn drop(&mut self) {
        for e in lock(&self.entries).values() {
            e.stop.store(true, Ordering::Relaxed);
        }
    }
}

fn checking(path: &Path) -> Verdict {
    Verdict::Checking(format!(
        "checking the snapshot {} (its SHA-256, then etcdutl/etcdctl snapshot status); nothing \
         is created until it checks out",
        path.display()
    ))
}

/// The whole check: integrity (off the runtime, stoppable), then the tools.
async fn check(
    path: &Path,
    sha256: Option<String>,
    binaries: &Binaries,
    stop: Arc<AtomicBool>,
) -> Result<(), String> {
    let file = path.to_path_buf();
    let hashed = tokio::task::spawn_blocking(move || {
        backup::check_file_until(&file, sha256.as_deref(), &|| stop.load(Ordering::Relaxed))
    })
    .await
    .map_err(|e| format!("the check of {} failed: {e}", path.display()))?;
    hashed.map_err(|e| e.to_string())?;
    backup::tools::verify(binaries, path)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}
