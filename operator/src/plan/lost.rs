//! When a quorum is lost for good, and which survivor a rebuild starts
//! from. Pure, as the rest of the plan; the property tests in `props`
//! check every rule below against a model cluster.
//!
//! The rules:
//! 1. A member is **lost for good** only when the platform does not run it
//!    and cannot start it with its data: its data is gone, or not trusted
//!    (it kept failing right after start, on the longer proof used without
//!    quorum), or the platform no longer has it at all.
//! 2. A member that runs is never lost, whether it answers or not: a
//!    paused (SIGSTOP) member, one cut off by a partition, or one too slow
//!    to answer may all come back by themselves.
//! 3. A member that kept its data but does not run is restarted first,
//!    and so is every such member before any rebuild is considered.
//! 4. Quorum is **lost for good** when, after those restarts, the members
//!    that run (learners, which vote for nothing, left out) are fewer than
//!    a quorum of the voters last seen in the member list. Only then may
//!    the cluster be rebuilt.
//! 5. A rebuild from a survivor (`spec.recovery.fromSurvivor`, needs
//!    `Persistent` storage) starts from the **most advanced** voter that
//!    runs with its data: the greatest [`Position`] (committed raft index,
//!    then revision). Every such member must have answered with its
//!    position; while one runs silent (rule 2) the rebuild waits, as it
//!    may be the most advanced.
//! 6. With `spec.recovery.restoreFromBackup` too, the newest verified
//!    backup is used instead only when it reaches a higher revision than
//!    that survivor; with no survivor, the backup is used.
//! 7. The seed is started with `--force-new-cluster`, and the flag is
//!    cleared once it serves, before any member is added to it.

use super::{Member, Position};

/// A member that runs with its data (a candidate seed), with its
/// position if it answered. Learners are left out: they may lag.
fn survivors(members: &[Member]) -> impl Iterator<Item = (&Member, Option<Position>)> {
    members
        .iter()
        .filter(|m| {
            m.platform
                .as_ref()
                .is_some_and(|p| p.running && p.has_data && !p.crash_looping)
                && !is_learner(m)
        })
        .map(|m| (m, m.position))
}

/// Known to be a learner (from the member list, or from its own status
/// when the list cannot be read).
pub fn is_learner(m: &Member) -> bool {
    m.etcd.is_some_and(|e| e.learner)
}

/// Members that run and may vote (rule 4).
pub fn voters_alive(members: &[Member]) -> usize {
    members
        .iter()
        .filter(|m| m.platform.as_ref().is_some_and(|p| p.running) && !is_learner(m))
        .count()
}

/// The most advanced survivor (rule 5): `Ok(None)` when no member runs
/// with its data, `Err(member)` when a survivor has not answered with its
/// position. Ties go to the lowest member name, so the choice is stable.
pub fn best_survivor(members: &[Member]) -> Result<Option<(&Member, Position)>, &Member> {
    let mut best: Option<(&Member, Position)> = None;
    for (m, position) in survivors(members) {
        let Some(p) = position else {
            return Err(m);
        };
        let better = match best {
            None => true,
            Some((b, bp)) => p > bp || (p == bp && super::member_order(&m.name, &b.name).is_lt()),
        };
        if better {
            best = Some((m, p));
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Runtime;
    use crate::version::Version;

    fn member(name: &str, running: bool, data: bool, position: Option<(u64, i64)>) -> Member {
        Member {
            name: name.into(),
            platform: Some(Runtime {
                running,
                has_data: data,
                crash_looping: false,
                version: Version::new(3, 4, 23),
                bootstrap: true,
                tls: Default::default(),
                certs_due: false,
                tuning: Default::default(),
                backend: Default::default(),
                pod: Default::default(),
                volume: None,
            }),
            etcd: None,
            healthy: false,
            db: Default::default(),
            position: position.map(|(raft_index, revision)| Position {
                raft_index,
                revision,
            }),
        }
    }

    #[test]
    fn the_most_advanced_survivor_is_chosen_by_index_then_revision() {
        let ms = [
            member("c-0", true, true, Some((10, 7))),
            member("c-1", true, true, Some((12, 5))),
            member("c-2", false, false, None),
        ];
        let (m, p) = best_survivor(&ms).expect("all answered").expect("one");
        assert_eq!((m.name.as_str(), p.raft_index), ("c-1", 12));
        let ms = [
            member("c-3", true, true, Some((12, 9))),
            member("c-1", true, true, Some((12, 9))),
        ];
        let (m, _) = best_survivor(&ms).expect("answered").expect("one");
        assert_eq!(m.name, "c-1", "a tie goes to the lowest name");
    }

    #[test]
    fn a_silent_survivor_holds_the_choice_and_the_dead_are_no_survivors() {
        let ms = [
            member("c-0", true, true, Some((10, 7))),
            member("c-1", true, true, None),
        ];
        assert_eq!(
            best_survivor(&ms)
                .map(|b| b.map(|(m, _)| &m.name))
                .expect_err("a silent survivor")
                .name,
            "c-1"
        );
        let ms = [
            member("c-0", false, true, Some((10, 7))),
            member("c-1", true, false, Some((11, 7))),
        ];
        assert!(best_survivor(&ms).expect("none silent").is_none());
    }
}
