//! The `EtcdCluster` status: what the operator observed and did, written
//! by it (the `/status` subresource on Kubernetes, `status.json` locally).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::StandbyStatus;

/// Observed state of an etcd cluster, written by the operator.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdClusterStatus {
    /// One word for where the cluster stands.
    pub phase: Phase,
    /// Available, Progressing and Degraded, each with a reason and a message.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// Every member the operator knows of, from the platform and from etcd.
    #[serde(default)]
    pub members: Vec<MemberStatus>,
    /// Number of members that are ready (serving, with a leader).
    #[serde(default)]
    pub ready_members: i64,
    /// The `metadata.generation` of the spec this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The etcd version all members run, once they agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_version: Option<String>,
    /// Name of the current leader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// The operator's last step or the reason it is waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_action: Option<String>,
    /// When this status was observed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_at: Option<String>,
    /// Backups, when `spec.backup` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupStatus>,
    /// The highest etcd revision seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// The last rebuild from a backup after a quorum loss, and what it lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_recovery: Option<RecoveryStatus>,
    /// What a cluster created from a backup (`spec.restore`) was restored
    /// from: the backup, and the delta segments replayed on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<RestoreStatus>,
    /// A standby (`spec.standby`): where it stands against its source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby: Option<StandbyStatus>,
    /// TLS, when `spec.tls` is set or members still use it: where a
    /// client finds the CA and a client certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsStatus>,
}

/// Where TLS stands, and what a client needs.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlsStatus {
    /// Peer TLS: `Auto`, `Provided` or `Off`.
    pub peer: String,
    /// Client TLS: `Auto`, `Provided` or `Off`.
    pub client: String,
    /// Local platform: the CA bundle file to trust (`etcdctl --cacert`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// Local platform: a client certificate the operator issued for tools
    /// and users (`etcdctl --cert`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cert_file: Option<String>,
    /// Local platform: its key (`etcdctl --key`), readable by its owner only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_key_file: Option<String>,
    /// Kubernetes: a `kubernetes.io/tls` Secret with `ca.crt`, `tls.crt`
    /// and `tls.key` for clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// When the CA the operator issues from expires (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_not_after: Option<String>,
    /// The earliest end of validity of a member certificate (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificates_not_after: Option<String>,
    /// A change under way: turning TLS on or off, or rotating the CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<String>,
}

/// What a cluster whose quorum was lost for good was rebuilt from.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RecoverySource {
    /// The newest verified backup.
    #[default]
    Backup,
    /// The most advanced surviving member, restarted alone.
    Survivor,
}

/// A rebuild of the cluster after its quorum was lost for good: from a
/// surviving member or from a backup.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecoveryStatus {
    /// `Survivor` or `Backup`.
    #[serde(default)]
    pub source: RecoverySource,
    /// The member that seeded the rebuilt cluster (source `Survivor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// The revision the rebuilt cluster starts from: the survivor's, or
    /// the backup's. 0 in records written before it
    /// existed: see `backupRevision`.
    #[serde(default)]
    pub seed_revision: i64,
    /// The backup the cluster was rebuilt from (source `Backup`).
    #[serde(default)]
    pub backup: String,
    /// When that backup was taken (RFC 3339).
    #[serde(default)]
    pub backup_time: String,
    /// The revision the backup holds.
    #[serde(default)]
    pub backup_revision: i64,
    /// The last revision seen before the loss (0 if never seen).
    pub last_seen_revision: i64,
    /// Revisions seen before the loss that the rebuilt cluster does not
    /// hold (the last seen minus the seed revision, at least 0).
    pub lost_revisions: i64,
    /// When the rebuild started (RFC 3339).
    pub recovered_at: String,
    /// Where the old members' data was moved (kept for forensics; empty
    /// for a rebuild from a survivor, whose data is used in place).
    #[serde(default)]
    pub old_data: String,
    /// Delta segments replayed on top of the backup (continuous backups).
    #[serde(default)]
    pub replayed_segments: i64,
    /// The revision the replay reached (the backup's when none was
    /// replayed).
    #[serde(default)]
    pub replayed_revision: i64,
    /// When the last replayed segment was written (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_segment_time: Option<String>,
    /// The loss window: from the last replayed segment (or the backup) to
    /// the last revision seen before the loss, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_window_ms: Option<i64>,
    /// Why the replay stopped before the chain's end (a damaged or missing
    /// segment), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_problem: Option<String>,
}

/// What a cluster created from a backup (`spec.restore`) holds.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreStatus {
    /// `spec.restore.backup`: the backup's name or a snapshot file's path.
    pub backup: String,
    /// When the snapshot was set aside for the members (RFC 3339).
    pub restored_at: String,
    /// Delta segments of the backup's chain replayed on top of it
    /// (continuous backups; 0 for a snapshot file or a backup without
    /// segments).
    #[serde(default)]
    pub replayed_segments: i64,
    /// The revision the members restore: the backup's plus the replayed
    /// segments' (0 when not known: a snapshot file).
    #[serde(default)]
    pub replayed_revision: i64,
    /// When the last replayed segment was written (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_segment_time: Option<String>,
    /// Why the replay stopped before the chain's end (a damaged or missing
    /// segment, a replay that failed), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_problem: Option<String>,
}

/// Where the backups of a cluster stand.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupStatus {
    /// Why no backup is taken though `spec.backup` asks (a standby takes
    /// its own once promoted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
    /// Name of the newest verified backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_backup: Option<String>,
    /// When it was taken (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_backup_time: Option<String>,
    /// etcd revision it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_backup_revision: Option<i64>,
    /// Number of verified backups kept.
    #[serde(default)]
    pub kept: i64,
    /// The last failure, cleared by the next good backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When the next backup is due (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_backup_time: Option<String>,
    /// The last scheduled restore check (`spec.backup.restoreCheck`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_restore_check: Option<RestoreCheckStatus>,
    /// Continuous backups (`spec.backup.continuous`): the chain of delta
    /// segments after the newest full backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuous: Option<ChainStatus>,
    /// Other clusters whose backups are in the same backup location (an
    /// earlier cluster of the same name shows with its uid). The location
    /// is shared, kept apart: each cluster lists, keeps, deletes and
    /// restores only its own backups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_with: Vec<String>,
    /// Backups in the store that no longer check out (their snapshot
    /// changed, shrank or is gone): not counted as kept, never restored
    /// from; said in the condition `BackupsFailing`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub damaged: Vec<String>,
}

/// Where the chain of delta segments of the newest full backup stands.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChainStatus {
    /// The full backup the segments follow.
    pub base: String,
    /// Intact segments written after it.
    pub segments: i64,
    /// The last revision they hold (the base's when there is none).
    pub last_revision: i64,
    /// When the last segment was written (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_segment_time: Option<String>,
    /// Why the chain is cut or ended (a damaged or missing segment, the
    /// history compacted away), until a new full backup starts a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// When the store last held every change of the cluster (RFC 3339,
    /// ms): as etcd confirmed every change up to then delivered, and every
    /// one delivered was in the store. A restore from the store gives the
    /// cluster as it was then, or later. The condition
    /// `BackupChainBehind` says when this falls behind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synced_time: Option<String>,
    /// How the chain before this one ended early (cut, or its history
    /// compacted away), and the revisions a point-in-time restore cannot
    /// reach because of it. Said until the operator restarts;
    /// `etcd-operator backups` reads every chain from the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// The follower's last failure (the store or the members not
    /// answering, a segment that could not be written), cleared when it
    /// writes a segment again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// One restore check, as the status shows it.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreCheckStatus {
    /// The backup checked.
    pub backup: String,
    /// When (RFC 3339).
    pub time: String,
    /// `verified`, `mismatch` (a Warning: the backup does not hold what the
    /// cluster held), `unverifiable` (the cluster compacted past its
    /// revision) or `failed` (the check could not run).
    pub result: String,
    /// In words: both hashes, or why there was no comparison.
    pub message: String,
}

/// Phase of a cluster.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum Phase {
    /// Not created yet.
    #[default]
    Pending,
    /// Members are being bootstrapped.
    Creating,
    /// All members ready and the spec is met.
    Running,
    /// Restarting or replacing failed members, or rebuilding after a
    /// quorum loss: the cluster is worse than its spec (see the Degraded
    /// condition) and the operator repairs it.
    Recovering,
    /// Adding or removing members to reach the spec's size, as planned.
    Scaling,
    /// Restarting members one at a time onto the spec's version, settings
    /// or TLS (a rolling upgrade or restart), as planned.
    Upgrading,
    /// Something is wrong that the operator cannot fix right now; see the
    /// Degraded condition.
    Degraded,
    /// The cluster cannot be created as the spec says (a `spec.restore`
    /// whose backup is not there): see the Degraded condition; it is tried
    /// again when the spec changes, or after a long wait the condition
    /// names.
    Failed,
    /// `spec.paused` is true.
    Paused,
    /// The spec is invalid; nothing is done until it is fixed.
    Invalid,
}

impl Phase {
    /// The phase as written in status.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Creating => "Creating",
            Phase::Running => "Running",
            Phase::Recovering => "Recovering",
            Phase::Scaling => "Scaling",
            Phase::Upgrading => "Upgrading",
            Phase::Degraded => "Degraded",
            Phase::Failed => "Failed",
            Phase::Paused => "Paused",
            Phase::Invalid => "Invalid",
        }
    }
}

/// A status condition in the Kubernetes style.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Available`, `Progressing` or `Degraded`; with backups,
    /// `BackupsFailing` and, with continuous backups, `BackupChainBehind`;
    /// on the local platform, `DeletionPending` while a removed manifest's
    /// deletion waits out its grace.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase word for why.
    pub reason: String,
    /// What happened, in words a person can act on.
    pub message: String,
    /// When the status last changed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

/// One member as the operator sees it.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    /// Member name (also the etcd `--name`).
    pub name: String,
    /// etcd member id in hex, as etcdctl prints it; absent until etcd knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// URL clients connect to.
    #[serde(rename = "clientURL")]
    pub client_url: String,
    /// URL peers connect to.
    #[serde(rename = "peerURL")]
    pub peer_url: String,
    /// Serving requests, with a leader, and in the member list.
    pub ready: bool,
    /// This member is the leader.
    pub leader: bool,
    /// A learner (non-voting) member.
    #[serde(default)]
    pub learner: bool,
    /// etcd version the member runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Size of its data volume (Kubernetes: what its claim has; while it
    /// grows, what it asks for, see the Progressing condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_size: Option<String>,
    /// Storage class of its data volume (Kubernetes); when
    /// `spec.storage.storageClassName` names another, the member is
    /// replaced by one on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

impl EtcdClusterStatus {
    /// The condition of the given type, if set.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}
