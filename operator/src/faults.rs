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
}

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
}
