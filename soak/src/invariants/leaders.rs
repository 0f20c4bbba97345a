//! At most one leader per raft term, from every member's status across all
//! probes: raft's election safety. A leader L that reports itself leader in
//! term T while another member M != L reported itself leader in the same
//! term of the same raft cluster is a split brain. (A cluster rebuilt from a
//! backup is a new raft cluster, with a new cluster id, whose terms start
//! again.)
//!
//! Only a member's word about itself counts: etcd's status gives the leader
//! a member follows now but the term of the last entry it *applied*, so a
//! follower that has just learnt of a new leader (a member coming back from
//! a partition, say) reports the new leader beside an older term for a
//! moment, which is no split brain.

use std::collections::BTreeMap;

use super::{Check, Violation};
use crate::history::{Ms, Sample};

/// Leaders seen per term, fed sample by sample.
#[derive(Debug, Default)]
pub struct LeaderTerms {
    /// (cluster id, term) -> (leader, reporter URL, when first seen)
    terms: BTreeMap<(u64, u64), (u64, String, Ms)>,
    /// Terms already reported, so a split brain is reported once.
    reported: BTreeMap<(u64, u64), ()>,
}

impl LeaderTerms {
    /// Checks one sample's answers.
    pub fn observe(&mut self, s: &Sample) -> Vec<Violation> {
        let mut out = Vec::new();
        for v in s.views.iter().filter(|v| v.leader != 0 && v.leader == v.id) {
            let key = (v.cluster_id, v.term);
            match self.terms.get(&key) {
                None => {
                    self.terms.insert(key, (v.leader, v.url.clone(), s.at));
                }
                Some((l, by, at)) if *l != v.leader && !self.reported.contains_key(&key) => {
                    self.reported.insert(key, ());
                    out.push(Violation::new(
                        s.at,
                        Check::LeaderPerTerm,
                        format!(
                            "two leaders in term {}: {l:x} (reported by {by} at {}) and {:x} \
                             (reported by {})",
                            v.term,
                            crate::history::rfc3339(*at),
                            v.leader,
                            v.url
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
        out
    }

    /// Number of distinct terms seen (elections observed, roughly).
    pub fn terms(&self) -> usize {
        self.terms.len()
    }
}

/// Checks a whole history.
pub fn check(samples: &[Sample]) -> Vec<Violation> {
    let mut t = LeaderTerms::default();
    samples.iter().flat_map(|s| t.observe(s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invariants::health::tests::healthy;

    #[test]
    fn new_terms_with_new_leaders_are_fine() {
        let a = healthy(0, 3, 2);
        let mut b = healthy(100, 3, 3);
        for v in &mut b.views {
            v.leader = 2;
        }
        assert!(check(&[a.clone(), b, a]).is_empty());
    }

    #[test]
    fn two_leaders_in_one_term_are_caught_once() {
        let a = healthy(0, 3, 2);
        let mut b = healthy(100, 3, 2);
        b.views[2].leader = 3;
        let v = check(&[a, b.clone(), b]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].check, Check::LeaderPerTerm);
        assert_eq!(v[0].at, 100);
        assert!(
            v[0].message.contains("two leaders in term 2: 1"),
            "{}",
            v[0].message
        );
    }

    #[test]
    fn members_disagreeing_within_a_term_in_one_probe_are_a_violation() {
        use crate::invariants::health::{Health, assess};
        // One probe, the first of the run: members 1 and 2 follow leader 1,
        // member 3 follows leader 3, all in term 2.
        let mut b = healthy(100, 3, 2);
        b.views[2].leader = 3;
        assert!(matches!(assess(&b), Health::Unhealthy(m) if m.contains("disagree")));
        let v = check(std::slice::from_ref(&b));
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].check, Check::LeaderPerTerm);
        // Across terms it is an election, unhealthy but no violation.
        b.views[2].term = 3;
        assert!(!assess(&b).ok());
        assert!(check(&[b]).is_empty());
    }

    #[test]
    fn a_rebuilt_cluster_starts_its_terms_again() {
        let a = healthy(0, 3, 2);
        let mut b = healthy(100, 3, 2);
        for v in &mut b.views {
            v.leader = 3;
            v.cluster_id = 77;
        }
        assert!(check(&[a, b]).is_empty());
    }

    #[test]
    fn a_follower_naming_a_new_leader_beside_its_applied_term_is_no_split_brain() {
        // Member 1 led term 2; back from a partition, member 1 follows the
        // new leader 2 while its last applied entry is still of term 2.
        let a = healthy(0, 3, 2);
        let mut b = healthy(100, 3, 2);
        for v in &mut b.views {
            v.leader = 2;
        }
        for v in &mut b.views[1..] {
            v.term = 3;
        }
        assert!(check(&[a, b]).is_empty());
    }

    #[test]
    fn no_leader_is_not_a_leader() {
        let a = healthy(0, 3, 2);
        let mut b = healthy(100, 3, 2);
        b.views[0].leader = 0;
        assert!(check(&[a, b]).is_empty());
    }
}
