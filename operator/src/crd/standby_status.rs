//! What status says of a standby (`status.standby`, [`crate::standby`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a standby stands against its source (`spec.standby`).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StandbyStatus {
    /// `Following` (applying the source's changes as they appear),
    /// `Stopped` (it cannot go on: `message` says why), `Diverged`
    /// (something other than the standby's applier changed it: it applies
    /// nothing more), `Promoting` or `Promoted` (a cluster of its own).
    pub state: String,
    /// The source cluster.
    pub source: String,
    /// The source's uid, as its backups carry it: a source re-created under
    /// the same name is another cluster and is not followed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_uid: Option<String>,
    /// The etcd cluster id of the source's members, as the standby first
    /// followed them live (hex): members of another cluster answering at
    /// `spec.standby.stream.endpoints` are never followed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_cluster_id: Option<String>,
    /// How the source's changes arrive: `stream` (a live watch of its
    /// members, `spec.standby.stream`) or `store` (the chain of its
    /// backups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// The last source revision applied here: this cluster's revision.
    #[serde(default)]
    pub applied_revision: i64,
    /// When the source wrote it (the time of the segment that holds it,
    /// RFC 3339, ms; streaming: when it arrived).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_time: Option<String>,
    /// The newest source revision known (in the store).
    #[serde(default)]
    pub source_revision: i64,
    /// When the source wrote it (RFC 3339, ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_time: Option<String>,
    /// Source revisions known and not applied yet.
    #[serde(default)]
    pub lag_revisions: i64,
    /// How long ago the source wrote the first revision not applied yet, in
    /// ms (0 when every known revision is applied).
    #[serde(default)]
    pub lag_ms: i64,
    /// Why it is stopped or diverged, or the last failure (the store or a
    /// member not answering), in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When it was promoted (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promoted_at: Option<String>,
    /// Whether clients' writes are refused: `true` while it is a standby
    /// (etcd's auth is on, the operator's applier is the only writer),
    /// `false` once promoted and auth is off again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// The etcd user clients read a standby as (`--user`): it may read
    /// every key and write none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_user: Option<String>,
    /// The file holding that user's password (local platform: in the
    /// cluster's state folder, owner-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_password_file: Option<String>,
    /// Revisions of the source in no chain of its store while a newer
    /// full backup is there: the standby cannot apply them one by one
    /// (it stopped before them, or is created again past them with
    /// `spec.standby.onGap: Rebootstrap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<RevisionRange>,
    /// The last time the standby was created again from a newer backup of
    /// its source (`spec.standby.onGap: Rebootstrap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebootstrapped: Option<StandbyRebootstrap>,
    /// The Secret and key holding that user's password (Kubernetes:
    /// `CLUSTER-standby-auth`, key `reader.password`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_password_secret: Option<SecretKey>,
}

/// Revisions `from` to `to`, both included.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionRange {
    /// The first.
    pub from: i64,
    /// The last.
    pub to: i64,
}

/// A standby created again from a newer backup of its source, past a gap
/// in the source's chains.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StandbyRebootstrap {
    /// When (RFC 3339).
    pub at: String,
    /// The source's revisions that were in no chain: never applied one by
    /// one (the standby holds every key as the source held it at
    /// `revision`, but a watch of the standby never saw these changes).
    pub skipped: RevisionRange,
    /// The backup it was created from again, and the revision it holds
    /// (its chain replayed).
    pub backup: String,
    /// The revision the standby was created at.
    pub revision: i64,
    /// Where the old members' data was moved (never deleted).
    pub old_data: String,
}

/// A key of a Secret in the cluster's namespace.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKey {
    /// The Secret's name.
    pub name: String,
    /// The key in its data.
    pub key: String,
}
