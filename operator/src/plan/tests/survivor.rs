//! Scenario tests of rebuilding a cluster that lost a majority for good:
//! from the most advanced survivor, never from a paused or silent one,
//! and from a backup when it is ahead of every survivor.

use super::*;
use crate::crd::StoragePolicy;

/// A cluster of `n` whose member list cannot be read: members `lost` are
/// destroyed, the others run without a leader at the given positions.
fn without_quorum(n: usize, lost: &[usize], positions: &[Option<(u64, i64)>]) -> Observed {
    let members = (0..n)
        .map(|i| {
            let m = up(&format!("demo-{i}"), i as u64 + 1);
            if lost.contains(&i) {
                return with(destroyed(m), |m| m.etcd = None);
            }
            with(m, |m| {
                m.healthy = false;
                m.etcd = None;
                m.position = positions[i].map(|(raft_index, revision)| Position {
                    raft_index,
                    revision,
                });
            })
        })
        .collect();
    Observed {
        membership_known: false,
        voters_hint: n,
        ..cluster(members)
    }
}

fn survivor_flag() -> Desired {
    Desired {
        from_survivor: true,
        ..desired(3)
    }
}

#[test]
fn a_majority_lost_for_good_is_rebuilt_from_the_most_advanced_survivor() {
    let some = Some((100, 50));
    let o = without_quorum(3, &[0, 1], &[None, None, some]);
    assert_eq!(
        plan(&survivor_flag(), &o),
        Step::RebuildFromSurvivor {
            member: "demo-2".into(),
            revision: 50
        }
    );
    // Flag off: it waits, saying what would help.
    let Step::Wait(w @ Wait::QuorumLost { .. }) = plan(&desired(3), &o) else {
        panic!("expected a wait");
    };
    assert!(w.to_string().contains("fromSurvivor"), "{w}");
    // Of five, three lost: the one ahead is chosen, by index first.
    let mut d = survivor_flag();
    d.size = 5;
    let o = without_quorum(
        5,
        &[0, 2, 4],
        &[None, Some((90, 60)), None, Some((120, 55)), None],
    );
    assert_eq!(
        plan(&d, &o),
        Step::RebuildFromSurvivor {
            member: "demo-3".into(),
            revision: 55
        }
    );
}

#[test]
fn a_running_learner_keeps_no_quorum_and_seeds_no_rebuild() {
    // Two voters and a learner being added; one voter destroyed: the
    // learner runs, but quorum is lost for good (it was taken for a voter
    // and the operator waited for an election that could not come).
    let o = without_quorum(3, &[1], &[Some((100, 50)), None, Some((120, 60))]);
    let mut o = Observed {
        voters_hint: 2,
        ..o
    };
    o.members[2].etcd = Some(EtcdMember {
        id: 3,
        started: true,
        learner: true,
        leader: false,
        peer_https: false,
    });
    assert_eq!(
        plan(&survivor_flag(), &o),
        Step::RebuildFromSurvivor {
            member: "demo-0".into(),
            revision: 50
        }
    );
    let Step::Wait(Wait::QuorumLost {
        alive: 1,
        needed: 2,
        ..
    }) = plan(&desired(3), &o)
    else {
        panic!("expected quorum lost: {:?}", plan(&desired(3), &o));
    };
}

#[test]
fn a_silent_survivor_or_a_paused_majority_is_never_taken_for_lost() {
    // Two of three run but answer nothing (SIGSTOP, a partition): they may
    // come back, so nothing is rebuilt.
    let o = without_quorum(3, &[0], &[None, None, None]);
    assert_eq!(
        plan(&survivor_flag(), &o),
        Step::Wait(Wait::Electing {
            alive: 2,
            needed: 2
        })
    );
    // Of five, three lost for good, one answers, one is silent: the
    // silent one may be ahead, so the choice waits for it.
    let mut d = survivor_flag();
    d.size = 5;
    let o = without_quorum(5, &[0, 1, 2], &[None, None, None, Some((9, 9)), None]);
    assert_eq!(
        plan(&d, &o),
        Step::Wait(Wait::SurvivorSilent {
            member: "demo-4".into()
        })
    );
    // A survivor merely stopped with its data is restarted first.
    let mut o = without_quorum(3, &[0], &[None, Some((9, 9)), Some((9, 9))]);
    o.members[1] = killed(o.members[1].clone());
    assert_eq!(
        plan(&survivor_flag(), &o),
        Step::Start {
            member: "demo-1".into()
        }
    );
}

#[test]
fn a_backup_ahead_of_every_survivor_wins_and_ephemeral_storage_has_no_survivors() {
    let o = without_quorum(3, &[0, 1], &[None, None, Some((100, 50))]);
    let mut d = survivor_flag();
    d.restore_from_backup = true;
    let with_backup = |rev| Observed {
        backup_available: true,
        backup_revision: Some(rev),
        ..o.clone()
    };
    assert_eq!(plan(&d, &with_backup(51)), Step::RestoreFromBackup);
    assert!(matches!(
        plan(&d, &with_backup(50)),
        Step::RebuildFromSurvivor { .. }
    ));
    d.storage = StoragePolicy::Ephemeral;
    assert_eq!(plan(&d, &with_backup(10)), Step::RestoreFromBackup);
}

#[test]
fn a_reseeded_member_is_waited_for_restarted_and_settled_before_anyone_joins() {
    let mut o = without_quorum(3, &[0, 1], &[None, None, None]);
    o.reseeding = Some("demo-2".into());
    let d = survivor_flag();
    assert_eq!(
        plan(&d, &o),
        Step::Wait(Wait::Reseeding {
            member: "demo-2".into()
        })
    );
    o.members[2] = killed(o.members[2].clone());
    assert_eq!(
        plan(&d, &o),
        Step::Start {
            member: "demo-2".into()
        }
    );
    // It serves alone: the flag is settled before the strays go and the
    // learners come.
    let mut m = three();
    m[0] = with(destroyed(m[0].clone()), |m| m.etcd = None);
    m[1] = with(destroyed(m[1].clone()), |m| m.etcd = None);
    let mut o = cluster(m);
    o.voters_hint = 1;
    o.reseeding = Some("demo-2".into());
    assert_eq!(
        plan(&d, &o),
        Step::FinishReseed {
            member: "demo-2".into()
        }
    );
    o.reseeding = None;
    assert_eq!(
        plan(&d, &o),
        Step::DeleteStray {
            member: "demo-0".into()
        }
    );
}
