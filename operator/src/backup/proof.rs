//! Restore checks ("a backup that never restored is not good"): what a
//! check found when a backup, restored into a scratch member, was hashed
//! (etcd's `HashKV`) at its revision beside a live member of its cluster.
//! The judgement is a pure function of the two hashes ([`judge`]); the
//! restore and the scratch member are the platform's
//! ([`crate::platform::local::restore_check`]).

use serde::{Deserialize, Serialize};

use crate::plan::KvHash;

/// What a restore check concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    /// The restored backup hashes as the live cluster does at its revision.
    Verified,
    /// It hashes differently: the backup does not hold what the cluster
    /// held at that revision.
    Mismatch,
    /// No comparison was possible (the live cluster compacted past the
    /// backup's revision); says nothing either way.
    Unverifiable,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Verified => "verified",
            Verdict::Mismatch => "mismatch",
            Verdict::Unverifiable => "unverifiable",
        })
    }
}

/// One restore check of one backup, kept in its meta.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestoreCheck {
    /// When it ran (RFC 3339, UTC).
    pub time: String,
    /// What it concluded.
    pub result: Verdict,
    /// The revision hashed (the backup's).
    pub revision: i64,
    /// The restored backup's `HashKV`, when it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_hash: Option<u32>,
    /// The live member's `HashKV`, when it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_hash: Option<u32>,
    /// The live member asked.
    pub live_member: String,
    /// In words, for the listing and the log.
    pub message: String,
}

/// Compares the scratch member's hash with the live member's, both at the
/// backup's `revision`. Hashes count only with the same compaction
/// revision behind them: the caller compacts the scratch member to the
/// live one's first ([`compact_to`]).
pub fn judge(revision: i64, restored: KvHash, live: KvHash) -> (Verdict, String) {
    if restored.revision != revision || live.revision != revision {
        return (
            Verdict::Unverifiable,
            format!(
                "the hashes are of revisions {} and {}, not of the backup's {revision}",
                restored.revision, live.revision
            ),
        );
    }
    if restored.compact_revision != live.compact_revision {
        return (
            Verdict::Unverifiable,
            format!(
                "the restored backup is compacted at revision {} and the live member at {}: \
                 their hashes cannot be compared",
                restored.compact_revision, live.compact_revision
            ),
        );
    }
    if restored.hash == live.hash {
        (
            Verdict::Verified,
            format!(
                "restored, and its KV hash at revision {revision} is the live cluster's ({})",
                live.hash
            ),
        )
    } else {
        (
            Verdict::Mismatch,
            format!(
                "restored, but its KV hash at revision {revision} is {} where the live \
                 cluster's is {}: the backup does not hold what the cluster held",
                restored.hash, live.hash
            ),
        )
    }
}

/// The revision to compact the scratch member to before hashing, so that
/// both hashes cover the same history: the live member's compaction, when
/// it is ahead of the restored one's and not past the backup's revision.
pub fn compact_to(revision: i64, restored_compact: i64, live_compact: i64) -> Option<i64> {
    (live_compact > restored_compact && live_compact <= revision).then_some(live_compact)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn h(revision: i64, compact_revision: i64, hash: u32) -> KvHash {
        KvHash {
            revision,
            compact_revision,
            hash,
        }
    }

    #[test]
    fn equal_hashes_verify_and_different_ones_mismatch() {
        assert_eq!(judge(9, h(9, 0, 7), h(9, 0, 7)).0, Verdict::Verified);
        let (v, m) = judge(9, h(9, 0, 7), h(9, 0, 8));
        assert_eq!(v, Verdict::Mismatch);
        assert!(m.contains('7') && m.contains('8'), "{m}");
        assert_eq!(judge(9, h(9, 2, 7), h(9, 3, 7)).0, Verdict::Unverifiable);
        assert_eq!(judge(9, h(8, 0, 7), h(9, 0, 7)).0, Verdict::Unverifiable);
    }

    #[test]
    fn a_verdict_reads_back_from_a_meta() {
        let json = serde_json::json!({"time": "t", "result": "mismatch", "revision": 4,
            "backupHash": 1, "liveHash": 2, "liveMember": "m", "message": "x"});
        let c: RestoreCheck = serde_json::from_value(json).expect("a check");
        assert_eq!(c.result, Verdict::Mismatch);
        assert_eq!(c.live_hash, Some(2));
    }

    proptest! {
        /// Verified only when both hashes cover the same history and agree;
        /// the scratch member is never compacted past the backup's revision
        /// nor backwards.
        #[test]
        fn verified_needs_the_same_history(rev in 1i64..50, c1 in 0i64..60, c2 in 0i64..60,
                                           a in 0u32..4, b in 0u32..4) {
            let (v, _) = judge(rev, h(rev, c1, a), h(rev, c2, b));
            prop_assert_eq!(v == Verdict::Verified, c1 == c2 && a == b);
            prop_assert_eq!(v == Verdict::Mismatch, c1 == c2 && a != b);
            if let Some(to) = compact_to(rev, c1, c2) {
                prop_assert!(to > c1 && to <= rev && to == c2);
            }
        }
    }
}
