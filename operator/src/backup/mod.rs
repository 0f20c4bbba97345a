//! Backups: etcd snapshots taken through the maintenance API, verified,
//! kept on a policy ("every 30 minutes, keep the last 3"), and restored into
//! new clusters or after a quorum loss. The controller reaches them through
//! a [`BackupStore`] ([`store`]), which each platform provides.
//!
//! The local store's format is here: a backup is two files in the backup
//! folder, `NAME.db`, the snapshot as etcd streams it (the database followed
//! by the SHA-256 of the database), and `NAME.json`, its [`BackupMeta`]. A
//! snapshot is streamed to a hidden temporary file, fsynced and renamed into
//! place; only then is the meta written, so a `NAME.db` without a
//! `NAME.json` is never trusted (a sweep deletes such a file of its own
//! cluster once it is older than [`ORPHAN_AGE`]: a save that was cut off).
//! Which files are a cluster's is said in [`owner`].

pub mod chain;
pub mod delta;
pub mod follow;
pub mod job;
pub mod object;
pub mod owner;
pub mod point;
pub mod proof;
pub mod proof_schedule;
pub mod replay;
pub mod schedule;
pub mod snapshot;
pub mod source;
pub mod store;
pub mod task;
pub mod tools;

pub use self::owner::{name_prefix, owned, owned_file, sharer};
pub use self::store::{BackupStore, ChainRestore, Location, RestoreSource, Source};

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::platform::local::layout::{read_json, write_json};

/// A member backups may be taken from: (name, client URL, the client
/// certificate for an `https://` URL).
pub type Candidate = (String, String, Option<crate::tls::ClientTls>);

/// Result of backup operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong with a backup.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: io::Error,
    },
    /// etcd failed to send the snapshot.
    #[error("snapshot from {member} ({url}) failed: {message}")]
    Snapshot {
        /// Member asked.
        member: String,
        /// Its client URL.
        url: String,
        /// The cause.
        message: String,
    },
    /// The written file is not a good snapshot.
    #[error("{path}: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// An etcd tool (etcdutl / etcdctl) failed or is missing.
    #[error("{0}")]
    Tool(String),
    /// No backup by that name.
    #[error("no backup {name:?} in {dir} (backups there: {known})")]
    NotFound {
        /// The name asked for.
        name: String,
        /// Where it was looked for.
        dir: String,
        /// What exists.
        known: String,
    },
    /// No member to take a backup from.
    #[error("no ready member to take a backup from")]
    NoMember,
    /// The platform keeps no backups (yet).
    #[error("{0}")]
    Unsupported(String),
    /// Too little free space for a backup (the free-space floor).
    #[error("{0}")]
    LowSpace(String),
    /// The backup folder cannot be written (a read-only file system, no
    /// permission).
    #[error("{0}")]
    Unwritable(String),
    /// A backup Job (Kubernetes) failed, or said why it could not do its
    /// work.
    #[error("{0}")]
    Job(String),
    /// The object store refused or could not be reached (the message
    /// never holds a credential: [`object::client::scrub_with`]).
    #[error("{0}")]
    Store(String),
    /// A point-in-time restore asked for a point the backup and its chain
    /// do not hold.
    #[error("{0}")]
    Point(String),
}

impl Error {
    /// A short label for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Io { .. } => "io",
            Error::Snapshot { .. } => "snapshot",
            Error::Corrupt { .. } => "corrupt",
            Error::Tool(_) => "tool",
            Error::NotFound { .. } => "not_found",
            Error::NoMember => "no_member",
            Error::Unsupported(_) => "unsupported",
            Error::LowSpace(_) => "low_space",
            Error::Unwritable(_) => "unwritable",
            Error::Store(_) => "store",
            Error::Point(_) => "point_in_time",
            Error::Job(_) => "job",
        }
    }
}

pub(crate) fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// What is known about one backup.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupMeta {
    /// Backup name (the file is `NAME.db`).
    pub name: String,
    /// Cluster it was taken from.
    pub cluster: String,
    /// The uid of the cluster it was taken from ([`owned`]): none in
    /// backups written before backups carried their cluster's identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// When it was taken (RFC 3339, UTC).
    pub time: String,
    /// The same instant in milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// etcd revision the snapshot holds.
    pub revision: i64,
    /// Keys in the snapshot (as `snapshot status` counts them).
    pub total_keys: i64,
    /// Size of `NAME.db` in bytes.
    pub size: u64,
    /// SHA-256 of `NAME.db`, hex.
    pub sha256: String,
    /// etcd version of the member it came from.
    pub etcd_version: String,
    /// Member it came from.
    pub member: String,
    /// What verified it: the integrity check and each tool's agreement.
    pub verified_by: Vec<String>,
    /// The last restore check of it ([`proof`]), if one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_check: Option<proof::RestoreCheck>,
}

impl BackupMeta {
    /// The snapshot file in `dir`.
    pub fn path(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.db", self.name))
    }
}

/// The backup folder of a cluster: the spec's `location.path` (relative
/// paths are taken from the state folder), else `STATE/backups/CLUSTER`.
pub fn backup_dir(state_dir: &Path, cluster: &str, path: Option<&Path>) -> PathBuf {
    match path {
        Some(p) if p.is_absolute() => p.to_path_buf(),
        Some(p) => state_dir.join(p),
        None => state_dir.join("backups").join(cluster),
    }
}

/// Every backup in `dir` that has its meta, newest first.
pub fn list(dir: &Path) -> Result<Vec<BackupMeta>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(format!("cannot list {}", dir.display()))(e)),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        // A meta names its own file (`NAME.json`): a name that is anything
        // else (`../x`, a path) is not trusted, as retention deletes by it.
        let stem = path.file_stem().and_then(|s| s.to_str());
        if let Ok(Some(meta)) = read_json::<BackupMeta>(&path)
            && stem == Some(meta.name.as_str())
            && meta.path(dir).is_file()
        {
            out.push(meta);
        }
    }
    out.sort_by(|a, b| b.unix_ms.cmp(&a.unix_ms).then(b.name.cmp(&a.name)));
    Ok(out)
}

/// Every backup in `dir` of the cluster `cluster` with `uid` that has its
/// meta ([`owned`]), newest first.
pub fn list_own(dir: &Path, cluster: &str, uid: Option<&str>) -> Result<Vec<BackupMeta>> {
    let mut all = list(dir)?;
    all.retain(|m| owned(m, cluster, uid));
    Ok(all)
}

/// Checks a snapshot file: its trailing SHA-256 matches its database, and,
/// when `expected` is given, the whole file's SHA-256 matches it. Returns
/// the whole file's SHA-256 (hex).
pub fn check_file(path: &Path, expected: Option<&str>) -> Result<String> {
    check_file_until(path, expected, &|| false)
}

/// [`check_file`] that gives up (with an error) as soon as `stop` says so,
/// for checks that must not outlive their caller.
pub fn check_file_until(
    path: &Path,
    expected: Option<&str>,
    stop: &dyn Fn() -> bool,
) -> Result<String> {
    let corrupt = |message: String| Error::Corrupt {
        path: path.to_path_buf(),
        message,
    };
    let mut file =
        std::fs::File::open(path).map_err(io_err(format!("cannot open {}", path.display())))?;
    let len = file
        .metadata()
        .map_err(io_err(format!("cannot stat {}", path.display())))?
        .len();
    if len <= 32 {
        return Err(corrupt(format!(
            "{len} bytes is too short for an etcd snapshot"
        )));
    }
    let body_len = len - 32;
    let (mut whole, mut body) = (Sha256::new(), Sha256::new());
    let mut trailer = Vec::with_capacity(32);
    let mut seen: u64 = 0;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        if stop() {
            return Err(Error::Tool(format!(
                "the check of {} was stopped",
                path.display()
            )));
        }
        let n = file
            .read(&mut buf)
            .map_err(io_err(format!("cannot read {}", path.display())))?;
        if n == 0 {
            break;
        }
        let chunk = &buf[..n];
        whole.update(chunk);
        let in_body = usize::try_from(body_len.saturating_sub(seen))
            .unwrap_or(usize::MAX)
            .min(n);
        body.update(&chunk[..in_body]);
        trailer.extend_from_slice(&chunk[in_body..]);
        seen += n as u64;
    }
    if seen != len {
        return Err(corrupt(format!(
            "size changed while reading ({len} -> {seen} bytes)"
        )));
    }
    if body.finalize().as_slice() != trailer.as_slice() {
        return Err(corrupt(
            "its SHA-256 trailer does not match its content: the file is damaged or not an etcd snapshot".into(),
        ));
    }
    let hex = to_hex(&whole.finalize());
    if let Some(want) = expected
        && want != hex
    {
        return Err(corrupt(format!(
            "SHA-256 {hex} differs from the recorded {want}"
        )));
    }
    Ok(hex)
}

/// Finds a backup by name in any of `dirs`, or takes `name` as a path
/// (relative to `base`, the state folder). Either way the file must check
/// out as a snapshot.
pub fn resolve(name: &str, dirs: &[PathBuf], base: &Path) -> Result<PathBuf> {
    let (path, sha256) = locate(name, dirs, base)?;
    check_file(&path, sha256.as_deref())?;
    Ok(path)
}

/// Where backup `name` (or the snapshot file at path `name`, relative to
/// `base`) is, and the SHA-256 its meta records; nothing is read but the
/// metas, and a path is judged by `stat` ([`source::check`]).
pub fn locate(name: &str, dirs: &[PathBuf], base: &Path) -> Result<(PathBuf, Option<String>)> {
    if crate::names::is_snapshot_path(name) {
        let path = source::resolve_path(name, base);
        source::check(name, &path)?;
        return Ok((path, None));
    }
    let mut known = Vec::new();
    for dir in dirs {
        for meta in list(dir)? {
            if meta.name == name {
                return Ok((meta.path(dir), Some(meta.sha256)));
            }
            known.push(meta.name);
        }
    }
    Err(Error::NotFound {
        name: name.into(),
        dir: dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        known: if known.is_empty() {
            "none".into()
        } else {
            known.join(", ")
        },
    })
}

/// How long a file a save of this cluster left behind (a temporary file,
/// a snapshot without its meta) may sit untouched before a sweep deletes
/// it: longer than any save takes between two writes to it.
pub const ORPHAN_AGE: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// What retention did ([`BackupStore::retain`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retained {
    /// Backups deleted, newest first.
    pub deleted: Vec<String>,
    /// Backups kept that check out.
    pub good: Vec<String>,
    /// Backups kept that do not check out (newer than the oldest good one
    /// kept; listed as damaged until they age out).
    pub damaged: Vec<String>,
}

/// Whether `path` is a backup's meta (`NAME.json` naming itself `NAME`)
/// of the cluster `cluster` with `uid` whose snapshot `NAME.db` is gone. A
/// meta is written only after its snapshot is in place, and deleted after
/// it, so only a hand can make one.
pub fn orphan_meta(dir: &Path, path: &Path, cluster: &str, uid: Option<&str>) -> bool {
    if path.extension().and_then(|e| e.to_str()) != Some("json") {
        return false;
    }
    let Ok(Some(meta)) = read_json::<BackupMeta>(path) else {
        return false;
    };
    let stem = path.file_stem().and_then(|s| s.to_str());
    stem == Some(meta.name.as_str()) && owned(&meta, cluster, uid) && !meta.path(dir).exists()
}

/// Writes a backup's meta beside its snapshot.
pub fn write_meta(dir: &Path, meta: &BackupMeta) -> Result<()> {
    let path = dir.join(format!("{}.json", meta.name));
    write_json(&path, meta).map_err(io_err(format!("cannot write {}", path.display())))
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fake snapshot: content plus its SHA-256, as etcd sends it.
    pub(crate) fn fake_snapshot(path: &Path, content: &[u8]) {
        let mut data = content.to_vec();
        data.extend_from_slice(&Sha256::digest(content));
        std::fs::write(path, data).expect("write");
    }

    /// The meta of a backup of `demo` named `name`.
    pub(crate) fn meta(name: &str, unix_ms: u64, sha256: String) -> BackupMeta {
        BackupMeta {
            name: name.into(),
            cluster: "demo".into(),
            uid: None,
            time: String::new(),
            unix_ms,
            revision: 1,
            total_keys: 1,
            size: 0,
            sha256,
            etcd_version: "3.4.23".into(),
            member: "demo-0".into(),
            verified_by: vec![],
            restore_check: None,
        }
    }

    #[test]
    fn integrity_check_catches_damage() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("a.db");
        fake_snapshot(&p, &vec![7u8; 3 << 20]);
        let sha = check_file(&p, None).expect("good");
        check_file(&p, Some(&sha)).expect("matches");
        let mut bytes = std::fs::read(&p).expect("read");
        bytes[1000] ^= 1;
        std::fs::write(&p, &bytes).expect("write");
        let e = check_file(&p, None).expect_err("damaged");
        assert!(e.to_string().contains("trailer"), "{e}");
        std::fs::write(&p, b"not a snapshot at all, just some text here").expect("write");
        assert!(check_file(&p, None).is_err());
    }

    /// A meta whose name is not its own file's could make retention delete
    /// anything: it is not listed.
    #[test]
    fn a_meta_naming_another_file_is_not_listed() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("backups");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let outside = root.path().join("precious.db");
        fake_snapshot(&outside, b"keep me");
        let sha = check_file(&outside, None).expect("good");
        write_meta(&dir, &meta("../precious", 1, sha.clone())).expect("meta");
        std::fs::rename(dir.join("../precious.json"), dir.join("evil.json")).expect("mv");
        fake_snapshot(&dir.join("b1.db"), b"fine");
        let good = check_file(&dir.join("b1.db"), None).expect("good");
        write_meta(&dir, &meta("b1", 2, good)).expect("meta");
        let names: Vec<String> = list(&dir)
            .expect("list")
            .into_iter()
            .map(|m| m.name)
            .collect();
        assert_eq!(names, ["b1"]);
    }
}
