//! `spec.standby`: a standby of another cluster, kept up from its backups.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::RestoreLocation;

/// A standby of another cluster (the source, its primary): created from
/// the source's newest good full backup and kept up, revision for revision,
/// from the chain of delta segments the source's continuous backups write
/// (`spec.backup.continuous` on the source), as they appear in the source's
/// backup location; no network path to the source is needed. Each source
/// revision is one transaction here, so this cluster's revision is the
/// source's at the point applied. Leases are not carried. Local platform
/// for now.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StandbySpec {
    /// The source cluster: its name, as its backups carry it.
    pub cluster: String,
    /// Where the source's backups are, as its `spec.backup.location` says
    /// (a folder or an object store); default: its default place (local:
    /// `STATE/backups/CLUSTER`). Read only: nothing is ever written there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<RestoreLocation>,
    /// Promote: apply what is still in the store, stop following and go on
    /// as a cluster of its own (`status.standby` says the last revision
    /// applied and when the source wrote it). Removing `spec.standby` does
    /// the same. A promoted cluster never follows again.
    #[serde(default)]
    pub promote: bool,
}
