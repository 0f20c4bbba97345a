//! The state folder of the local platform, and the records in it.
//!
//! ```text
//! STATE/operator.lock                       held by the running operator
//! STATE/clusters/NAME/cluster.json          ClusterRecord
//! STATE/clusters/NAME/status.json           the EtcdCluster with its status
//! STATE/clusters/NAME/members/MEMBER/member.json   MemberRecord
//! STATE/clusters/NAME/members/MEMBER/data/  etcd --data-dir
//! STATE/clusters/NAME/members/MEMBER/etcd.log
//! STATE/backups/NAME/                       backups (kept when a cluster is deleted)
//! STATE/deleted/NAME-STAMP/                 a deleted cluster's folder, kept aside (deleted.rs)
//! STATE/delete-requests/NAME                `etcd-operator delete NAME` (controller/local/folder.rs)
//! STATE/chaos-monkey/                      chaos-monkey's records of what it paused (not the operator's)
//! ```
//!
//! Records are JSON, written to a temporary file, fsynced and renamed, so a
//! crash leaves the old record or the new one, never half of one.

use std::io::{self, Write};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::process::ProcessId;
use crate::member::MemberConfig;

/// The file of a cluster's event log in its folder ([`super::events`]).
pub const EVENTS_FILE: &str = "events.json";

/// Paths inside a state folder.
#[derive(Clone, Debug)]
pub struct Layout {
    root: PathBuf,
}

/// What the local platform keeps about a member: its [`MemberConfig`]
/// (flattened: the file's fields are the config's, then the local ones),
/// its loopback address and its process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberRecord {
    /// What it was created with and runs.
    #[serde(flatten)]
    pub config: MemberConfig,
    /// Its loopback address.
    pub ip: Ipv4Addr,
    /// Its process, when one was started.
    #[serde(default)]
    pub process: Option<ProcessId>,
    /// When it was last started (RFC 3339).
    #[serde(default)]
    pub started_at: Option<String>,
}

impl Layout {
    /// The layout of the state folder `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Layout { root: root.into() }
    }

    /// The state folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The lock file of the running operator.
    pub fn lock_path(&self) -> PathBuf {
        self.root.join("operator.lock")
    }

    /// The folder of all clusters.
    pub fn clusters_dir(&self) -> PathBuf {
        self.root.join("clusters")
    }

    /// A cluster's folder.
    pub fn cluster_dir(&self, cluster: &str) -> PathBuf {
        self.clusters_dir().join(cluster)
    }

    /// A cluster's record.
    pub fn record_path(&self, cluster: &str) -> PathBuf {
        self.cluster_dir(cluster).join("cluster.json")
    }

    /// A cluster's published status.
    pub fn status_path(&self, cluster: &str) -> PathBuf {
        self.cluster_dir(cluster).join("status.json")
    }

    /// A cluster's event log (what the controller announced about it).
    pub fn events_path(&self, cluster: &str) -> PathBuf {
        self.cluster_dir(cluster).join(EVENTS_FILE)
    }

    /// A member's folder.
    pub fn member_dir(&self, cluster: &str, member: &str) -> PathBuf {
        self.cluster_dir(cluster).join("members").join(member)
    }

    /// A member's record.
    pub fn member_record(&self, cluster: &str, member: &str) -> PathBuf {
        self.member_dir(cluster, member).join("member.json")
    }

    /// A member's etcd data folder.
    pub fn data_dir(&self, cluster: &str, member: &str) -> PathBuf {
        self.member_dir(cluster, member).join("data")
    }

    /// A member's log.
    pub fn log_path(&self, cluster: &str, member: &str) -> PathBuf {
        self.member_dir(cluster, member).join("etcd.log")
    }

    /// A cluster's default backup folder.
    pub fn backups_dir(&self, cluster: &str) -> PathBuf {
        self.root.join("backups").join(cluster)
    }

    /// Names of the clusters that have a folder.
    pub fn cluster_names(&self) -> io::Result<Vec<String>> {
        dir_names(&self.clusters_dir())
    }

    /// Names of a cluster's members.
    pub fn member_names(&self, cluster: &str) -> io::Result<Vec<String>> {
        let mut names = dir_names(&self.cluster_dir(cluster).join("members"))?;
        names.sort_by(|a, b| crate::plan::member_order(a, b));
        Ok(names)
    }

    /// Reads a member's record.
    pub fn read_member(&self, cluster: &str, member: &str) -> io::Result<Option<MemberRecord>> {
        read_json(&self.member_record(cluster, member))
    }

    /// Whether a member's data folder holds etcd data (a write-ahead log).
    pub fn has_data(&self, cluster: &str, member: &str) -> bool {
        let wal = self.data_dir(cluster, member).join("member").join("wal");
        std::fs::read_dir(wal).is_ok_and(|mut d| d.next().is_some())
    }
}

fn dir_names(dir: &Path) -> io::Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_dir()
            && let Some(name) = entry.file_name().to_str()
            && !name.starts_with('.')
        {
            names.push(name.to_string());
        }
    }
    names.sort();
    Ok(names)
}

/// Reads a JSON file; `None` when it does not exist.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> io::Result<Option<T>> {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    serde_json::from_slice(&text).map(Some).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

/// Writes JSON atomically: temporary file, fsync, rename.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    // Serialized first, then written at once: straight into the file,
    // serde_json makes a write call per token (hundreds for a status).
    let mut text = serde_json::to_vec_pretty(value)?;
    text.push(b'\n');
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(&text)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// The last `lines` lines of a text file (empty if it cannot be read); only
/// its last 64 KiB are read.
pub fn tail(path: &Path, lines: usize) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::{InitialState, MemberAddr};
    use crate::version::Version;

    /// A `member.json` as the operator wrote it before the member's config
    /// became one type (`MemberRecord` listed the config's fields itself).
    const OLD_RECORD: &str = r#"{
  "addr": {
    "name": "demo-1",
    "peerUrl": "http://127.31.4.7:2380",
    "clientUrl": "http://127.31.4.7:2379"
  },
  "ip": "127.31.4.7",
  "version": "3.4.23",
  "bootstrap": false,
  "initialCluster": "demo-0=http://127.9.1.2:2380,demo-1=http://127.31.4.7:2380",
  "initialState": "existing",
  "token": "demo-4f1e2d3c4b5a6978",
  "process": {
    "pid": 4242,
    "start_time": 1234567
  },
  "startedAt": "2026-12-01T10:00:00.123Z"
}
"#;

    #[test]
    fn a_record_written_before_member_config_still_loads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path());
        let path = layout.member_record("demo", "demo-1");
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("mkdir");
        std::fs::write(&path, OLD_RECORD).expect("write");
        let record = layout
            .read_member("demo", "demo-1")
            .expect("readable")
            .expect("there");
        let want = MemberRecord {
            config: MemberConfig {
                addr: MemberAddr {
                    name: "demo-1".into(),
                    peer_url: "http://127.31.4.7:2380".into(),
                    client_url: "http://127.31.4.7:2379".into(),
                },
                version: Version::new(3, 4, 23),
                initial_cluster: "demo-0=http://127.9.1.2:2380,demo-1=http://127.31.4.7:2380"
                    .into(),
                initial_state: InitialState::Existing,
                token: "demo-4f1e2d3c4b5a6978".into(),
                bootstrap: false,
                tls: Default::default(),
                tuning: Default::default(),
                backend: Default::default(),
                pod: Default::default(),
                force_new_cluster: false,
                fresh_restore: false,
            },
            ip: Ipv4Addr::new(127, 31, 4, 7),
            process: Some(ProcessId {
                pid: 4242,
                start_time: 1_234_567,
            }),
            started_at: Some("2026-12-01T10:00:00.123Z".into()),
        };
        assert_eq!(record, want);
        // Written again, it has the same fields and values.
        write_json(&path, &record).expect("write");
        let old: serde_json::Value = serde_json::from_str(OLD_RECORD).expect("json");
        let new: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
        assert_eq!(old, new);
    }
}
