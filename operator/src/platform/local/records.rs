//! What the local platform keeps in memory of its own records, so that an
//! idle pass reads no file.
//!
//! Every `member.json` and `cluster.json` under the state folder is
//! written by this operator alone (the state folder's lock keeps a second
//! one out), through [`super::LocalPlatform`]: a record read once, or
//! written, is kept and handed out until the platform writes or deletes
//! it. A write that fails forgets it (the file may hold the old record
//! or the new one), so the next read goes to the file. What etcd or
//! the user changes (a member's data folder, its process) is still
//! looked at every time.
//!
//! Paths: every path the platform builds is checked
//! ([`super::safe_path::cluster_path`]): the names and parts every time
//! (no file system call), and the walk for symlinks once, when every
//! folder on the way exists; a path is walked again after the platform
//! deleted or moved anything at or above it. Deletes themselves always
//! walk the path ([`super::safe_path::remove_dir_all`]).
//!
//! Database files: the looks for alarms between passes read the size and
//! time of a member's database file a few times a second
//! ([`LocalPlatform::db_stamp`]). The file is opened once (`O_PATH`: not
//! for reading, just a handle on it) and `fstat`ed after, without walking
//! its long path each time; a handle whose file lost its last name (etcd
//! replaced it, as a defragmentation does, or the data was wiped) is
//! dropped and the path opened again. A file moved aside with its folder
//! keeps its name, so every [`RECHECK_EVERY`] looks the path is looked
//! up again and the handle kept only while it still names the same file.
//! Handles under anything the platform deletes or moves are dropped with
//! it, so none keeps a deleted file.

use std::collections::{HashMap, HashSet};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use rustix::fs::{Mode, OFlags};

use super::LocalPlatform;
use super::layout::{MemberRecord, read_json, write_json};
use super::safe_path;
use crate::platform::{ClusterRecord, Error, Result, io_err};

/// Every this many looks through a kept handle on a database file, its
/// path is looked up again (see the module's documentation): a folder
/// moved aside by hand is followed within about 4 s of 250 ms looks.
pub(super) const RECHECK_EVERY: u32 = 16;

/// A handle on a member's database file.
#[derive(Debug)]
struct DbHandle {
    path: PathBuf,
    fd: OwnedFd,
    /// Looks through it so far.
    looks: u32,
}

/// Records and checked paths kept by the local platform.
#[derive(Debug, Default)]
pub(super) struct Kept {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Member records, by cluster, then member.
    members: HashMap<String, HashMap<String, MemberRecord>>,
    /// Cluster records (`None`: the cluster has none yet).
    clusters: HashMap<String, Option<ClusterRecord>>,
    /// Paths walked whole (every folder on the way existed) and found
    /// free of symlinks.
    walked: HashSet<PathBuf>,
    /// Handles on members' database files, by cluster, then member, with
    /// their paths.
    db_files: HashMap<String, HashMap<String, DbHandle>>,
}

impl Kept {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A member's record, if kept.
    pub(super) fn member(&self, cluster: &str, member: &str) -> Option<MemberRecord> {
        self.lock().members.get(cluster)?.get(member).cloned()
    }

    /// Keeps a member's record (read from, or written to, its file).
    pub(super) fn keep_member(&self, cluster: &str, record: &MemberRecord) {
        // Kept as the file says it: `fresh_restore` is never recorded (it
        // holds for the first start after a restore only).
        let mut kept = record.clone();
        kept.config.fresh_restore = false;
        self.lock()
            .members
            .entry(cluster.to_string())
            .or_default()
            .insert(kept.config.addr.name.clone(), kept);
    }

    /// Forgets a member's record (deleted, or a write that failed).
    pub(super) fn forget_member(&self, cluster: &str, member: &str) {
        if let Some(m) = self.lock().members.get_mut(cluster) {
            m.remove(member);
        }
    }

    /// A cluster's record, if kept (`Some(None)`: it has none).
    pub(super) fn cluster(&self, cluster: &str) -> Option<Option<ClusterRecord>> {
        self.lock().clusters.get(cluster).cloned()
    }

    /// Keeps a cluster's record (read from, or written to, its file).
    pub(super) fn keep_cluster(&self, cluster: &str, record: Option<ClusterRecord>) {
        self.lock().clusters.insert(cluster.to_string(), record);
    }

    /// Forgets a cluster's record (a write that failed).
    pub(super) fn forget_cluster_record(&self, cluster: &str) {
        self.lock().clusters.remove(cluster);
    }

    /// Forgets everything about a cluster whose folder `dir` was deleted.
    pub(super) fn forget_cluster(&self, cluster: &str, dir: &Path) {
        let mut inner = self.lock();
        inner.members.remove(cluster);
        inner.clusters.remove(cluster);
        inner.walked.retain(|p| !p.starts_with(dir));
        inner.db_files.remove(cluster);
    }

    /// Whether `path` was walked whole and found free of symlinks.
    pub(super) fn walked(&self, path: &Path) -> bool {
        self.lock().walked.contains(path)
    }

    /// Notes that `path` was walked whole and found free of symlinks.
    pub(super) fn keep_walked(&self, path: &Path) {
        self.lock().walked.insert(path.to_path_buf());
    }

    /// Forgets the walks of `path` and everything below it, and drops the
    /// handles on files there (deleted or moved by the platform: what
    /// takes its place is walked again).
    pub(super) fn forget_walks_under(&self, path: &Path) {
        let mut inner = self.lock();
        inner.walked.retain(|p| !p.starts_with(path));
        for files in inner.db_files.values_mut() {
            files.retain(|_, h| !h.path.starts_with(path));
        }
    }

    /// The size and modification time of the database file of `member`
    /// of `cluster`, at `db`, through a handle kept on it (see the module's
    /// documentation); `None` when there is no such file.
    pub(super) fn db_stamp(
        &self,
        cluster: &str,
        member: &str,
        db: impl FnOnce() -> PathBuf,
    ) -> Option<(u64, SystemTime)> {
        let mut inner = self.lock();
        if let Some(files) = inner.db_files.get_mut(cluster)
            && let Some(h) = files.get_mut(member)
        {
            h.looks = h.looks.wrapping_add(1);
            match rustix::fs::fstat(&h.fd) {
                Ok(st)
                    if st.st_nlink > 0 && (h.looks % RECHECK_EVERY != 0 || names(&h.path, &st)) =>
                {
                    return Some(stamp(&st));
                }
                // Replaced, deleted or moved away: open the path again.
                _ => {
                    files.remove(member);
                }
            }
        }
        let db = db();
        let fd = rustix::fs::open(
            &db,
            OFlags::PATH | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        )
        .ok()?;
        let st = rustix::fs::fstat(&fd).ok()?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
            return None;
        }
        inner
            .db_files
            .entry(cluster.to_string())
            .or_default()
            .insert(
                member.to_string(),
                DbHandle {
                    path: db,
                    fd,
                    looks: 0,
                },
            );
        Some(stamp(&st))
    }
}

/// Whether `path` (not followed) is the file `st` describes.
fn names(path: &Path, st: &rustix::fs::Stat) -> bool {
    rustix::fs::lstat(path).is_ok_and(|p| p.st_dev == st.st_dev && p.st_ino == st.st_ino)
}

/// Size and modification time from a `stat`.
fn stamp(st: &rustix::fs::Stat) -> (u64, SystemTime) {
    let size = u64::try_from(st.st_size).unwrap_or(0);
    let secs = u64::try_from(st.st_mtime).unwrap_or(0);
    let nanos = u32::try_from(st.st_mtime_nsec).unwrap_or(0);
    (size, SystemTime::UNIX_EPOCH + Duration::new(secs, nanos))
}

impl LocalPlatform {
    /// `STATE/clusters/CLUSTER/PARTS...`, checked ([`safe_path::cluster_path`]):
    /// every path this platform creates or deletes is built here. The
    /// names are checked every time; the walk for symlinks only until it
    /// found everything on the way (see the module's documentation).
    pub(super) fn path(&self, cluster: &str, parts: &[&str]) -> Result<PathBuf> {
        let clusters = self.layout.clusters_dir();
        let refused = |e: safe_path::Error| io_err("unsafe path")(e.into_io());
        let path = safe_path::named(&clusters, cluster, parts).map_err(refused)?;
        if self.kept.walked(&path) {
            return Ok(path);
        }
        if safe_path::walk(&clusters, cluster, &path).map_err(refused)? {
            self.kept.keep_walked(&path);
        }
        Ok(path)
    }

    /// Deletes the folder `STATE/clusters/CLUSTER/PARTS...` (walked again
    /// whatever was kept: a delete never trusts an earlier look).
    pub(super) fn remove_dir(&self, cluster: &str, parts: &[&str]) -> Result<()> {
        let clusters = self.layout.clusters_dir();
        let gone = clusters.join(cluster).join(parts.join("/"));
        let result = safe_path::remove_dir_all(&clusters, cluster, parts)
            .map_err(io_err(format!("cannot delete {}", gone.display())));
        if safe_path::named(&clusters, cluster, parts).is_ok() {
            self.kept.forget_walks_under(&gone);
        }
        result
    }

    /// A member's record: kept in memory once read or written.
    pub(super) fn record(&self, cluster: &str, member: &str) -> Result<MemberRecord> {
        if let Some(r) = self.kept.member(cluster, member) {
            return Ok(r);
        }
        self.path(cluster, &["members", member])?;
        let record = self
            .layout
            .read_member(cluster, member)
            .map_err(|e| Error::Record {
                path: self.layout.member_record(cluster, member),
                message: e.to_string(),
            })?
            .ok_or_else(|| Error::NoMember {
                cluster: cluster.into(),
                member: member.into(),
            })?;
        // Only a record under the name it is filed under is kept.
        if record.config.addr.name == member {
            self.kept.keep_member(cluster, &record);
        }
        Ok(record)
    }

    /// Writes a member's record, and keeps it (forgets it when the write
    /// failed: the file holds the old record or the new one).
    pub(super) fn save_member(&self, cluster: &str, record: &MemberRecord) -> Result<()> {
        let name = &record.config.addr.name;
        let path = self.path(cluster, &["members", name, "member.json"])?;
        match write_json(&path, record) {
            Ok(()) => {
                self.kept.keep_member(cluster, record);
                Ok(())
            }
            Err(e) => {
                self.kept.forget_member(cluster, name);
                Err(io_err(format!("cannot write {}", path.display()))(e))
            }
        }
    }

    /// A cluster's record: kept in memory once read or written.
    pub(super) fn cluster_record(&self, cluster: &str) -> Result<Option<ClusterRecord>> {
        let path = self.path(cluster, &["cluster.json"])?;
        if let Some(r) = self.kept.cluster(cluster) {
            return Ok(r);
        }
        let record = read_json(&path).map_err(|e| Error::Record {
            path,
            message: e.to_string(),
        })?;
        self.kept.keep_cluster(cluster, record.clone());
        Ok(record)
    }

    /// Writes a cluster's record, and keeps it (forgets it when the write
    /// failed).
    pub(super) fn write_cluster_record(&self, cluster: &str, record: &ClusterRecord) -> Result<()> {
        let path = self.path(cluster, &["cluster.json"])?;
        match write_json(&path, record) {
            Ok(()) => {
                self.kept.keep_cluster(cluster, Some(record.clone()));
                Ok(())
            }
            Err(e) => {
                self.kept.forget_cluster_record(cluster);
                Err(io_err(format!("cannot write {}", path.display()))(e))
            }
        }
    }
}

#[cfg(test)]
mod tests;
