//! Equal KV hashes: at a checkpoint every member hashes its store up to one
//! common revision (`HashKV`); members with the same compact revision must
//! give the same hash. At the final checkpoint every member must answer.

use std::collections::BTreeMap;

use super::{Check, Violation};
use crate::history::Checkpoint;

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
}
