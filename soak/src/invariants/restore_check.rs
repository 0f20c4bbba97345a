//! Restores proven during the run: the operator's scheduled restore checks
//! (`spec.backup.restoreCheck`), read from `status.backup.lastRestoreCheck`
//! at every probe, must have run at least `min` times, and every one must
//! have found the restored backup's KV hash equal to the live cluster's
//! (`verified`). A `mismatch` (the backup does not hold what the cluster
//! held), a `failed` check (it could not run) and an `unverifiable` one
//! (nothing was compared) are each a violation naming the backup and what
//! the operator said (both hashes, or why there was no comparison).
//!
//! One exception: a `failed` check followed by a `verified` one. The
//! operator asks one live member for its hash, seconds after it chose it;
//! under chaos that member is sometimes killed in between, the check fails
//! without saying anything of the backup, and the operator tries again
//! soon. Such a failure is counted (`retried`), not a violation; a failure
//! that no verified check follows is one.
//!
//! One check is one distinct (backup, time) pair. The status keeps only
//! the last check, and probes come every 100-250 ms while a check restores
//! a snapshot into a scratch member (seconds), so no check goes unseen
//! while the status is readable.

use std::collections::BTreeMap;

use super::{Check, Violation};
use crate::history::{Ms, RestoreCheckSeen, Sample};

/// The result of a check that proved its backup.
pub const VERIFIED: &str = "verified";
/// The result of a check that could not run.
pub const FAILED: &str = "failed";

/// What the restore-check bound found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Distinct checks seen.
    pub checks: usize,
    /// Of them, verified.
    pub verified: usize,
    /// Failed checks the next check verified (not violations).
    pub retried: usize,
    /// Checks per result (`verified`, `mismatch`, `failed`, ...).
    pub by_result: BTreeMap<String, usize>,
    /// One per check that did not verify, and one when fewer than `min` ran.
    pub violations: Vec<Violation>,
}

impl Outcome {
    /// The results that were not `verified`, in words: "1 mismatch, 2
    /// failed (2 retried and verified)".
    pub fn others(&self) -> String {
        self.by_result
            .iter()
            .filter(|(r, _)| r.as_str() != VERIFIED)
            .map(|(r, n)| {
                if r == FAILED && self.retried > 0 {
                    format!("{n} {r} ({} retried and verified)", self.retried)
                } else {
                    format!("{n} {r}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Checks the samples of a run that ended at `end`: at least `min` checks,
/// each verified.
pub fn check(samples: &[Sample], min: u64, end: Ms) -> Outcome {
    let mut out = Outcome::default();
    let mut seen: Vec<&RestoreCheckSeen> = Vec::new();
    // A failure waiting for the next check: (when seen, the violation).
    let mut pending: Option<Violation> = None;
    for s in samples {
        let Some(c) = s.published.as_ref().and_then(|p| p.restore_check.as_ref()) else {
            continue;
        };
        if seen
            .iter()
            .any(|x| x.backup == c.backup && x.time == c.time)
        {
            continue;
        }
        seen.push(c);
        out.checks += 1;
        *out.by_result.entry(c.result.clone()).or_insert(0) += 1;
        let failure = pending.take();
        if c.result == VERIFIED {
            out.verified += 1;
            out.retried += usize::from(failure.is_some());
            continue;
        }
        out.violations.extend(failure);
        let v = Violation::new(
            s.at,
            Check::RestoreCheck,
            format!(
                "the restore check of backup {} at {} found {}: {}",
                c.backup, c.time, c.result, c.message
            ),
        );
        if c.result == FAILED {
            pending = Some(v);
        } else {
            out.violations.push(v);
        }
    }
    out.violations.extend(pending);
    if u64::try_from(out.checks).unwrap_or(u64::MAX) < min {
        out.violations.push(Violation::new(
            end,
            Check::RestoreCheck,
            format!(
                "{} restore checks ran, fewer than bounds.restoreChecks.min {min}",
                out.checks
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Published;

    fn sample(at: Ms, check: Option<(&str, &str, &str)>) -> Sample {
        let mut s = Sample::empty(at, 3);
        s.published = Some(Published {
            restore_check: check.map(|(backup, time, result)| RestoreCheckSeen {
                backup: backup.into(),
                time: time.into(),
                result: result.into(),
                message: format!("backup hash 0x1 and live hash 0x{}", backup.len()),
            }),
            ..Published::default()
        });
        s
    }

    #[test]
    fn each_check_counts_once_however_often_it_is_seen() {
        let mut samples: Vec<Sample> = (0..10).map(|i| sample(i, None)).collect();
        samples.extend((10..20).map(|i| sample(i, Some(("b1", "t1", VERIFIED)))));
        // The same backup checked again later is a second check.
        samples.extend((20..30).map(|i| sample(i, Some(("b1", "t2", VERIFIED)))));
        samples.extend((30..40).map(|i| sample(i, Some(("b2", "t3", VERIFIED)))));
        // A sample without a readable status in between changes nothing.
        samples.push(sample(40, None));
        samples.push(sample(41, Some(("b2", "t3", VERIFIED))));
        let o = check(&samples, 3, 99);
        assert_eq!((o.checks, o.verified), (3, 3), "{o:?}");
        assert!(o.violations.is_empty(), "{:?}", o.violations);
        assert_eq!(o.others(), "");
    }

    #[test]
    fn a_mismatch_or_a_failed_check_is_a_violation_naming_the_backup() {
        let samples = vec![
            sample(1, Some(("b1", "t1", VERIFIED))),
            sample(2, Some(("b2", "t2", "mismatch"))),
            sample(3, Some(("b2", "t2", "mismatch"))),
            sample(4, Some(("b3", "t3", "failed"))),
            sample(5, Some(("b4", "t4", "unverifiable"))),
        ];
        let o = check(&samples, 1, 99);
        assert_eq!((o.checks, o.verified), (4, 1));
        assert_eq!(o.violations.len(), 3, "{:?}", o.violations);
        let v = &o.violations[0];
        assert_eq!((v.at, v.check), (2, Check::RestoreCheck));
        assert!(
            v.message.contains("backup b2") && v.message.contains("mismatch"),
            "{}",
            v.message
        );
        assert!(v.message.contains("live hash"), "the hashes: {}", v.message);
        assert!(o.violations[1].message.contains("b3"));
        assert_eq!(o.others(), "1 failed, 1 mismatch, 1 unverifiable");
    }

    #[test]
    fn a_failed_check_the_next_check_verifies_is_counted_not_a_violation() {
        let samples = vec![
            sample(1, Some(("b1", "t1", FAILED))),
            sample(2, Some(("b1", "t2", VERIFIED))),
            // Failed twice in a row: the first is not retried.
            sample(3, Some(("b2", "t3", FAILED))),
            sample(4, Some(("b2", "t4", FAILED))),
            sample(5, Some(("b2", "t5", VERIFIED))),
            // The last check failed: nothing retried it.
            sample(6, Some(("b3", "t6", FAILED))),
        ];
        let o = check(&samples, 1, 99);
        assert_eq!((o.checks, o.verified, o.retried), (6, 2, 2), "{o:?}");
        let at: Vec<Ms> = o.violations.iter().map(|v| v.at).collect();
        assert_eq!(at, vec![3, 6], "{:?}", o.violations);
        assert_eq!(o.others(), "4 failed (2 retried and verified)");
        // A mismatch after a failure: both are violations.
        let o = check(
            &[
                sample(1, Some(("b1", "t1", FAILED))),
                sample(2, Some(("b1", "t2", "mismatch"))),
            ],
            1,
            99,
        );
        assert_eq!(o.violations.len(), 2, "{:?}", o.violations);
    }

    #[test]
    fn too_few_checks_is_a_violation_at_the_end() {
        let samples: Vec<Sample> = (0..5)
            .map(|i| sample(i, Some(("b1", "t1", VERIFIED))))
            .collect();
        let o = check(&samples, 2, 99);
        assert_eq!(o.violations.len(), 1);
        assert_eq!(o.violations[0].at, 99);
        assert!(
            o.violations[0].message.contains("1 restore checks ran"),
            "{}",
            o.violations[0].message
        );
        assert!(check(&samples, 1, 99).violations.is_empty());
        // No check at all, with none asked for, passes.
        assert!(check(&[sample(0, None)], 0, 99).violations.is_empty());
    }
}
