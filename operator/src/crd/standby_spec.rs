//! `spec.standby`: a standby of another cluster, kept up from its backups
//! or from a live watch of its members.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::RestoreLocation;

/// A standby of another cluster (the source, its primary): created from
/// the source's newest good full backup and kept up, revision for revision,
/// from the chain of delta segments the source's continuous backups write
/// (`spec.backup.continuous` on the source), as they appear in the source's
/// backup location; no network path to the source is needed. Each source
/// revision is one transaction here, so this cluster's revision is the
/// source's at the point applied. Leases are not carried. With `stream`,
/// the source's changes are applied as its members send them (a watch),
/// the store's chain taking over whenever the watch cannot go on. On
/// Kubernetes the source's backups must be in an object store.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StandbySpec {
    /// The source cluster: its name, as its backups carry it.
    pub cluster: String,
    /// Where the source's backups are, as its `spec.backup.location` says
    /// (a folder or an object store; on Kubernetes an object store);
    /// default: its default place (local: `STATE/backups/CLUSTER`). Read
    /// only: nothing is ever written there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<RestoreLocation>,
    /// Promote: apply what is still in the store, stop following and go on
    /// as a cluster of its own (`status.standby` says the last revision
    /// applied and when the source wrote it). Removing `spec.standby` does
    /// the same. A promoted cluster never follows again.
    #[serde(default)]
    pub promote: bool,
    /// Follow the source live: a watch of its members from the standby's
    /// revision on, each source revision applied as it arrives (lag: the
    /// time to carry it over the network). When the watch cannot reach
    /// back (the source compacted past the standby's revision) or no
    /// member answers, the store's chain takes over until the watch can
    /// go on. The source's backups are still needed: the standby is
    /// created from them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<StandbyStream>,
    /// What to do when the source's revisions after the standby's are in
    /// no chain of its store (a segment lost, the chain the standby was
    /// reading deleted by the source's retention) while a newer full
    /// backup is there: `Stop` (default: stop there and say which
    /// revisions are missing) or `Rebootstrap` (create the standby again
    /// from the source's newest good backup, its old data kept aside, and
    /// say in `status.standby.rebootstrapped` and a Warning Event which
    /// revisions it never applied one by one).
    #[serde(default, skip_serializing_if = "OnGap::is_stop")]
    pub on_gap: OnGap,
}

/// [`StandbySpec::on_gap`].
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum OnGap {
    /// Stop at the gap, saying which revisions are missing.
    #[default]
    Stop,
    /// Create the standby again from the source's newest good backup.
    Rebootstrap,
}

impl OnGap {
    /// The default.
    pub fn is_stop(&self) -> bool {
        *self == OnGap::Stop
    }
}

/// Where the source's members answer, for [`StandbySpec::stream`].
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StandbyStream {
    /// The source members' client URLs (`http://HOST:PORT` or
    /// `https://HOST:PORT`), as `etcd-operator status SOURCE` lists them;
    /// 1 to 9.
    pub endpoints: Vec<String>,
    /// For `https://` endpoints: an absolute path to a folder with
    /// `ca.crt` (the CAs the source's members are checked against),
    /// `tls.crt` and `tls.key` (a client certificate they accept). Local
    /// platform only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_path: Option<String>,
}
