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
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::platform::local::binaries::Binaries;

    fn platform() -> (tempfile::TempDir, LocalPlatform) {
        let dir = tempfile::tempdir().expect("tempdir");
        let (events, _rx) = tokio::sync::mpsc::unbounded_channel();
        let binaries = Arc::new(Binaries::new(vec![]));
        let p = LocalPlatform::open(dir.path().join("state"), binaries, events).expect("open");
        (dir, p)
    }

    fn member(name: &str) -> MemberRecord {
        serde_json::from_value(serde_json::json!({
            "addr": {
                "name": name,
                "peerUrl": "http://127.31.4.7:2380",
                "clientUrl": "http://127.31.4.7:2379"
            },
            "ip": "127.31.4.7",
            "version": "3.4.23",
            "bootstrap": true,
            "initialCluster": format!("{name}=http://127.31.4.7:2380"),
            "initialState": "new",
            "token": "t"
        }))
        .expect("a record")
    }

    /// A walk is kept only while what it walked stands: after the platform
    /// deleted a member, a symlink planted in its place is refused.
    #[test]
    fn a_symlink_planted_after_a_delete_is_refused() {
        let (dir, p) = platform();
        p.save_member("demo", &member("demo-0")).expect("saved");
        let parts = ["members", "demo-0"];
        let path = p.path("demo", &parts).expect("a plain folder");
        assert!(p.kept.walked(&path), "walked whole, kept");
        p.remove_dir("demo", &parts).expect("deleted");
        assert!(!p.kept.walked(&path), "forgotten with the folder");
        let outside = dir.path().join("precious");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::os::unix::fs::symlink(&outside, &path).expect("symlink");
        let e = p.path("demo", &parts).expect_err("through a symlink");
        assert!(e.to_string().contains("symlink"), "{e}");
        assert!(p.path("demo", &["members", "demo-0", "data"]).is_err());
        assert!(outside.is_dir());
    }

    /// A symlink there before the first use is refused, and never kept.
    #[test]
    fn a_symlink_there_before_the_first_use_is_refused() {
        let (dir, p) = platform();
        let members = p.layout.cluster_dir("demo").join("members");
        std::fs::create_dir_all(&members).expect("mkdir");
        std::os::unix::fs::symlink(dir.path(), members.join("demo-0")).expect("symlink");
        for _ in 0..2 {
            assert!(p.path("demo", &["members", "demo-0"]).is_err());
            assert!(p.record("demo", "demo-0").is_err());
        }
        assert!(!p.kept.walked(&members.join("demo-0")));
    }

    /// A kept walk never stands in for the name checks: a name that
    /// reaches into another cluster's folder is refused even when that
    /// folder was walked.
    #[test]
    fn names_are_checked_even_for_a_walked_path() {
        let (_dir, p) = platform();
        p.save_member("victim", &member("victim-0")).expect("saved");
        p.path("victim", &["members", "victim-0"]).expect("walked");
        assert!(p.path("victim/members/victim-0", &[]).is_err());
        assert!(p.path("victim", &["members/victim-0"]).is_err());
        assert!(p.record("victim/members", "victim-0").is_err());
        assert!(p.record("victim", "../victim").is_err());
    }

    /// Records are read once and kept; what the platform writes is what
    /// it hands out after; a failed write makes it read the file again.
    #[test]
    fn records_are_kept_until_written_or_deleted() {
        let (_dir, p) = platform();
        assert!(p.record("demo", "demo-0").is_err(), "no member yet");
        let mut r = member("demo-0");
        p.save_member("demo", &r).expect("saved");
        // Read once from the file by a new platform on the same folder
        // would see the same; this one does not read it again.
        let file = p.layout.member_record("demo", "demo-0");
        std::fs::write(&file, "not json").expect("overwrite");
        assert_eq!(p.record("demo", "demo-0").expect("kept"), r);
        r.started_at = Some("2026-12-04T10:00:00.000Z".into());
        p.save_member("demo", &r).expect("saved");
        assert_eq!(p.record("demo", "demo-0").expect("kept"), r);
        // A write that fails (a file where the folder should be) forgets
        // the record: the file decides again.
        let dir = p.layout.member_dir("demo", "demo-0");
        std::fs::remove_dir_all(&dir).expect("rm");
        std::fs::write(&dir, "a file").expect("a file in the way");
        assert!(p.save_member("demo", &r).is_err());
        assert!(
            p.record("demo", "demo-0").is_err(),
            "read again, and unreadable"
        );
        std::fs::remove_file(&dir).expect("rm");
        // Cluster records: absent, written, kept; gone with the cluster.
        assert_eq!(p.cluster_record("demo").expect("readable"), None);
        let record = ClusterRecord {
            generation: 3,
            ..ClusterRecord::default()
        };
        p.write_cluster_record("demo", &record).expect("saved");
        std::fs::write(p.layout.record_path("demo"), "not json").expect("overwrite");
        assert_eq!(p.cluster_record("demo").expect("kept"), Some(record));
        p.remove_dir("demo", &[]).expect("deleted");
        p.kept.forget_cluster("demo", &p.layout.cluster_dir("demo"));
        assert_eq!(p.cluster_record("demo").expect("read again"), None);
    }

    /// The database file's stamp follows appends, a file renamed over it
    /// (etcd's defragmentation) and a wipe; the handle goes when the
    /// platform deletes the folder.
    #[test]
    fn db_stamps_follow_the_file_behind_the_name() {
        let (_dir, p) = platform();
        let snap = p.layout.data_dir("demo", "demo-0").join("member/snap");
        let db = snap.join("db");
        let stamp = || p.db_stamp("demo", "demo-0");
        assert_eq!(stamp(), None, "no file yet");
        std::fs::create_dir_all(&snap).expect("mkdir");
        std::fs::write(&db, vec![0u8; 100]).expect("write");
        assert_eq!(stamp().map(|s| s.0), Some(100));
        std::fs::write(&db, vec![0u8; 300]).expect("grow in place");
        assert_eq!(stamp().map(|s| s.0), Some(300));
        let tmp = snap.join("db.tmp");
        std::fs::write(&tmp, vec![0u8; 50]).expect("write");
        std::fs::rename(&tmp, &db).expect("rename over");
        assert_eq!(
            stamp().map(|s| s.0),
            Some(50),
            "the new file, not the old handle"
        );
        std::fs::remove_file(&db).expect("wipe");
        assert_eq!(stamp(), None);
        std::fs::write(&db, vec![0u8; 70]).expect("write");
        assert_eq!(stamp().map(|s| s.0), Some(70));
        // The folder moved aside by hand (the file keeps a name): the
        // path is followed within RECHECK_EVERY looks.
        let aside = snap.with_file_name("snap-aside");
        std::fs::rename(&snap, &aside).expect("move aside");
        std::fs::create_dir_all(&snap).expect("mkdir");
        std::fs::write(&db, vec![0u8; 90]).expect("write");
        let looks: Vec<Option<u64>> = (0..RECHECK_EVERY).map(|_| stamp().map(|s| s.0)).collect();
        assert_eq!(looks.first(), Some(&Some(70)), "the old file at first");
        assert_eq!(looks.last(), Some(&Some(90)), "{looks:?}");
        std::fs::remove_dir_all(&aside).expect("rm");
        let count = |p: &LocalPlatform| {
            p.kept
                .lock()
                .db_files
                .values()
                .map(HashMap::len)
                .sum::<usize>()
        };
        assert_eq!(count(&p), 1);
        p.remove_dir("demo", &["members", "demo-0"])
            .expect("deleted");
        assert_eq!(count(&p), 0, "no handle keeps a deleted file");
        // A symlink as the database file is not followed.
        std::fs::create_dir_all(&snap).expect("mkdir");
        let elsewhere = snap.join("elsewhere");
        std::fs::write(&elsewhere, vec![0u8; 10]).expect("write");
        std::os::unix::fs::symlink(&elsewhere, &db).expect("symlink");
        assert_eq!(stamp(), None);
    }
}
