//! At most one leader per raft term, from every member's status across all
//! probes: raft's election safety. A leader L that reports itself leader in
//! term T while another member M != L reported itself leader in the same
//! term of the same raft cluster is a split brain. (A cluster rebuilt from a
//! backup is a new raft cluster, with a new cluster id, whose terms start
//! again.)
//!
//! Only a member's word about itself counts, and only its word once its
//! term has caught up: etcd's status gives the leader a member follows *now*
//! but the term of the last entry it *applied*. A follower that has just
//! learnt of a new leader reports the new leader beside an older term, and
//! so does the new leader itself until it applies the first entry of its
//! term (seen in a real soak: right after the leader was killed, the new
//! leader said "leader: me, term 2" for a moment while the killed one had
//! led term 2). So each member's leadership is followed as a *stint*:
//! consecutive samples in which it names itself leader. A leader's real
//! term cannot change within a stint, so the stint's term is the highest
//! it reported; the lower ones were the lag. A split brain is two stints
//! of different members with the same term in the same raft cluster that
//! either were seen leading at the same time, or of which the later one
//! kept that term for [`LAG_GRACE`] or more. (A new leader killed before it
//! applied the first entry of its term leaves a short stint at the term of
//! the leader before it: seen in a loaded soak, 19 s after the first.) A
//! stint is judged when it ends (the member follows another leader or
//! none) or when the run ends ([`LeaderTerms::finish`]).

use std::collections::BTreeMap;

use super::{Check, Violation};
use crate::history::{Ms, Sample};

/// How long a new leader may report the term of the leader before it (the
/// term of its last applied entry) before that counts as leading that term.
pub const LAG_GRACE: Ms = 5_000;

/// One member's uninterrupted leadership as seen by the probes.
#[derive(Clone, Debug)]
struct Stint {
    /// Highest term it reported while leading.
    term: u64,
    /// Its client URL.
    url: String,
    /// When it first reported that term.
    at: Ms,
    /// When it last said it leads.
    last: Ms,
}

impl Stint {
    /// Seen leading at the same time as `other`.
    fn overlaps(&self, other: &Stint) -> bool {
        self.at <= other.last && other.at <= self.last
    }
}

/// Leaders seen per term, fed sample by sample.
#[derive(Debug, Default)]
pub struct LeaderTerms {
    /// (cluster id, member id) -> its current stint.
    open: BTreeMap<(u64, u64), Stint>,
    /// (cluster id, term) -> its leader and that leader's stint
    terms: BTreeMap<(u64, u64), (u64, Stint)>,
    /// Terms already reported, so a split brain is reported once.
    reported: BTreeMap<(u64, u64), ()>,
}

impl LeaderTerms {
    /// Checks one sample's answers: stints that ended are judged.
    pub fn observe(&mut self, s: &Sample) -> Vec<Violation> {
        let mut ended = Vec::new();
        for v in &s.views {
            let key = (v.cluster_id, v.id);
            if v.leader != 0 && v.leader == v.id {
                let st = self.open.entry(key).or_insert_with(|| Stint {
                    term: v.term,
                    url: v.url.clone(),
                    at: s.at,
                    last: s.at,
                });
                if v.term > st.term {
                    st.term = v.term;
                    st.at = s.at;
                }
                st.last = s.at;
            } else if let Some(st) = self.open.remove(&key) {
                ended.push((key, st));
            }
        }
        let mut out = Vec::new();
        for (key, st) in ended {
            out.extend(self.judge(key, st, s.at));
        }
        out
    }

    /// Judges the stints still open at the end of the run.
    pub fn finish(&mut self, at: Ms) -> Vec<Violation> {
        let open = std::mem::take(&mut self.open);
        open.into_iter()
            .filter_map(|(key, st)| self.judge(key, st, at))
            .collect()
    }

    fn judge(&mut self, (cluster, id): (u64, u64), st: Stint, now: Ms) -> Option<Violation> {
        let key = (cluster, st.term);
        match self.terms.get(&key) {
            None => {
                self.terms.insert(key, (id, st));
                None
            }
            Some((l, first)) if *l != id && !self.reported.contains_key(&key) => {
                let later = if st.at >= first.at { &st } else { first };
                let lagged = later.last - later.at < LAG_GRACE;
                if lagged && !st.overlaps(first) {
                    return None;
                }
                self.reported.insert(key, ());
                Some(Violation::new(
                    now,
                    Check::LeaderPerTerm,
                    format!(
                        "two leaders in term {}: {l:x} (reported by {} at {}) and {id:x} \
                         (reported by {} at {})",
                        st.term,
                        first.url,
                        crate::history::rfc3339(first.at),
                        st.url,
                        crate::history::rfc3339(st.at),
                    ),
                ))
            }
            Some(_) => None,
        }
    }

    /// Number of distinct terms seen (elections observed, roughly),
    /// counting the stints still open.
    pub fn terms(&self) -> usize {
        let open = self
            .open
            .iter()
            .filter(|((c, _), st)| !self.terms.contains_key(&(*c, st.term)));
        self.terms.len() + open.count()
    }
}

/// Checks a whole history.
pub fn check(samples: &[Sample]) -> Vec<Violation> {
    let mut t = LeaderTerms::default();
    let mut out: Vec<Violation> = samples.iter().flat_map(|s| t.observe(s)).collect();
    out.extend(t.finish(samples.last().map_or(0, |s| s.at)));
    out
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
    fn a_new_leader_naming_itself_beside_its_applied_term_is_no_split_brain() {
        // Member 1 led term 2 and was killed; member 2 wins term 3 and,
        // until it applies the first entry of term 3, says "leader: me"
        // beside term 2 (seen in a real soak), then beside term 3.
        let a = healthy(0, 3, 2);
        let mut b = healthy(100, 3, 2);
        b.views.remove(0);
        for v in &mut b.views {
            v.leader = 2;
        }
        let mut c = b.clone();
        c.at = 200;
        for v in &mut c.views {
            v.term = 3;
        }
        assert!(check(&[a.clone(), b.clone(), c.clone()]).is_empty());
        // Killed before it applied an entry of term 3: a short stint at
        // term 2 (seen in a loaded soak).
        assert!(check(&[a.clone(), b.clone()]).is_empty());
        // Had member 2 kept saying term 2 while leading for LAG_GRACE, it
        // would be a second leader of term 2.
        let mut late = b.clone();
        late.at = 100 + LAG_GRACE;
        let v = check(&[a, b, late]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].message.contains("two leaders in term 2"), "{v:?}");
    }

    #[test]
    fn a_split_brain_is_reported_when_the_stint_ends() {
        let a = healthy(0, 3, 2);
        let mut b = healthy(100, 3, 2);
        b.views[2].leader = 3;
        let mut c = healthy(200, 3, 2);
        c.views[2].leader = 1;
        let mut t = LeaderTerms::default();
        assert!(t.observe(&a).is_empty());
        assert!(t.observe(&b).is_empty(), "still leading: not judged yet");
        // Member 3's stint ends; member 1's goes on (its term may still
        // rise): judged when it ends, here with the run.
        assert!(t.observe(&c).is_empty());
        let v = t.finish(300);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].at, 300);
        assert!(t.finish(400).is_empty(), "reported once");
        assert_eq!(t.terms(), 1);
    }

    #[test]
    fn no_leader_is_not_a_leader() {
        let a = healthy(0, 3, 2);
        let mut b = healthy(100, 3, 2);
        b.views[0].leader = 0;
        assert!(check(&[a, b]).is_empty());
    }
}
