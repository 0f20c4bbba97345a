//! The fault log: one JSON line per fault the chaos monkey injects, read by
//! the soak runner to measure recovery time from each fault.
//!
//! ```json
//! {"time":"2026-12-02T12:00:00.123Z","unixMs":1796212800123,"fault":"kill",
//!  "cluster":"demo","member":"demo-1","role":"leader","outcome":"injected"}
//! ```

use std::io::{self, BufRead, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// What was done to a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fault {
    /// SIGKILL of the process (pod deleted with grace period 0).
    Kill,
    /// Killed and its data wiped (a lost node, an emptyDir).
    Destroy,
    /// SIGSTOP; a `resume` record follows.
    Pause,
    /// SIGCONT after a pause.
    Resume,
    /// Cut off from the other members (their peer and client traffic both
    /// ways); a `heal` record follows.
    Partition,
    /// Its links to the other members slowed (latency, jitter); a `heal`
    /// record follows.
    Delay,
    /// Packets on its links to the other members dropped at random; a
    /// `heal` record follows.
    Loss,
    /// Cut off until the leader compacted its log past it, so etcd must
    /// send it a snapshot; a `heal` record follows.
    #[serde(rename = "blackhole-until-snapshot")]
    BlackholeUntilSnapshot,
    /// Bytes flipped in its db or WAL while it was stopped; then it is
    /// left to be started again.
    Corrupt,
    /// The keyspace filled through it until etcd raised its NOSPACE alarm.
    #[serde(rename = "disk-full")]
    DiskFull,
    /// Its wall clock (CLOCK_REALTIME) shifted by patching its vDSO; a
    /// `heal` record follows.
    #[serde(rename = "clock-skew")]
    ClockSkew,
    /// Its disk writes throttled (a blkio cgroup), so fsync is slow; a
    /// `heal` record follows.
    #[serde(rename = "slow-disk")]
    SlowDisk,
    /// The end of a partition, delay, loss, blackhole, clock skew or slow
    /// disk: its rules removed, the clock or disk restored.
    Heal,
}

impl Fault {
    /// Its name in the fault log.
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::Destroy => "destroy",
            Fault::Pause => "pause",
            Fault::Resume => "resume",
            Fault::Partition => "partition",
            Fault::Delay => "delay",
            Fault::Loss => "loss",
            Fault::BlackholeUntilSnapshot => "blackhole-until-snapshot",
            Fault::Corrupt => "corrupt",
            Fault::DiskFull => "disk-full",
            Fault::ClockSkew => "clock-skew",
            Fault::SlowDisk => "slow-disk",
            Fault::Heal => "heal",
        }
    }

    /// Whether a later record ends it (`resume` after `pause`, `heal`
    /// after a network fault): its recovery counts from that end.
    pub fn lasting(self) -> bool {
        matches!(
            self,
            Fault::Pause
                | Fault::Partition
                | Fault::Delay
                | Fault::Loss
                | Fault::BlackholeUntilSnapshot
                | Fault::ClockSkew
                | Fault::SlowDisk
        )
    }

    /// Whether it ends a lasting fault (`resume`, `heal`).
    pub fn is_end(self) -> bool {
        matches!(self, Fault::Resume | Fault::Heal)
    }

    /// The fault named `name` in the fault log.
    pub fn from_name(name: &str) -> Option<Fault> {
        ALL.iter().copied().find(|f| f.as_str() == name)
    }
}

/// Every fault kind.
pub const ALL: [Fault; 13] = [
    Fault::Kill,
    Fault::Destroy,
    Fault::Pause,
    Fault::Resume,
    Fault::Partition,
    Fault::Delay,
    Fault::Loss,
    Fault::BlackholeUntilSnapshot,
    Fault::Corrupt,
    Fault::DiskFull,
    Fault::ClockSkew,
    Fault::SlowDisk,
    Fault::Heal,
];

/// The member's role when the fault hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The raft leader.
    Leader,
    /// A voting follower.
    Follower,
    /// A non-voting learner.
    Learner,
    /// Not known (no member answered).
    Unknown,
}

/// One line of the fault log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultRecord {
    /// When the fault was injected (RFC 3339, milliseconds, UTC).
    pub time: String,
    /// The same instant in milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// What was done.
    pub fault: Fault,
    /// Cluster name.
    pub cluster: String,
    /// Member name.
    pub member: String,
    /// Its role at the time.
    pub role: Role,
    /// `injected`, `dry-run`, or `failed: REASON`.
    pub outcome: String,
}

impl FaultRecord {
    /// A record stamped now.
    pub fn now(fault: Fault, cluster: &str, member: &str, role: Role, outcome: &str) -> Self {
        let now = SystemTime::now();
        FaultRecord {
            time: humantime::format_rfc3339_millis(now).to_string(),
            unix_ms: u64::try_from(
                now.duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_millis(),
            )
            .unwrap_or(u64::MAX),
            fault,
            cluster: cluster.into(),
            member: member.into(),
            role,
            outcome: outcome.into(),
        }
    }

    /// Whether the fault was really injected.
    pub fn injected(&self) -> bool {
        self.outcome == "injected"
    }
}

/// Appends one record as a JSON line and flushes it.
pub fn append(out: &mut impl Write, record: &FaultRecord) -> io::Result<()> {
    serde_json::to_writer(&mut *out, record)?;
    out.write_all(b"\n")?;
    out.flush()
}

/// Reads a fault log; a partly written last line is skipped.
pub fn read(path: &Path) -> io::Result<Vec<FaultRecord>> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for line in io::BufReader::new(file).lines() {
        if let Ok(r) = serde_json::from_str(&line?) {
            out.push(r);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_torn_last_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("faults.jsonl");
        let mut f = std::fs::File::create(&path).expect("create");
        let r = FaultRecord::now(Fault::Kill, "demo", "demo-1", Role::Leader, "injected");
        append(&mut f, &r).expect("append");
        f.write_all(b"{\"time\":").expect("torn line");
        let back = read(&path).expect("read");
        assert_eq!(back, vec![r.clone()]);
        let line = serde_json::to_string(&r).expect("json");
        assert!(line.contains("\"fault\":\"kill\"") && line.contains("\"role\":\"leader\""));
        assert!(line.contains("\"unixMs\":"));
    }

    #[test]
    fn fault_names_are_the_serialized_ones() {
        for f in ALL {
            let json = serde_json::to_string(&f).expect("json");
            assert_eq!(json, format!("\"{}\"", f.as_str()));
            assert_eq!(Fault::from_name(f.as_str()), Some(f));
            assert!(!(f.lasting() && f.is_end()), "{f:?}");
        }
        assert_eq!(Fault::from_name("nap"), None);
    }
}
