//! The kinds of fault and their options as values: `--fault`, `--split`,
//! `--corrupt` on the command line, and the same names in a soak scenario.

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// What is done to a victim (also a soak scenario's `chaos.fault`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// SIGKILL / pod deleted with grace period 0.
    Kill,
    /// Killed and its data wiped.
    Destroy,
    /// SIGSTOP, then SIGCONT after --pause-for.
    Pause,
    /// Cut off from the other members for --fault-for.
    Partition,
    /// Latency on its links to the other members for --fault-for.
    Delay,
    /// Packet loss on its links to the other members for --fault-for.
    Loss,
    /// Cut off until the leader compacted its log past it.
    BlackholeUntilSnapshot,
    /// Bytes flipped in its db or WAL while stopped.
    Corrupt,
    /// The keyspace filled until etcd raises NOSPACE.
    DiskFull,
    /// Its wall clock shifted by --skew for --fault-for (its vDSO
    /// `clock_gettime` patched through ptrace; x86_64 Linux, local only).
    ClockSkew,
    /// Its disk writes throttled to --disk-iops for --fault-for (a cgroup v1
    /// blkio cgroup; local only): fsync gets slow.
    SlowDisk,
}

impl FaultKind {
    /// Its name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Destroy => "destroy",
            FaultKind::Pause => "pause",
            FaultKind::Partition => "partition",
            FaultKind::Delay => "delay",
            FaultKind::Loss => "loss",
            FaultKind::BlackholeUntilSnapshot => "blackhole-until-snapshot",
            FaultKind::Corrupt => "corrupt",
            FaultKind::DiskFull => "disk-full",
            FaultKind::ClockSkew => "clock-skew",
            FaultKind::SlowDisk => "slow-disk",
        }
    }

    /// Whether it is a network fault (kernel rules, healed later).
    pub fn network(self) -> bool {
        matches!(
            self,
            FaultKind::Partition
                | FaultKind::Delay
                | FaultKind::Loss
                | FaultKind::BlackholeUntilSnapshot
        )
    }

    /// Whether it lasts on its victims alone and is healed later (no
    /// links between members involved): clock-skew, slow-disk.
    pub fn on_member(self) -> bool {
        matches!(self, FaultKind::ClockSkew | FaultKind::SlowDisk)
    }

    /// Whether it lasts for --fault-for (or until its condition).
    pub fn lasting(self) -> bool {
        self.network() || self.on_member()
    }
}

/// A shift of a member's wall clock (`--skew`): `30s`, `-1m`, `+500ms`;
/// at most a year either way, never zero. Whole nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Skew(i64);

/// The largest skew taken: a year.
pub const MAX_SKEW_SECS: i64 = 366 * 24 * 3600;

impl Skew {
    /// A skew of `nanos` nanoseconds (ahead when positive).
    pub fn from_nanos(nanos: i64) -> Option<Skew> {
        (nanos != 0 && nanos.unsigned_abs() <= MAX_SKEW_SECS.unsigned_abs() * 1_000_000_000)
            .then_some(Skew(nanos))
    }

    /// Nanoseconds, ahead when positive.
    pub fn nanos(self) -> i64 {
        self.0
    }

    /// Whole seconds rounded down and the nanoseconds left, in [0, 1e9):
    /// -1.5 s is (-2, 500_000_000).
    pub fn split(self) -> (i64, u32) {
        let secs = self.0.div_euclid(1_000_000_000);
        let nanos = u32::try_from(self.0.rem_euclid(1_000_000_000)).unwrap_or(0);
        (secs, nanos)
    }
}

impl std::str::FromStr for Skew {
    type Err = String;

    fn from_str(s: &str) -> Result<Skew, String> {
        const HELP: &str = "expected a shift such as 30s, -1m or +500ms (not zero, at most a year)";
        let t = s.trim();
        let (neg, rest) = match t.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, t.strip_prefix('+').unwrap_or(t)),
        };
        if rest.starts_with(['-', '+']) {
            return Err(HELP.into());
        }
        let d = humantime::parse_duration(rest.trim()).map_err(|e| format!("{HELP} ({e})"))?;
        let nanos = i64::try_from(d.as_nanos()).map_err(|_| HELP.to_string())?;
        Skew::from_nanos(if neg { -nanos } else { nanos }).ok_or_else(|| HELP.into())
    }
}

impl std::fmt::Display for Skew {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let d = std::time::Duration::from_nanos(self.0.unsigned_abs());
        write!(f, "{sign}{}", humantime::format_duration(d))
    }
}

impl Serialize for Skew {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Skew {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Skew, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// How `--split` cuts a cluster: the size of the victim's side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// (N-1)/2 members: the other side keeps quorum.
    Minority,
    /// N/2+1 members: the victim's side keeps quorum.
    Majority,
}

impl Split {
    /// Its name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Split::Minority => "minority",
            Split::Majority => "majority",
        }
    }
}

/// What `--fault corrupt` damages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CorruptPart {
    /// The bbolt database (`member/snap/db`).
    Db,
    /// The newest WAL file (`member/wal/*.wal`).
    Wal,
}

impl CorruptPart {
    /// Its name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            CorruptPart::Db => "db",
            CorruptPart::Wal => "wal",
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn skews_parse_with_a_sign() {
        assert_eq!("30s".parse::<Skew>().map(Skew::nanos), Ok(30_000_000_000));
        assert_eq!("+30s".parse::<Skew>().map(Skew::nanos), Ok(30_000_000_000));
        assert_eq!("-1m".parse::<Skew>().map(Skew::nanos), Ok(-60_000_000_000));
        assert_eq!(
            "-1500ms".parse::<Skew>().map(Skew::split),
            Ok((-2, 500_000_000))
        );
        for bad in ["0s", "", "-", "--5s", "+-5s", "soon", "400days", "-400days"] {
            assert!(bad.parse::<Skew>().is_err(), "{bad}");
        }
        let s: Skew = "-30s".parse().expect("parses");
        assert_eq!(s.to_string(), "-30s");
        assert_eq!(serde_json::to_string(&s).expect("json"), "\"-30s\"");
    }

    proptest! {
        #[test]
        fn skew_parsing_never_panics_and_round_trips(s in "\\PC{0,16}") {
            if let Ok(k) = s.parse::<Skew>() {
                prop_assert_eq!(k.to_string().parse::<Skew>(), Ok(k));
            }
        }

        #[test]
        fn split_adds_back_up(n in -MAX_SKEW_SECS * 1_000_000_000..MAX_SKEW_SECS * 1_000_000_000) {
            if let Some(k) = Skew::from_nanos(n) {
                let (s, ns) = k.split();
                prop_assert!(ns < 1_000_000_000);
                prop_assert_eq!(s * 1_000_000_000 + i64::from(ns), n);
            }
        }
    }
}
