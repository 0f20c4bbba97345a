//! What a run injects, how often and for how long: the part of the command
//! line a soak scenario's `chaos` section holds too. One struct is both:
//! its flags (clap) and its fields (serde, camelCase: `--kill-interval` is
//! `killInterval`) share their parsers (see [`super::text`]) and their
//! defaults, and [`Chaos::to_args`] writes it back as flags.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::text::{self, duration_text};
use super::{
    CorruptPart, FaultKind, Skew, Split, at_least_one, disk_iops, duration, percent,
    positive_duration, probability, seed, size,
};
use crate::select::Target;

/// The default of `--kill-interval`.
pub const DEFAULT_KILL_INTERVAL: Duration = Duration::from_secs(30);

/// The monkey's fault schedule: whom (`--target`), what (`--fault` and the
/// options of each fault), how often (`--kill-interval`, `--jitter`,
/// `--probability`), from when (`--start-after`) and how many
/// (`--max-kill`, `--max-faults`).
#[derive(clap::Args, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Chaos {
    /// Which members a tick hits: `random` (one member), `leader`,
    /// `follower`, `minority` ((N-1)/2 members of one cluster: the most it
    /// can lose and keep quorum), `majority` (more than half: needs
    /// --allow-quorum-loss), `operator` (the operator itself), `store`
    /// (the object store at --store-addr that backups go to; local, with
    /// --fault pause: a store that stops answering for --pause-for) or
    /// `applier` (the leader of a standby still following its source, as
    /// the operator published it: the member its applier writes through).
    #[arg(
        long,
        value_enum,
        default_value = "random",
        env = "CHAOS_MONKEY_TARGET"
    )]
    #[serde(default = "random")]
    pub target: Target,

    /// Allow --target majority, which makes clusters lose quorum.
    #[arg(long, env = "CHAOS_MONKEY_ALLOW_QUORUM_LOSS")]
    #[serde(default)]
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
    #[serde(default = "kill")]
    pub fault: FaultKind,

    /// Time between ticks, such as 30s, 500ms or 1m.
    #[arg(long, value_name = "DURATION", default_value = "30s", env = "CHAOS_MONKEY_KILL_INTERVAL",
          value_parser = positive_duration, allow_hyphen_values = true)]
    #[serde(
        default = "kill_interval",
        deserialize_with = "text::positive_duration",
        serialize_with = "text::write_duration"
    )]
    pub kill_interval: Duration,

    /// Wait this long before the first interval begins: the first tick
    /// comes --start-after plus --kill-interval after the start (--duration
    /// counts from the start).
    #[arg(long, value_name = "DURATION", default_value = "0s", env = "CHAOS_MONKEY_START_AFTER",
          value_parser = duration, allow_hyphen_values = true)]
    #[serde(
        default,
        deserialize_with = "text::duration",
        serialize_with = "text::write_duration"
    )]
    pub start_after: Duration,

    /// How long a paused member stays stopped (only with --fault pause;
    /// default 10s).
    #[arg(long, value_name = "DURATION", env = "CHAOS_MONKEY_PAUSE_FOR",
          value_parser = positive_duration, allow_hyphen_values = true)]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "text::opt_positive_duration",
        serialize_with = "text::write_opt_duration"
    )]
    pub pause_for: Option<Duration>,

    /// How long partition, delay, loss, clock-skew and slow-disk last
    /// before they are healed, and the longest blackhole-until-snapshot
    /// waits for its snapshot. Default 10s.
    #[arg(long, value_name = "DURATION", env = "CHAOS_MONKEY_FAULT_FOR",
          value_parser = positive_duration, allow_hyphen_values = true)]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "text::opt_positive_duration",
        serialize_with = "text::write_opt_duration"
    )]
    pub fault_for: Option<Duration>,

    /// --fault partition: cut the victim's cluster in two instead of
    /// isolating the victim alone; the victim's side (the victim and members
    /// drawn from --seed) is a `minority` ((N-1)/2 members) or a `majority`
    /// (N/2+1). Takes --target random, leader or follower.
    #[arg(long, value_enum, env = "CHAOS_MONKEY_SPLIT")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<Split>,

    /// --fault delay: added one-way latency on each packet between the
    /// victim and the other members (held in the monkey through an
    /// NFQUEUE), such as 200ms. Default 200ms.
    #[arg(long, value_name = "DURATION", env = "CHAOS_MONKEY_LATENCY",
          value_parser = positive_duration, allow_hyphen_values = true)]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "text::opt_positive_duration",
        serialize_with = "text::write_opt_duration"
    )]
    pub latency: Option<Duration>,

    /// --fault delay: random variation of --latency, such as 50ms (each
    /// packet's drawn from --seed; not the same as --jitter, which delays
    /// ticks). Default 0s.
    #[arg(long, value_name = "DURATION", env = "CHAOS_MONKEY_LATENCY_JITTER",
          value_parser = duration, allow_hyphen_values = true)]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "text::opt_duration",
        serialize_with = "text::write_opt_duration"
    )]
    pub latency_jitter: Option<Duration>,

    /// --fault loss: share of packets between the victim and the other
    /// members dropped at random, such as 30% (above 0, at most 100).
    /// Default 30%.
    #[arg(long, value_name = "PERCENT", env = "CHAOS_MONKEY_LOSS",
          value_parser = percent, allow_hyphen_values = true)]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "text::opt_percent"
    )]
    pub loss: Option<f64>,

    /// --fault corrupt: what is damaged: `db` (the last byte of a live value
    /// in the bbolt database: silent data corruption; the member starts,
    /// its KV hash differs, and etcd's periodic check,
    /// --experimental-corrupt-check-time, raises a CORRUPT alarm) or `wal` (a
    /// byte of a record in the newest WAL file: etcd refuses to start, "crc
    /// mismatch"). Default db.
    #[arg(long, value_enum, env = "CHAOS_MONKEY_CORRUPT")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupt: Option<CorruptPart>,

    /// --fault disk-full: the most bytes written before giving up when
    /// etcd has not raised NOSPACE, such as 4GiB (etcd's default quota is
    /// 2GiB). Default 4GiB.
    #[arg(long, value_name = "SIZE", env = "CHAOS_MONKEY_FILL_MAX",
          value_parser = size, allow_hyphen_values = true)]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "text::opt_size",
        serialize_with = "text::write_opt_size"
    )]
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skew: Option<Skew>,

    /// --fault slow-disk: the most write operations per second the victim
    /// may issue to the disk holding its data folder (each fdatasync takes
    /// a few). Default 20 (an fdatasync then takes ~100 ms).
    #[arg(long, value_name = "N", env = "CHAOS_MONKEY_DISK_IOPS", value_parser = disk_iops,
          allow_hyphen_values = true)]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "text::opt_disk_iops"
    )]
    pub disk_iops: Option<u32>,

    /// The most members one tick hits (caps minority and majority).
    #[arg(long, value_name = "N", env = "CHAOS_MONKEY_MAX_KILL", value_parser = at_least_one,
          allow_hyphen_values = true)]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "text::opt_at_least_one"
    )]
    pub max_kill: Option<usize>,

    /// Chance that a tick fires, from 0 to 1 (drawn from --seed).
    #[arg(long, value_name = "P", default_value = "1", env = "CHAOS_MONKEY_PROBABILITY",
          value_parser = probability, allow_hyphen_values = true)]
    #[serde(default = "always", deserialize_with = "text::probability")]
    pub probability: f64,

    /// Spare members started less than this long ago, such as 1m.
    #[arg(long, value_name = "DURATION", default_value = "0s", env = "CHAOS_MONKEY_MIN_AGE",
          value_parser = duration, allow_hyphen_values = true)]
    #[serde(
        default,
        deserialize_with = "text::duration",
        serialize_with = "text::write_duration"
    )]
    pub min_age: Duration,

    /// Random extra delay before each tick, in [0, DURATION) (drawn from --seed).
    #[arg(long, value_name = "DURATION", default_value = "0s", env = "CHAOS_MONKEY_JITTER",
          value_parser = duration, allow_hyphen_values = true)]
    #[serde(
        default,
        deserialize_with = "text::duration",
        serialize_with = "text::write_duration"
    )]
    pub jitter: Duration,

    /// Seed of every random choice (a whole number from 0 to 2^64-1): the
    /// same seed and clusters give the same victims. Default: a random seed,
    /// printed at start.
    #[arg(long, value_name = "N", env = "CHAOS_MONKEY_SEED", value_parser = seed,
          allow_hyphen_values = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,

    /// Log what would be done, touching nothing (not even the operator).
    #[arg(long, env = "CHAOS_MONKEY_DRY_RUN")]
    #[serde(default)]
    pub dry_run: bool,

    /// Stop after this many faults (resumes not counted; a paused member is
    /// resumed after --pause-for first).
    #[arg(long, value_name = "N", env = "CHAOS_MONKEY_MAX_FAULTS", value_parser = at_least_one,
          allow_hyphen_values = true)]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "text::opt_at_least_one"
    )]
    pub max_faults: Option<usize>,
}

fn random() -> Target {
    Target::Random
}

fn kill() -> FaultKind {
    FaultKind::Kill
}

fn kill_interval() -> Duration {
    DEFAULT_KILL_INTERVAL
}

fn always() -> f64 {
    1.0
}

impl Default for Chaos {
    /// Every flag left out (the defaults `--help` shows).
    fn default() -> Self {
        Chaos {
            target: random(),
            allow_quorum_loss: false,
            fault: kill(),
            kill_interval: kill_interval(),
            start_after: Duration::ZERO,
            pause_for: None,
            fault_for: None,
            split: None,
            latency: None,
            latency_jitter: None,
            loss: None,
            corrupt: None,
            fill_max: None,
            skew: None,
            disk_iops: None,
            max_kill: None,
            probability: always(),
            min_age: Duration::ZERO,
            jitter: Duration::ZERO,
            seed: None,
            dry_run: false,
            max_faults: None,
        }
    }
}

impl Chaos {
    /// The options given that `--fault` does not take, in flag order: each
    /// flag (`--fault-for`) with the faults it belongs to. The monkey
    /// refuses the first; the soak names every one as a field.
    pub fn options_for_other_faults(&self) -> Vec<(&'static str, &'static str)> {
        use FaultKind as F;
        let f = self.fault;
        let table: [(&str, bool, bool, &str); 10] = [
            (
                "--pause-for",
                self.pause_for.is_some(),
                f == F::Pause,
                "pause",
            ),
            (
                "--fault-for",
                self.fault_for.is_some(),
                f.lasting(),
                "partition, delay, loss, blackhole-until-snapshot, clock-skew or slow-disk",
            ),
            (
                "--skew",
                self.skew.is_some(),
                f == F::ClockSkew,
                "clock-skew",
            ),
            (
                "--disk-iops",
                self.disk_iops.is_some(),
                f == F::SlowDisk,
                "slow-disk",
            ),
            (
                "--split",
                self.split.is_some(),
                f == F::Partition,
                "partition",
            ),
            ("--latency", self.latency.is_some(), f == F::Delay, "delay"),
            (
                "--latency-jitter",
                self.latency_jitter.is_some(),
                f == F::Delay,
                "delay",
            ),
            ("--loss", self.loss.is_some(), f == F::Loss, "loss"),
            (
                "--corrupt",
                self.corrupt.is_some(),
                f == F::Corrupt,
                "corrupt",
            ),
            (
                "--fill-max",
                self.fill_max.is_some(),
                f == F::DiskFull,
                "disk-full",
            ),
        ];
        table
            .into_iter()
            .filter(|(_, given, fits, _)| *given && !fits)
            .map(|(flag, _, _, wants)| (flag, wants))
            .collect()
    }

    /// The flags that parse back into `self`: every value given, the
    /// options left out when unset, the switches when on.
    pub fn to_args(&self) -> Vec<String> {
        let Chaos {
            target,
            allow_quorum_loss,
            fault,
            kill_interval,
            start_after,
            pause_for,
            fault_for,
            split,
            latency,
            latency_jitter,
            loss,
            corrupt,
            fill_max,
            skew,
            disk_iops,
            max_kill,
            probability,
            min_age,
            jitter,
            seed,
            dry_run,
            max_faults,
        } = self;
        let d = |d: &Duration| duration_text(*d);
        let given: [(&str, Option<String>); 20] = [
            ("target", Some(target.as_str().into())),
            ("fault", Some(fault.as_str().into())),
            ("kill-interval", Some(d(kill_interval))),
            ("start-after", Some(d(start_after))),
            ("pause-for", pause_for.as_ref().map(d)),
            ("fault-for", fault_for.as_ref().map(d)),
            ("split", split.map(|s| s.as_str().into())),
            ("latency", latency.as_ref().map(d)),
            ("latency-jitter", latency_jitter.as_ref().map(d)),
            ("loss", loss.map(|l| format!("{l}%"))),
            ("corrupt", corrupt.map(|c| c.as_str().into())),
            ("fill-max", fill_max.map(|n| format!("{n}B"))),
            ("skew", skew.map(|s| s.to_string())),
            ("disk-iops", disk_iops.map(|n| n.to_string())),
            ("max-kill", max_kill.map(|n| n.to_string())),
            ("probability", Some(probability.to_string())),
            ("min-age", Some(d(min_age))),
            ("jitter", Some(d(jitter))),
            ("seed", seed.map(|n| n.to_string())),
            ("max-faults", max_faults.map(|n| n.to_string())),
        ];
        let mut out = Vec::new();
        for (flag, value) in given {
            if let Some(v) = value {
                out.push(format!("--{flag}"));
                out.push(v);
            }
        }
        for (flag, on) in [
            ("allow-quorum-loss", allow_quorum_loss),
            ("dry-run", dry_run),
        ] {
            if *on {
                out.push(format!("--{flag}"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
