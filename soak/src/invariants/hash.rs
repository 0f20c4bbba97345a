//! Equal KV hashes: at a checkpoint every member hashes its store up to one
//! common revision (`HashKV`); members with the same compact revision must
//! give the same hash. At the final checkpoint every member must answer.
//! With `bounds.hashDivergenceMax`, [`excused`] names the checkpoints whose
//! difference a recent `corrupt` fault explains.

use std::collections::{BTreeMap, BTreeSet};

use etcd_operator::faults::{Fault, FaultRecord};

use super::{Check, Violation};
use crate::history::{Checkpoint, Ms, Sample};

/// The violation a checkpoint shows, if any.
pub fn compare(c: &Checkpoint) -> Option<Violation> {
    let mut groups: BTreeMap<i64, BTreeMap<u32, Vec<&str>>> = BTreeMap::new();
    let mut failed = Vec::new();
    for (url, r) in &c.hashes {
        match r {
            Ok((hash, compact)) => groups
                .entry(*compact)
                .or_default()
                .entry(*hash)
                .or_default()
                .push(url),
            Err(e) => failed.push(format!("{url}: {e}")),
        }
    }
    for (compact, hashes) in &groups {
        if hashes.len() > 1 {
            let parts: Vec<String> = hashes
                .iter()
                .map(|(h, urls)| format!("{h:08x} on {}", urls.join(", ")))
                .collect();
            return Some(Violation::new(
                c.at,
                Check::KvHash,
                format!(
                    "KV hashes differ at revision {} (compact revision {compact}): {}",
                    c.revision,
                    parts.join("; ")
                ),
            ));
        }
    }
    if c.final_check && !failed.is_empty() {
        return Some(Violation::new(
            c.at,
            Check::KvHash,
            format!(
                "final KV hash at revision {} failed on {}",
                c.revision,
                failed.join("; ")
            ),
        ));
    }
    None
}

/// The times of the checkpoints (never the final one) whose differing
/// hashes a `corrupt` fault explains: in each group of members with the same
/// compact revision, a strict majority of the group agrees on one hash, and
/// every member that differs is one a `corrupt` fault hit (its client URLs
/// from the member lists of `samples`, by name) at most `window` before the
/// checkpoint. Anything else (no majority, a member nobody corrupted, a
/// fault older than `window`: the operator never replaced the member) stays
/// a violation.
pub fn excused(
    checkpoints: &[Checkpoint],
    samples: &[Sample],
    faults: &[FaultRecord],
    window: Ms,
) -> BTreeSet<Ms> {
    let mut urls: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for m in samples.iter().filter_map(|s| s.listed.as_ref()).flatten() {
        urls.entry(m.name.as_str())
            .or_default()
            .extend(m.client_urls.iter().map(|u| u.trim_end_matches('/')));
    }
    let mut out = BTreeSet::new();
    for c in checkpoints.iter().filter(|c| !c.final_check) {
        let damaged: BTreeSet<&str> = faults
            .iter()
            .filter(|f| f.fault == Fault::Corrupt && f.injected())
            .filter(|f| f.unix_ms <= c.at && c.at - f.unix_ms <= window)
            .filter_map(|f| urls.get(f.member.as_str()))
            .flatten()
            .copied()
            .collect();
        if compare(c).is_some() && explained(c, &damaged) {
            out.insert(c.at);
        }
    }
    out
}

/// Whether, in every compact group, a strict majority agrees and only
/// `damaged` members differ from it.
fn explained(c: &Checkpoint, damaged: &BTreeSet<&str>) -> bool {
    let mut groups: BTreeMap<i64, BTreeMap<u32, Vec<&str>>> = BTreeMap::new();
    for (url, r) in &c.hashes {
        if let Ok((hash, compact)) = r {
            groups
                .entry(*compact)
                .or_default()
                .entry(*hash)
                .or_default()
                .push(url.trim_end_matches('/'));
        }
    }
    groups.values().all(|hashes| {
        let size: usize = hashes.values().map(Vec::len).sum();
        let Some((major, _)) = hashes.iter().find(|(_, u)| u.len() * 2 > size) else {
            return false;
        };
        hashes
            .iter()
            .filter(|(h, _)| *h != major)
            .all(|(_, u)| u.iter().all(|url| damaged.contains(url)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cp(hashes: Vec<Result<(u32, i64), String>>, final_check: bool) -> Checkpoint {
        Checkpoint {
            at: 7,
            revision: 100,
            hashes: hashes
                .into_iter()
                .enumerate()
                .map(|(i, h)| (format!("m{i}"), h))
                .collect(),
            final_check,
        }
    }

    #[test]
    fn equal_hashes_pass_and_a_divergent_member_is_named() {
        assert!(compare(&cp(vec![Ok((1, 0)), Ok((1, 0)), Ok((1, 0))], true)).is_none());
        let v = compare(&cp(vec![Ok((1, 0)), Ok((2, 0)), Ok((1, 0))], false)).expect("differ");
        assert_eq!(v.check, Check::KvHash);
        assert!(v.message.contains("00000002 on m1"), "{}", v.message);
    }

    #[test]
    fn different_compactions_are_not_compared() {
        assert!(compare(&cp(vec![Ok((1, 0)), Ok((2, 50))], false)).is_none());
    }

    #[test]
    fn a_failed_member_matters_only_at_the_end() {
        let hashes = vec![Ok((1, 0)), Err("future revision".to_string())];
        assert!(compare(&cp(hashes.clone(), false)).is_none());
        assert!(compare(&cp(hashes, true)).is_some());
    }

    fn listed(at: Ms) -> Sample {
        let mut s = Sample::empty(at, 3);
        s.listed = Some(
            (0..3)
                .map(|i| crate::history::Listed {
                    id: i,
                    name: format!("n{i}"),
                    client_urls: vec![format!("m{i}")],
                    learner: false,
                })
                .collect(),
        );
        s
    }

    fn corrupt(member: &str, at: Ms) -> FaultRecord {
        let mut f = FaultRecord::now(
            Fault::Corrupt,
            "c",
            member,
            etcd_operator::faults::Role::Follower,
            "injected",
        );
        f.unix_ms = at;
        f
    }

    /// A checkpoint at `at` where the members in `differ` hold another hash.
    fn at(at: Ms, differ: &[usize], final_check: bool) -> Checkpoint {
        let mut c = cp(
            (0..3)
                .map(|i| Ok((if differ.contains(&i) { 2 } else { 1 }, 0)))
                .collect(),
            final_check,
        );
        c.at = at;
        c
    }

    #[test]
    fn a_corrupted_member_may_differ_within_the_window_only() {
        let samples = vec![listed(1_000)];
        let faults = vec![corrupt("n1", 10_000)];
        let cps = vec![
            at(5_000, &[1], false),  // before the fault: not explained
            at(15_000, &[1], false), // 5 s after: excused
            at(30_000, &[1], false), // exactly the window: excused
            at(30_001, &[1], false), // past it: never replaced, a violation
            at(16_000, &[1], true),  // the final checkpoint: never excused
            at(17_000, &[], false),  // equal: nothing to excuse
        ];
        let got = excused(&cps, &samples, &faults, 20_000);
        assert_eq!(got, BTreeSet::from([15_000, 30_000]));
    }

    #[test]
    fn only_the_member_hit_and_only_against_a_majority() {
        let samples = vec![listed(1_000)];
        let faults = vec![corrupt("n1", 10_000)];
        // Another member differs: not explained.
        assert!(excused(&[at(12_000, &[2], false)], &samples, &faults, 20_000).is_empty());
        // Two of three hold another hash: the third, never hit, is the one
        // that differs from the majority: not explained.
        assert!(excused(&[at(12_000, &[1, 2], false)], &samples, &faults, 20_000).is_empty());
        // A kill is no corruption; a failed injection damaged nothing.
        let mut kill = corrupt("n1", 10_000);
        kill.fault = Fault::Kill;
        let mut failed = corrupt("n1", 10_000);
        failed.outcome = "failed: no member".into();
        for f in [kill, failed] {
            assert!(excused(&[at(12_000, &[1], false)], &samples, &[f], 20_000).is_empty());
        }
        // A member the lists never named cannot be matched.
        let faults = vec![corrupt("gone", 10_000)];
        assert!(excused(&[at(12_000, &[1], false)], &samples, &faults, 20_000).is_empty());
    }
}
