//! What a run records: probe samples and checkpoints, in unix milliseconds
//! (the clock of the chaos monkey's fault log). The invariant checkers are
//! pure functions over these.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Milliseconds since the Unix epoch.
pub type Ms = u64;

/// Now, in unix milliseconds.
pub fn now_ms() -> Ms {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

/// A unix-ms instant as RFC 3339 (milliseconds, UTC).
pub fn rfc3339(ms: Ms) -> String {
    let t = UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_millis(t).to_string()
}

/// Part of the run a sample belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Load and chaos running.
    Run,
    /// Chaos stopped; waiting for the cluster to settle.
    Settle,
}

/// One member's answer to a status call.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MemberView {
    /// The client URL asked.
    pub url: String,
    /// The raft cluster it belongs to (changes when a cluster is rebuilt
    /// from a backup).
    pub cluster_id: u64,
    /// Its member id.
    pub id: u64,
    /// The leader it follows (0: none).
    pub leader: u64,
    /// Its raft term.
    pub term: u64,
    /// Its raft index.
    pub raft_index: u64,
    /// Store revision in the response header.
    pub revision: i64,
    /// A learner.
    pub learner: bool,
    /// The etcd version it runs.
    pub version: String,
    /// Alarms or errors it reports.
    pub errors: Vec<String>,
}

/// A member in etcd's member list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Listed {
    /// Member id.
    pub id: u64,
    /// Name (empty until started).
    pub name: String,
    /// Client URLs (empty until started).
    pub client_urls: Vec<String>,
    /// A learner.
    pub learner: bool,
}

/// What the operator published (status of the EtcdCluster).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Published {
    /// status.phase.
    pub phase: String,
    /// status.readyMembers.
    pub ready: i64,
    /// Number of entries in status.members.
    pub members: usize,
    /// status.backup.lastBackupTime, in unix ms.
    pub backup_time: Option<Ms>,
    /// status.backup.lastBackupRevision.
    pub backup_revision: Option<i64>,
    /// status.backup.lastError.
    pub backup_error: Option<String>,
    /// status.backup.continuous.syncedTime, in unix ms.
    pub chain_synced: Option<Ms>,
    /// Why the continuous chain is behind, as status says it (its problem,
    /// else the follower's last error).
    pub chain_problem: Option<String>,
    /// status.lastRecovery: when the last rebuild from a backup started, and
    /// the revision that backup holds.
    pub restore: Option<Restore>,
    /// status.backup.lastRestoreCheck: the last scheduled restore check.
    pub restore_check: Option<RestoreCheckSeen>,
}

/// A scheduled restore check, as the operator reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RestoreCheckSeen {
    /// The backup checked.
    pub backup: String,
    /// When (RFC 3339, as published: one check is one backup and time).
    pub time: String,
    /// `verified`, `mismatch`, `unverifiable` or `failed`.
    pub result: String,
    /// Both hashes, or why there was no comparison.
    pub message: String,
}

/// A rebuild of the cluster from a backup, as the operator reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Restore {
    /// When the rebuild started (unix ms).
    pub at: Ms,
    /// The revision the rebuilt cluster holds: the backup's, plus the
    /// delta segments replayed on it (continuous backups).
    pub backup_revision: i64,
}

/// Every distinct restore the samples show, in time order.
pub fn restores(samples: &[Sample]) -> Vec<Restore> {
    let mut out: Vec<Restore> = Vec::new();
    for r in samples
        .iter()
        .filter_map(|s| s.published.as_ref().and_then(|p| p.restore))
    {
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out.sort_by_key(|r| r.at);
    out
}

/// One probe tick.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Sample {
    /// When the tick started.
    pub at: Ms,
    /// Run or settle.
    pub phase: Phase,
    /// Members the spec asks for at this time.
    pub expected: usize,
    /// The etcd version the spec asks for at this time, once it changed
    /// (`None`: any version counts).
    pub expected_version: Option<String>,
    /// A quorum (linearizable) write was acknowledged within the deadline.
    pub write_ok: bool,
    /// Its latency in ms.
    pub write_ms: Option<u64>,
    /// A quorum read was answered within the deadline.
    pub read_ok: bool,
    /// The member list, from the first member that gave it.
    pub listed: Option<Vec<Listed>>,
    /// Status answers, one per member that answered.
    pub views: Vec<MemberView>,
    /// Members that did not answer: (URL, why).
    pub failures: Vec<(String, String)>,
    /// The operator's published status, if readable.
    pub published: Option<Published>,
}

impl Sample {
    /// A sample with nothing observed (for tests and fills).
    pub fn empty(at: Ms, expected: usize) -> Self {
        Sample {
            at,
            phase: Phase::Run,
            expected,
            expected_version: None,
            write_ok: false,
            write_ms: None,
            read_ok: false,
            listed: None,
            views: Vec::new(),
            failures: Vec::new(),
            published: None,
        }
    }
}

/// One member's KV hash: (hash, compact revision), or why it failed.
pub type MemberHash = Result<(u32, i64), String>;

/// The KV hash of each member at one revision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Checkpoint {
    /// When it was taken.
    pub at: Ms,
    /// The revision hashed.
    pub revision: i64,
    /// Per member URL: (hash, compact revision), or why it failed.
    pub hashes: Vec<(String, MemberHash)>,
    /// Taken at the end of the run.
    pub final_check: bool,
}
