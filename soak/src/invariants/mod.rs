//! Invariants: pure checkers over recorded histories. Each returns the
//! violations it finds, with the time of each; none does I/O.
//!
//! | check | module |
//! |---|---|
//! | membership equals the spec, members ready and agreeing | [`health`], [`recovery`] |
//! | recovery time per fault, availability | [`recovery`] |
//! | at most one leader per term | [`leaders`] |
//! | revisions never go back, reads are not stale | [`revisions`] |
//! | KV hashes equal at checkpoints | [`hash`] |
//! | backup age | [`backup`] |
//! | the continuous backup chain's age, no hole in the store's chains | [`chain`] |
//! | restore checks ran and verified | [`restore_check`] |
//! | no acknowledged write lost | [`lost`] |
//! | the history is linearizable | [`crate::lin`] |
//! | watches are ordered, complete, match the history and the end | [`crate::watch::check`] |
//! | a standby's lag and state, and its data equal to the primary's at the end | [`standby`] |

pub mod backup;
pub mod chain;
pub mod hash;
pub mod health;
pub mod leaders;
pub mod lost;
pub mod promotion;
pub mod recovery;
pub mod restore_check;
pub mod revisions;
pub mod standby;
pub mod start;

use serde::Serialize;

use crate::history::Ms;

/// Which invariant or bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    /// Membership differed from the spec for longer than recoveryMax.
    Membership,
    /// A fault's recovery exceeded recoveryMax, or never happened.
    Recovery,
    /// The p99 of recovery times exceeded recoveryP99.
    RecoveryP99,
    /// Too little of the run had quorum writes succeeding.
    Availability,
    /// Two leaders in one raft term.
    LeaderPerTerm,
    /// A client session saw the revision go back.
    Revision,
    /// A read returned older data than a write acknowledged before it.
    StaleRead,
    /// Members' KV hashes differ at one revision.
    KvHash,
    /// The newest backup got older than maxBackupAge.
    BackupAge,
    /// The store lagged the cluster's changes longer than maxChainAge, or
    /// a chain in the store has a hole.
    ChainAge,
    /// A scheduled restore check did not verify its backup, or fewer ran
    /// than bounds.restoreChecks.min.
    RestoreCheck,
    /// Acknowledged writes missing at the end.
    LostWrites,
    /// Fewer faults injected than bounds.minFaults.
    Faults,
    /// The history of client operations is not linearizable.
    Linearizability,
    /// A watch broke a guarantee (order, gaps, events not in the history,
    /// replay different from the final state).
    Watch,
    /// The standby lagged more than standby.maxLag, was Diverged or
    /// Stopped, or did not hold the primary's data at the end.
    Standby,
    /// After the primary's loss: a write it acknowledged at or below the
    /// promoted standby's revision missing there, more writes lost past it
    /// than bounds.lostOnPromotion, or no promotion.
    Promotion,
    /// The run itself could not be completed (final checks impossible).
    Run,
}

impl Check {
    /// The name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Check::Membership => "membership",
            Check::Recovery => "recovery",
            Check::RecoveryP99 => "recovery-p99",
            Check::Availability => "availability",
            Check::LeaderPerTerm => "leader-per-term",
            Check::Revision => "revision-monotonic",
            Check::StaleRead => "stale-read",
            Check::KvHash => "kv-hash",
            Check::BackupAge => "backup-age",
            Check::ChainAge => "chain-age",
            Check::RestoreCheck => "restore-check",
            Check::LostWrites => "lost-writes",
            Check::Faults => "faults",
            Check::Linearizability => "linearizability",
            Check::Watch => "watch",
            Check::Standby => "standby",
            Check::Promotion => "promotion",
            Check::Run => "run",
        }
    }
}

/// One broken invariant or bound.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// When (unix ms).
    pub at: Ms,
    /// What.
    pub check: Check,
    /// The details, in words.
    pub message: String,
}

impl Violation {
    /// A violation.
    pub fn new(at: Ms, check: Check, message: impl Into<String>) -> Self {
        Violation {
            at,
            check,
            message: message.into(),
        }
    }
}

/// Nearest-rank percentile of `values` (sorted or not); `None` when empty.
pub fn percentile(values: &[u64], q: f64) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let n = v.len();
    // ceil(q * n) as a 1-based rank, clamped to 1..=n.
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    v.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        assert_eq!(percentile(&[], 0.99), None);
        assert_eq!(percentile(&[5], 0.99), Some(5));
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.99), Some(99));
        assert_eq!(percentile(&v, 0.5), Some(50));
        assert_eq!(percentile(&v, 1.0), Some(100));
        assert_eq!(percentile(&[3, 1, 2], 0.0), Some(1));
    }
}
