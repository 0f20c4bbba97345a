//! Scenarios: what a soak run does and which bounds it must hold, as data.
//!
//! A scenario is a strict YAML file (unknown fields are errors, with line
//! and column); [`load`] parses it and [`validate`] checks what serde cannot
//! (impossible bounds, zero durations, a backup bound without backups),
//! naming the file, the field and what is allowed.

mod cluster;
mod dur;
mod standby;
mod validate;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use cluster::ClusterSpec;
pub use dur::Dur;
pub use standby::{LostOnPromotion, Standby};
pub use validate::validate;

/// Why a scenario cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file cannot be read.
    #[error("{file}: cannot read the scenario: {source}")]
    Read {
        /// The scenario file.
        file: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Not a scenario (syntax, unknown field, wrong type).
    #[error("{file}: {message}")]
    Parse {
        /// The scenario file.
        file: PathBuf,
        /// Line, column and what is wrong.
        message: String,
    },
    /// Fields with values that cannot work.
    #[error("{file}: {}", .problems.join("; "))]
    Invalid {
        /// The scenario file.
        file: PathBuf,
        /// One entry per problem: `field: what is wrong (what is allowed)`.
        problems: Vec<String>,
    },
}

/// A soak scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// Short name, used in the report and the default output folder.
    pub name: String,
    /// What the scenario shows, for the report.
    #[serde(default)]
    pub description: String,
    /// How long load and chaos run.
    pub duration: Dur,
    /// How long the cluster gets at the end (chaos stopped) to become
    /// healthy before the final checks; default 60s.
    #[serde(default = "default_settle")]
    pub settle: Dur,
    /// The cluster under test (the EtcdCluster spec, plus its name).
    pub cluster: ClusterSpec,
    /// Client load.
    #[serde(default)]
    pub load: Load,
    /// Fault injection (chaos-monkey options); none when absent.
    #[serde(default)]
    pub chaos: Option<Chaos>,
    /// Spec changes during the run (resize, upgrade), each measured like a
    /// fault: from the change to the cluster healthy with the new spec.
    #[serde(default)]
    pub changes: Vec<Change>,
    /// Probing.
    #[serde(default)]
    pub probe: Probe,
    /// What must hold for the run to pass.
    pub bounds: Bounds,
    /// An object store the runner starts for the run and keeps the
    /// cluster's backups in (`s3`: moto's S3 server on loopback; local
    /// platform only). Needs `cluster.backup`, without a location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreServer>,
    /// A standby of the cluster (`spec.standby` on a second cluster,
    /// `CLUSTER-standby`), created once the cluster has its first full
    /// backup; its lag bounded and its data compared at the end. Needs
    /// `cluster.backup.continuous`; local platform only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby: Option<Standby>,
    /// When false, the runner pauses the cluster (spec.paused) once it is
    /// Running, so the operator heals nothing: a deliberately broken setup
    /// for testing the soak itself. Default true.
    #[serde(default = "yes")]
    pub operator_healing: bool,
}

/// The object store a scenario's runner starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreServer {
    /// moto's S3 server.
    S3,
}

fn default_settle() -> Dur {
    Dur(Duration::from_secs(60))
}

fn yes() -> bool {
    true
}

/// A change of the cluster's spec during the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Change {
    /// When, counted from the start of the load.
    pub after: Dur,
    /// New spec.size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
    /// New spec.version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Client load: writers and readers over a key space.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Load {
    /// Writer tasks, each one client session putting random keys.
    #[serde(default = "default_writers")]
    pub writers: u32,
    /// Reader tasks, each one client session doing linearizable gets.
    #[serde(default = "default_readers")]
    pub readers: u32,
    /// Target operations per second of all writers and readers together,
    /// spread evenly over them; 0 means as fast as they can.
    #[serde(default = "default_rate")]
    pub rate: u32,
    /// Size of the key space.
    #[serde(default = "default_keys")]
    pub keys: u32,
    /// Bytes per value (at least 16).
    #[serde(default = "default_value_size")]
    pub value_size: u32,
    /// Timeout of one client operation.
    #[serde(default = "default_op_timeout")]
    pub timeout: Dur,
}

fn default_writers() -> u32 {
    4
}
fn default_readers() -> u32 {
    2
}
fn default_rate() -> u32 {
    200
}
fn default_keys() -> u32 {
    1000
}
fn default_value_size() -> u32 {
    64
}
fn default_op_timeout() -> Dur {
    Dur(Duration::from_secs(2))
}

impl Default for Load {
    fn default() -> Self {
        Load {
            writers: default_writers(),
            readers: default_readers(),
            rate: default_rate(),
            keys: default_keys(),
            value_size: default_value_size(),
            timeout: default_op_timeout(),
        }
    }
}

/// A scenario's `chaos` section: the chaos monkey's own options, its flags
/// in camelCase (`--kill-interval` is `killInterval`), read with the flags'
/// parsers and defaults; with the monkey's types for `target`, `fault`,
/// `split` and `corrupt` (their YAML names are the flags' values).
pub use chaos_monkey::cli::{Chaos, CorruptPart, FaultKind, Skew, Split};
pub use chaos_monkey::select::Target;

/// How the cluster is probed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Probe {
    /// Time between probes (100ms to 250ms); default 200ms.
    #[serde(default = "default_probe_interval")]
    pub interval: Dur,
    /// Deadline of a probe's quorum write and read; default 1s.
    #[serde(default = "default_probe_timeout")]
    pub timeout: Dur,
    /// Time between KV hash checkpoints; default 10s.
    #[serde(default = "default_checkpoint")]
    pub checkpoint_interval: Dur,
}

fn default_probe_interval() -> Dur {
    Dur(Duration::from_millis(200))
}
fn default_probe_timeout() -> Dur {
    Dur(Duration::from_secs(1))
}
fn default_checkpoint() -> Dur {
    Dur(Duration::from_secs(10))
}

impl Default for Probe {
    fn default() -> Self {
        Probe {
            interval: default_probe_interval(),
            timeout: default_probe_timeout(),
            checkpoint_interval: default_checkpoint(),
        }
    }
}

/// What must hold. Safety invariants (one leader per term, revisions never
/// going back, equal KV hashes, membership back within `recoveryMax`) always
/// apply; these are the measured bounds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Bounds {
    /// 99th percentile of the recovery time of faults.
    pub recovery_p99: Dur,
    /// Longest recovery of any fault, and the longest time membership may
    /// differ from the spec.
    pub recovery_max: Dur,
    /// Least fraction of the run in which a quorum write succeeds (0 to 1].
    pub availability: f64,
    /// Oldest the newest backup may get (needs cluster.backup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_backup_age: Option<Dur>,
    /// With continuous backups: the longest the store may lag the
    /// cluster's changes (status.backup.continuous.syncedTime); needs
    /// cluster.backup.continuous.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_chain_age: Option<Dur>,
    /// Restores proven during the run (needs
    /// cluster.backup.restoreCheck): at least `min` scheduled restore
    /// checks ran, and every one verified its backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_checks: Option<RestoreChecks>,
    /// Most acknowledged writes that may be missing at the end; default 0.
    #[serde(default)]
    pub lost_writes: u64,
    /// Least number of faults that must have been injected (so a monkey that
    /// did nothing cannot pass); default 0.
    #[serde(default)]
    pub min_faults: u64,
    /// `none` (default): no acknowledged write may be lost and revisions never
    /// go back. `sinceBackup`: a restore from backup may roll back writes
    /// acknowledged after the backup was taken (they are reported, not
    /// counted), and revisions may go back once per restore.
    #[serde(default)]
    pub data_loss: DataLoss,
    /// With `dataLoss: sinceBackup`: the longest a rolled-back write may
    /// have been acknowledged before the rebuild that rolled it back (the
    /// loss window); unset, any window passes (it is still reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_loss_window: Option<Dur>,
    /// With `chaos.fault: corrupt`: how long after a fault the member it hit
    /// may hold a KV hash that differs from the one a strict majority agrees
    /// on (until the operator replaces it); unset, hashes must always agree.
    /// The final checkpoint never excuses a difference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_divergence_max: Option<Dur>,
    /// With `standby.losePrimaryAt`: the most writes the primary
    /// acknowledged past the promoted standby's last applied revision that
    /// may be lost (`0`, or `lastSegment`: what it acknowledged in the last
    /// segment interval before the loss).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_on_promotion: Option<LostOnPromotion>,
}

/// `bounds.restoreChecks`: how many scheduled restore checks must run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RestoreChecks {
    /// Least number of checks seen in the run (at least 1); each must be
    /// `verified`.
    pub min: u64,
}

/// What data loss a scenario accepts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DataLoss {
    /// None at all.
    #[default]
    None,
    /// Writes after the newest backup, when the cluster is restored from it.
    SinceBackup,
}

/// Reads and validates a scenario file.
pub fn load(file: &Path) -> Result<Scenario, Error> {
    let text = std::fs::read_to_string(file).map_err(|source| Error::Read {
        file: file.into(),
        source,
    })?;
    let scenario = parse(file, &text)?;
    validate(&scenario).map_err(|problems| Error::Invalid {
        file: file.into(),
        problems,
    })?;
    Ok(scenario)
}

/// Parses a scenario (without the checks of [`validate`]), with types as
/// strict as the operator's manifests (`size: "3"` is refused) and the
/// operator's messages (line, column and field of each problem).
pub fn parse(file: &Path, text: &str) -> Result<Scenario, Error> {
    etcd_operator::yaml::from_str_bounded::<Scenario>(text, field_bounds).map_err(|message| {
        Error::Parse {
            file: file.into(),
            message,
        }
    })
}

/// The range a scenario's whole-number field allows when it is narrower
/// than its type's: the spec's own for the spec fields under `cluster`,
/// a change's `size` and the standby's (`cluster.size` from 1 to 9).
fn field_bounds(path: &str) -> (Option<i128>, Option<i128>) {
    use etcd_operator::crd::spec_field_bounds;
    if let Some(field) = path.strip_prefix("cluster.") {
        return spec_field_bounds(field);
    }
    if path == "standby.size" {
        return spec_field_bounds("size");
    }
    match path
        .strip_prefix("changes[")
        .and_then(|p| p.split_once("]."))
    {
        Some((_, "size")) => spec_field_bounds("size"),
        _ => (None, None),
    }
}

#[cfg(test)]
mod tests;

/// A floor (`bounds.minFaults`) for a run shortened to `ratio` of the
/// scenario's duration: rounded up, and never to 0 when it was more (a
/// 5-minute run of a 1-hour scenario had `faults injected >= 0`, a bound
/// that cannot fail).
pub fn scaled_floor(n: u64, ratio: f64) -> u64 {
    if n == 0 {
        return 0;
    }
    let scaled = (n as f64 * ratio.clamp(0.0, 1.0)).ceil();
    (scaled as u64).clamp(1, n)
}
