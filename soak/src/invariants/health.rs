//! Whether one probe sample shows a healthy cluster: exactly the members the
//! spec asks for, all voting, every one answering with the same leader,
//! and a quorum write acknowledged and a quorum read answered.

use crate::history::Sample;

/// The verdict on one sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    /// All members ready and agreeing, writes succeed.
    Healthy,
    /// Why not.
    Unhealthy(String),
}

impl Health {
    /// Whether healthy.
    pub fn ok(&self) -> bool {
        *self == Health::Healthy
    }
}

/// Judges a sample.
pub fn assess(s: &Sample) -> Health {
    let bad = |m: String| Health::Unhealthy(m);
    let Some(listed) = &s.listed else {
        return bad("no member gave the member list".into());
    };
    let learners = listed.iter().filter(|m| m.learner).count();
    let voting = listed.len() - learners;
    if voting != s.expected || learners > 0 {
        return bad(format!(
            "member list has {voting} voting members and {learners} learners, spec asks for {}",
            s.expected
        ));
    }
    if let Some(m) = listed
        .iter()
        .find(|m| m.name.is_empty() || m.client_urls.is_empty())
    {
        return bad(format!("member {:x} has not started", m.id));
    }
    let mut leader = None;
    for m in listed {
        let Some(v) = s
            .views
            .iter()
            .find(|v| v.id == m.id && m.client_urls.contains(&v.url))
        else {
            let why = s
                .failures
                .iter()
                .find(|(u, _)| m.client_urls.contains(u))
                .map(|(_, e)| e.as_str())
                .unwrap_or("no answer");
            return bad(format!("member {} does not answer: {why}", m.name));
        };
        if v.leader == 0 {
            return bad(format!("member {} has no leader", m.name));
        }
        if let Some(want) = &s.expected_version
            && v.version != *want
        {
            return bad(format!(
                "member {} runs etcd {}, the spec asks for {want}",
                m.name, v.version
            ));
        }
        if !v.errors.is_empty() {
            return bad(format!("member {} reports {}", m.name, v.errors.join(", ")));
        }
        // Within one term this is also a split brain, which
        // `leaders::LeaderTerms` reports as a LeaderPerTerm violation; across
        // terms it is an election not yet seen by every member.
        match leader {
            None => leader = Some((v.leader, v.term)),
            Some((l, term)) if l != v.leader => {
                return bad(format!(
                    "members disagree on the leader ({l:x} in term {term} and {:x} in term {})",
                    v.leader, v.term
                ));
            }
            Some(_) => {}
        }
    }
    if let Some((l, _)) = leader
        && !listed.iter().any(|m| m.id == l)
    {
        return bad(format!("leader {l:x} is not in the member list"));
    }
    if !s.write_ok {
        return bad("a quorum write failed".into());
    }
    if !s.read_ok {
        return bad("a quorum read failed".into());
    }
    Health::Healthy
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::history::{Listed, MemberView, Sample};

    /// A healthy sample of `n` members with leader 1 in term `term`.
    pub(crate) fn healthy(at: u64, n: u64, term: u64) -> Sample {
        let mut s = Sample::empty(at, n as usize);
        s.write_ok = true;
        s.read_ok = true;
        s.listed = Some(
            (1..=n)
                .map(|id| Listed {
                    id,
                    name: format!("m{id}"),
                    client_urls: vec![format!("http://127.0.0.{id}:2379")],
                    learner: false,
                })
                .collect(),
        );
        s.views = (1..=n)
            .map(|id| MemberView {
                url: format!("http://127.0.0.{id}:2379"),
                cluster_id: 0,
                id,
                leader: 1,
                term,
                raft_index: 10,
                revision: 5,
                learner: false,
                version: "3.4.23".into(),
                errors: vec![],
            })
            .collect();
        s
    }

    #[test]
    fn healthy_and_each_way_of_not() {
        assert!(assess(&healthy(0, 3, 2)).ok());

        let mut s = healthy(0, 3, 2);
        s.views.remove(1);
        s.failures
            .push(("http://127.0.0.2:2379".into(), "refused".into()));
        assert_eq!(
            assess(&s),
            Health::Unhealthy("member m2 does not answer: refused".into())
        );

        let mut s = healthy(0, 3, 2);
        s.expected = 5;
        assert!(!assess(&s).ok());

        let mut s = healthy(0, 3, 2);
        s.views[2].leader = 2;
        assert!(matches!(assess(&s), Health::Unhealthy(m) if m.contains("disagree")));

        let mut s = healthy(0, 3, 2);
        s.write_ok = false;
        assert!(!assess(&s).ok());

        let mut s = healthy(0, 3, 2);
        s.read_ok = false;
        assert_eq!(assess(&s), Health::Unhealthy("a quorum read failed".into()));

        let mut s = healthy(0, 3, 2);
        if let Some(l) = s.listed.as_mut() {
            l[0].learner = true;
        }
        assert!(!assess(&s).ok());

        let mut s = healthy(0, 3, 2);
        s.listed = None;
        assert!(!assess(&s).ok());

        let mut s = healthy(0, 3, 2);
        s.expected_version = Some("3.5.1".into());
        assert!(matches!(assess(&s), Health::Unhealthy(m) if m.contains("runs etcd 3.4.23")));
        for v in &mut s.views {
            v.version = "3.5.1".into();
        }
        assert!(assess(&s).ok());
    }
}
