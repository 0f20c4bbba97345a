//! A scenario's `standby` section: a second cluster kept up from the
//! scenario's cluster (the primary) by the operator's `spec.standby`, under
//! the same chaos, with its lag bounded and its data compared with the
//! primary's at the end. Local platform only.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Dur;

/// `standby`: a standby of the scenario's cluster, `CLUSTER-standby`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Standby {
    /// Members of the standby (1 to 9); default 1.
    #[serde(default = "one")]
    pub size: i64,
    /// Follow the primary's members live (`spec.standby.stream` with their
    /// client URLs); false: from the primary's backups in the store only.
    #[serde(default)]
    pub stream: bool,
    /// The most `status.standby.lagMs` may reach in any sample once the
    /// standby follows (the max of the samples, not a percentile).
    pub max_lag: Dur,
    /// Longest the standby gets at the end, once the primary stopped
    /// changing, to apply the primary's last revision; default 60s.
    #[serde(default = "default_catch_up")]
    pub catch_up: Dur,
    /// Whether the scenario's chaos hits the standby too (a second
    /// chaos-monkey on `CLUSTER-standby`, with the same options and a
    /// fault log of its own). Default: yes when there is a `chaos`
    /// section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chaos: Option<bool>,
}

fn one() -> i64 {
    1
}

fn default_catch_up() -> Dur {
    Dur(Duration::from_secs(60))
}

impl Standby {
    /// The standby's cluster name for the primary `primary`.
    pub fn name(primary: &str) -> String {
        format!("{primary}-standby")
    }

    /// Whether a second monkey hits the standby, given the scenario's
    /// chaos section.
    pub fn chaos_on(&self, has_chaos: bool) -> bool {
        self.chaos.unwrap_or(has_chaos) && has_chaos
    }

    /// Number of members.
    pub fn members(&self) -> usize {
        usize::try_from(self.size).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests;
