//! The command line: every flag, its help text and its `CHAOS_MONKEY_*`
//! environment fallback. Values are checked one by one here (clap reports a
//! bad one naming the flag, with exit code 2); checks that involve several
//! flags are in [`crate::config`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

mod chaos;
mod text;

pub use crate::kinds::{CorruptPart, FaultKind, Skew, Split};
pub use chaos::{Chaos, DEFAULT_KILL_INTERVAL};
pub use text::duration_text;

/// Kills, wipes, pauses, partitions, slows or damages random etcd members
/// of the clusters that etcd-operator manages, one tick per
/// --kill-interval, aimed by raft role (--target), reproducibly (--seed),
/// and writes one JSON line per fault (and per heal) to --fault-log.
///
/// It stops on SIGINT/SIGTERM, after --duration or after --max-faults,
/// resuming any member it paused and healing every network fault first.
/// Exit codes: 0 clean stop, 1 runtime failure, 2 bad input.
///
/// Network faults (partition, delay, loss, blackhole-until-snapshot) on the
/// local platform need root, `iptables` (with the cgroup, connmark,
/// statistic and comment matches and the NFQUEUE target) and a cgroup v2
/// hierarchy: the monkey checks all of it at start and exits 2 naming what
/// is missing.
/// Its rules are named CM-PID-N (iptables chains, comment "chaos-monkey");
/// after a SIGKILL, `chaos-monkey --cleanup` removes what is left.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "chaos-monkey",
    version,
    about,
    long_about,
    after_long_help = "Examples:\n  \
        chaos-monkey --state-dir .state --kill-interval 30s\n  \
        chaos-monkey --state-dir .state --kill-interval 10s --target leader --fault destroy --seed 7\n  \
        chaos-monkey --platform kube --namespace etcd --kill-interval 30s --duration 10m\n  \
        chaos-monkey --cleanup"
)]
pub struct Args {
    /// Where the members run: `local` (etcd processes under --state-dir) or
    /// `kube` (pods; uses --kubeconfig, --namespace, --selector).
    #[arg(
        long,
        value_enum,
        default_value = "local",
        env = "CHAOS_MONKEY_PLATFORM"
    )]
    pub platform: Platform,

    /// The operator's state folder (local platform), as passed to
    /// `etcd-operator run --state-dir`.
    #[arg(long, default_value = ".state", env = "CHAOS_MONKEY_STATE_DIR")]
    pub state_dir: PathBuf,

    /// Kubeconfig file (kube platform). Default: $KUBECONFIG, then
    /// ~/.kube/config, then the in-cluster service account.
    #[arg(long, env = "CHAOS_MONKEY_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Namespace of the member pods (kube platform). Default: the
    /// kubeconfig context's namespace.
    #[arg(long, env = "CHAOS_MONKEY_NAMESPACE")]
    pub namespace: Option<String>,

    /// Extra label selector the member pods must match too, such as
    /// `tier=test` (kube platform).
    #[arg(long, env = "CHAOS_MONKEY_SELECTOR")]
    pub selector: Option<String>,

    /// A cluster to hit (repeatable, or comma-separated in the variable).
    /// Default: every cluster the operator manages.
    #[arg(
        long = "cluster",
        value_name = "NAME",
        env = "CHAOS_MONKEY_CLUSTER",
        value_delimiter = ','
    )]
    pub clusters: Vec<String>,

    /// What is injected, how often and for how long (the part a soak
    /// scenario's `chaos` section holds too).
    #[command(flatten)]
    pub chaos: Chaos,

    /// The object store --target store hits: the loopback address and port
    /// its server listens on (the `objectStore.endpoint` of the clusters'
    /// backups), such as 127.0.0.1:9000.
    /// The store is the one process listening on exactly this address: a
    /// process listening on every address (0.0.0.0:PORT, [::]:PORT) is
    /// refused (it may be any server on that port), as are a socket
    /// several processes share, the operator and etcd members; and a
    /// store the monkey paused is recorded in STATE/chaos-monkey/ so that
    /// --cleanup resumes it after a SIGKILL of the monkey.
    #[arg(long, env = "CHAOS_MONKEY_STORE_ADDR")]
    pub store_addr: Option<std::net::SocketAddrV4>,

    /// Also take a process listening on every address (0.0.0.0:PORT or
    /// [::]:PORT, the port of --store-addr) for the object store, when
    /// none listens on --store-addr itself. Only when you know that
    /// process is the store (a MinIO started without --address, say).
    #[arg(long, env = "CHAOS_MONKEY_STORE_WILDCARD")]
    pub store_wildcard: bool,

    /// Remove what a chaos-monkey that was killed (SIGKILL) left behind on
    /// the local platform: members, the operator and the object store it
    /// left paused (resumed), its iptables chains and cgroups, the vDSO
    /// patches of clock-skew (original code written back) and the blkio
    /// cgroups of slow-disk (and, with --platform kube, its
    /// NetworkPolicies), then exit. Touches nothing of a monkey still
    /// running.
    #[arg(long, env = "CHAOS_MONKEY_CLEANUP")]
    pub cleanup: bool,

    /// Print a shell completion script for chaos-monkey (bash, zsh, fish,
    /// elvish, powershell) and exit.
    #[arg(
        long,
        value_enum,
        value_name = "SHELL",
        env = "CHAOS_MONKEY_COMPLETIONS"
    )]
    pub completions: Option<etcd_operator::cli::docs::Shell>,

    /// Write the man page chaos-monkey.1 into DIR and exit.
    #[arg(long, value_name = "DIR", env = "CHAOS_MONKEY_MAN")]
    pub man: Option<PathBuf>,

    /// Stop after this long, such as 10m. Default: run until stopped.
    #[arg(long, value_name = "DURATION", env = "CHAOS_MONKEY_DURATION",
          value_parser = positive_duration, allow_hyphen_values = true)]
    pub duration: Option<Duration>,

    /// Append one JSON line per fault to FILE (`-` for standard output).
    #[arg(long, value_name = "FILE", env = "CHAOS_MONKEY_FAULT_LOG")]
    pub fault_log: Option<PathBuf>,

    /// Format of diagnostic logs on standard error (RUST_LOG filters them).
    #[arg(
        long,
        value_enum,
        default_value = "text",
        env = "CHAOS_MONKEY_LOG_FORMAT"
    )]
    pub log_format: LogFormat,
}

impl Args {
    /// Flags given that the chosen platform does not use (warned about).
    pub fn ignored(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.platform == Platform::Local {
            if self.kubeconfig.is_some() {
                out.push("--kubeconfig");
            }
            if self.namespace.is_some() {
                out.push("--namespace");
            }
            if self.selector.is_some() {
                out.push("--selector");
            }
        }
        out
    }
}

/// Where the members run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Platform {
    /// etcd processes of the local platform.
    Local,
    /// Pods on Kubernetes.
    Kube,
}

/// Diagnostic log format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

const DURATION_HELP: &str = "a duration such as 30s, 500ms or 1m";

/// A duration, zero allowed.
pub fn duration(s: &str) -> Result<Duration, String> {
    if s.trim_start().starts_with('-') {
        return Err(format!(
            "must not be negative: expected 0s or more, {DURATION_HELP}"
        ));
    }
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("expected {DURATION_HELP} ({e})"))?;
    // A year bounds every interval a run can use (`100y` overflowed the
    // schedule's arithmetic).
    if d > MAX_DURATION {
        return Err(format!(
            "{s} is longer than a year (365d), the most a duration here may be"
        ));
    }
    Ok(d)
}

/// The longest duration a flag takes.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 86_400);

/// A seed: a whole number from 0 to 2^64-1.
pub fn seed(s: &str) -> Result<u64, String> {
    s.trim()
        .parse::<u64>()
        .map_err(|_| format!("expected a whole number from 0 to {}", u64::MAX))
}

/// A duration greater than zero.
pub fn positive_duration(s: &str) -> Result<Duration, String> {
    if s.trim_start().starts_with('-') {
        return Err(format!("must be positive: expected {DURATION_HELP}"));
    }
    match duration(s)? {
        d if d.is_zero() => Err(format!(
            "must be greater than zero: expected {DURATION_HELP}"
        )),
        d => Ok(d),
    }
}

/// A number from 0 to 1.
pub fn probability(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err("expected a probability from 0 to 1, such as 0.5".into()),
    }
}

/// A percentage above 0 and at most 100, written `30%` or `30`.
pub fn percent(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let t = t.strip_suffix('%').unwrap_or(t).trim();
    match t.parse::<f64>() {
        Ok(p) if p > 0.0 && p <= 100.0 => Ok(p),
        _ => Err("expected a percentage above 0 and at most 100, such as 30%".into()),
    }
}

/// A byte size such as `64MiB`, `4GiB`, `500MB` or `1048576` (at least 1 MiB).
pub fn size(s: &str) -> Result<u64, String> {
    const HELP: &str = "expected a size such as 64MiB, 4GiB or 500MB (at least 1MiB)";
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| HELP.to_string())?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return Err(HELP.into()),
    };
    match n.checked_mul(mult) {
        Some(b) if b >= 1 << 20 => Ok(b),
        _ => Err(HELP.into()),
    }
}

/// Write operations per second for slow-disk: 1 to 1000000.
pub fn disk_iops(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if (1..=1_000_000).contains(&n) => Ok(n),
        _ => Err("expected write operations per second from 1 to 1000000, such as 20".into()),
    }
}

/// A count of at least one.
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("expected a whole number of at least 1".into()),
    }
}

#[cfg(test)]
mod tests;
