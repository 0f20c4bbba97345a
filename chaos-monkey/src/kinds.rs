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
    /// Refused with the reason: etcd reads the clock through the vDSO,
    /// which libfaketime cannot shift.
    #[value(hide = true)]
    ClockSkew,
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
