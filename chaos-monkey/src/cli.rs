//! The command line: every flag, its help text and its `CHAOS_MONKEY_*`
//! environment fallback. Values are checked one by one here (clap reports a
//! bad one naming the flag, with exit code 2); checks that involve several
//! flags are in [`crate::config`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

pub use crate::kinds::{CorruptPart, FaultKind, Skew, Split};
use crate::select::Target;

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

    /// Which members a tick hits: `random` (one member), `leader`,
    /// `follower`, `minority` ((N-1)/2 members of one cluster: the most it
    /// can lose and keep quorum), `majority` (more than half: needs
    /// --allow-quorum-loss), `operator` (the operator itself) or `store`
    /// (the object store at --store-addr that backups go to; local, with
    /// --fault pause: a store that stops answering for --pause-for).
    #[arg(
        long,
        value_enum,
        default_value = "random",
        env = "CHAOS_MONKEY_TARGET"
    )]
    pub target: Target,

    /// The object store --target store hits: the loopback address and port
    /// its server listens on (the `objectStore.endpoint` of the clusters'
    /// backups), such as 127.0.0.1:9000.
    #[arg(long, env = "CHAOS_MONKEY_STORE_ADDR")]
    pub store_addr: Option<std::net::SocketAddrV4>,

    /// Allow --target majority, which makes clusters lose quorum.
    #[arg(long, env = "CHAOS_MONKEY_ALLOW_QUORUM_LOSS")]
    pub allow_quorum_loss: bool,

    /// What is done to a victim: `kill` (SIGKILL; the pod deleted with
    /// grace period 0), `destroy` (killed and its data wiped, as a lost node
    /// or emptyDir), `pause` (SIGSTOP for --pause-for, then SIGCONT; local
    /// platform only), `partition` (cut off from the other members for
    /// --fault-for; --split cuts the cluster in two; on kube a
    /// NetworkPolicy), `delay` (--latency, --latency-jitter) and `loss`
    /// (--loss) on its links to the other members for --fault-for,
    /// `blackhole-until-snapshot` (cut off until the leader compacted its log
    /// past it), `corrupt` (bytes flipped in its --corrupt db or wal while
    /// stopped, then left to restart) or `disk-full` (the keyspace filled
    /// through it until etcd raises NOSPACE; clearing the alarm is left to
    /// the operator), `clock-skew` (its wall clock shifted by --skew for
    /// --fault-for: its vDSO `clock_gettime` patched through ptrace; x86_64
    /// Linux, root) or `slow-disk` (its disk writes throttled to
    /// --disk-iops for --fault-for through a cgroup v1 blkio cgroup, so
    /// fsync is slow; root). All but kill, destroy and partition: local
    /// platform only.
    #[arg(long, value_enum, default_value = "kill", env = "CHAOS_MONKEY_FAULT")]
    pub fault: FaultKind,

    /// Time between ticks, such as 30s, 500ms or 1m.
    #[arg(long, value_name = "DURATION", default_value = "30s", env = "CHAOS_MONKEY_KILL_INTERVAL",
          value_parser = positive_duration, allow_hyphen_values = true)]
    pub kill_interval: Duration,

    /// How long a paused member stays stopped (only with --fault pause;
    /// default 10s).
    #[arg(long, value_name = "DURATION", env = "CHAOS_MONKEY_PAUSE_FOR",
          value_parser = positive_duration, allow_hyphen_values = true)]
    pub pause_for: Option<Duration>,

    /// How long partition, delay, loss, clock-skew and slow-disk last
    /// before they are healed, and the longest blackhole-until-snapshot
    /// waits for its snapshot. Default 10s.
    #[arg(long, value_name = "DURATION", env = "CHAOS_MONKEY_FAULT_FOR",
          value_parser = positive_duration, allow_hyphen_values = true)]
    pub fault_for: Option<Duration>,

    /// --fault partition: cut the victim's cluster in two instead of
    /// isolating the victim alone; the victim's side (the victim and members
    /// drawn from --seed) is a `minority` ((N-1)/2 members) or a `majority`
    /// (N/2+1). Takes --target random, leader or follower.
    #[arg(long, value_enum, env = "CHAOS_MONKEY_SPLIT")]
    pub split: Option<Split>,

    /// --fault delay: added one-way latency on each packet between the
    /// victim and the other members (held in the monkey through an
    /// NFQUEUE), such as 200ms. Default 200ms.
    #[arg(long, value_name = "DURATION", env = "CHAOS_MONKEY_LATENCY",
          value_parser = positive_duration, allow_hyphen_values = true)]
    pub latency: Option<Duration>,

    /// --fault delay: random variation of --latency, such as 50ms (each
    /// packet's drawn from --seed; not the same as --jitter, which delays
    /// ticks). Default 0s.
    #[arg(long, value_name = "DURATION", env = "CHAOS_MONKEY_LATENCY_JITTER",
          value_parser = duration, allow_hyphen_values = true)]
    pub latency_jitter: Option<Duration>,

    /// --fault loss: share of packets between the victim and the other
    /// members dropped at random, such as 30% (above 0, at most 100).
    /// Default 30%.
    #[arg(long, value_name = "PERCENT", env = "CHAOS_MONKEY_LOSS",
          value_parser = percent, allow_hyphen_values = true)]
    pub loss: Option<f64>,

    /// --fault corrupt: what is damaged: `db` (the last byte of a live value
    /// in the bbolt database: silent data corruption; the member starts,
    /// its KV hash differs, and etcd's periodic check,
    /// --experimental-corrupt-check-time, raises a CORRUPT alarm) or `wal` (a
    /// byte of a record in the newest WAL file: etcd refuses to start, "crc
    /// mismatch"). Default db.
    #[arg(long, value_enum, env = "CHAOS_MONKEY_CORRUPT")]
    pub corrupt: Option<CorruptPart>,

    /// --fault disk-full: the most bytes written before giving up when
    /// etcd has not raised NOSPACE, such as 4GiB (etcd's default quota is
    /// 2GiB). Default 4GiB.
    #[arg(long, value_name = "SIZE", env = "CHAOS_MONKEY_FILL_MAX",
          value_parser = size, allow_hyphen_values = true)]
    pub fill_max: Option<u64>,

    /// --fault clock-skew: how far the victim's wall clock (CLOCK_REALTIME)
    /// is shifted, such as 30s (ahead) or -30s (behind); its monotonic clock
    /// is left alone. Default 30s.
    #[arg(
        long,
        value_name = "SHIFT",
        env = "CHAOS_MONKEY_SKEW",
        allow_hyphen_values = true
    )]
    pub skew: Option<Skew>,

    /// --fault slow-disk: the most write operations per second the victim
    /// may issue to the disk holding its data folder (each fdatasync takes
    /// a few). Default 20 (an fdatasync then takes ~100 ms).
    #[arg(long, value_name = "N", env = "CHAOS_MONKEY_DISK_IOPS", value_parser = disk_iops,
          allow_hyphen_values = true)]
    pub disk_iops: Option<u32>,

    /// Remove what a chaos-monkey that was killed (SIGKILL) left behind on
    /// the local platform: its iptables chains and cgroups, the vDSO patches
    /// of clock-skew (original code written back) and the blkio cgroups of
    /// slow-disk (and, with --platform kube, its NetworkPolicies), then exit. Touches nothing of a monkey still
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

    /// The most members one tick hits (caps minority and majority).
    #[arg(long, value_name = "N", env = "CHAOS_MONKEY_MAX_KILL", value_parser = at_least_one,
          allow_hyphen_values = true)]
    pub max_kill: Option<usize>,

    /// Chance that a tick fires, from 0 to 1 (drawn from --seed).
    #[arg(long, value_name = "P", default_value = "1", env = "CHAOS_MONKEY_PROBABILITY",
          value_parser = probability, allow_hyphen_values = true)]
    pub probability: f64,

    /// Spare members started less than this long ago, such as 1m.
    #[arg(long, value_name = "DURATION", default_value = "0s", env = "CHAOS_MONKEY_MIN_AGE",
          value_parser = duration, allow_hyphen_values = true)]
    pub min_age: Duration,

    /// Random extra delay before each tick, in [0, DURATION) (drawn from --seed).
    #[arg(long, value_name = "DURATION", default_value = "0s", env = "CHAOS_MONKEY_JITTER",
          value_parser = duration, allow_hyphen_values = true)]
    pub jitter: Duration,

    /// Seed of every random choice (a whole number from 0 to 2^64-1): the
    /// same seed and clusters give the same victims. Default: a random seed,
    /// printed at start.
    #[arg(long, value_name = "N", env = "CHAOS_MONKEY_SEED", value_parser = seed,
          allow_hyphen_values = true)]
    pub seed: Option<u64>,

    /// Log what would be done, touching nothing (not even the operator).
    #[arg(long, env = "CHAOS_MONKEY_DRY_RUN")]
    pub dry_run: bool,

    /// Stop after this long, such as 10m. Default: run until stopped.
    #[arg(long, value_name = "DURATION", env = "CHAOS_MONKEY_DURATION",
          value_parser = positive_duration, allow_hyphen_values = true)]
    pub duration: Option<Duration>,

    /// Stop after this many faults (resumes not counted; a paused member is
    /// resumed after --pause-for first).
    #[arg(long, value_name = "N", env = "CHAOS_MONKEY_MAX_FAULTS", value_parser = at_least_one,
          allow_hyphen_values = true)]
    pub max_faults: Option<usize>,

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
