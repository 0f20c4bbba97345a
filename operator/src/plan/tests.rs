//! Scenario tests of the plan, one situation each.

use super::*;
use crate::crd::StoragePolicy;
use crate::member::Tuning;
use crate::version::Version;

const V34: Version = Version::new(3, 4, 23);
pub(super) const V35: Version = Version::new(3, 5, 1);

mod db;

pub(super) fn desired(size: usize) -> Desired {
    Desired {
        size,
        version: V34,
        storage: StoragePolicy::Persistent,
        paused: false,
        restore_from_backup: false,
        tls: TlsWanted::default(),
        tuning: Tuning::default(),
        backend: Default::default(),
        pod: Default::default(),
        volume: None,
        storage_class: None,
        handover: true,
        db: DbPolicy::default(),
        from_survivor: false,
    }
}

/// A healthy, started, voting member with its data.
pub(super) fn up(name: &str, id: u64) -> Member {
    Member {
        name: name.into(),
        platform: Some(Runtime {
            running: true,
            has_data: true,
            crash_looping: false,
            version: V34,
            tuning: Tuning::default(),
            backend: Default::default(),
            pod: Default::default(),
            volume: None,
            bootstrap: true,
            tls: Default::default(),
            certs_due: false,
        }),
        etcd: Some(EtcdMember {
            id,
            started: true,
            learner: false,
            leader: id == 1,
            peer_https: false,
        }),
        healthy: true,
        db: DbFacts::default(),
        position: Some(Position {
            raft_index: 100,
            revision: 50,
        }),
    }
}

pub(super) fn with(mut m: Member, f: impl FnOnce(&mut Member)) -> Member {
    f(&mut m);
    m
}

pub(super) fn killed(m: Member) -> Member {
    with(m, |m| {
        m.healthy = false;
        m.position = None;
        if let Some(p) = &mut m.platform {
            p.running = false;
        }
    })
}

pub(super) fn destroyed(m: Member) -> Member {
    with(killed(m), |m| {
        if let Some(p) = &mut m.platform {
            p.has_data = false;
        }
    })
}

pub(super) fn cluster(members: Vec<Member>) -> Observed {
    Observed {
        bootstrapped: true,
        membership_known: members.iter().any(|m| m.healthy),
        voters_hint: members.len(),
        members,
        backup_available: false,
        db: ClusterDb::default(),
        backup_revision: None,
        reseeding: None,
        not_serving: Vec::new(),
    }
}

pub(super) fn three() -> Vec<Member> {
    vec![up("demo-0", 1), up("demo-1", 2), up("demo-2", 3)]
}

#[test]
fn new_cluster_bootstraps() {
    assert_eq!(plan(&desired(3), &Observed::default()), Step::Bootstrap);
}

#[test]
fn forming_cluster_waits_then_restarts_a_dead_initial_member() {
    let mut o = Observed {
        bootstrapped: false,
        members: three()
            .into_iter()
            .map(|m| with(m, |m| m.healthy = false))
            .collect(),
        ..Observed::default()
    };
    assert_eq!(plan(&desired(3), &o), Step::Wait(Wait::Forming));
    o.members[1] = killed(o.members[1].clone());
    assert_eq!(plan(&desired(3), &o), Step::Bootstrap);
}

#[test]
fn healthy_cluster_is_converged() {
    assert_eq!(plan(&desired(3), &cluster(three())), Step::Converged);
}

#[test]
fn paused_does_nothing_even_when_broken() {
    let mut d = desired(3);
    d.paused = true;
    let mut m = three();
    m[1] = destroyed(m[1].clone());
    assert_eq!(plan(&d, &cluster(m)), Step::Wait(Wait::Paused));
}

#[test]
fn killed_member_with_data_is_restarted_in_place() {
    let mut m = three();
    m[2] = killed(m[2].clone());
    assert_eq!(
        plan(&desired(3), &cluster(m)),
        Step::Start {
            member: "demo-2".into()
        }
    );
}

#[test]
fn destroyed_member_is_removed_then_replaced_through_a_learner() {
    let mut m = three();
    m[2] = destroyed(m[2].clone());
    assert_eq!(
        plan(&desired(3), &cluster(m.clone())),
        Step::Remove {
            member: "demo-2".into(),
            id: 3,
            why: RemoveWhy::DataLost
        }
    );
    m.pop();
    assert_eq!(plan(&desired(3), &cluster(m.clone())), Step::AddLearner);
    let learner = with(up("demo-3", 4), |m| {
        if let Some(e) = &mut m.etcd {
            e.learner = true;
        }
    });
    m.push(learner.clone());
    assert_eq!(
        plan(&desired(3), &cluster(m.clone())),
        Step::Promote {
            member: "demo-3".into(),
            id: 4
        }
    );
    // A learner still catching up is waited for, not promoted.
    let last = m.len() - 1;
    m[last] = with(learner, |m| m.healthy = false);
    assert_eq!(
        plan(&desired(3), &cluster(m)),
        Step::Wait(Wait::MemberNotReady {
            member: "demo-3".into()
        })
    );
}

#[test]
fn ephemeral_member_is_replaced_even_with_data() {
    let mut d = desired(3);
    d.storage = StoragePolicy::Ephemeral;
    let mut m = three();
    m[0] = killed(m[0].clone());
    assert!(matches!(
        plan(&d, &cluster(m)),
        Step::Remove {
            why: RemoveWhy::DataLost,
            ..
        }
    ));
}

#[test]
fn crash_looping_member_is_replaced() {
    let mut m = three();
    m[1] = with(killed(m[1].clone()), |m| {
        if let Some(p) = &mut m.platform {
            p.crash_looping = true;
        }
    });
    assert!(matches!(
        plan(&desired(3), &cluster(m)),
        Step::Remove { id: 2, .. }
    ));
}

#[test]
fn quorum_loss_restarts_members_with_data_only() {
    let mut m = three();
    m[0] = destroyed(m[0].clone());
    m[1] = killed(m[1].clone());
    m[2] = with(m[2].clone(), |m| m.healthy = false);
    let o = Observed {
        bootstrapped: true,
        membership_known: false,
        members: m.clone(),
        voters_hint: 3,
        backup_available: true,
        ..Observed::default()
    };
    assert_eq!(
        plan(&desired(3), &o),
        Step::Start {
            member: "demo-1".into()
        }
    );
    // Restarted: two of three run, they elect; no restore.
    m[1] = with(m[1].clone(), |m| {
        if let Some(p) = &mut m.platform {
            p.running = true;
        }
    });
    let o2 = Observed {
        members: m.clone(),
        ..o.clone()
    };
    let mut d = desired(3);
    d.restore_from_backup = true;
    assert_eq!(
        plan(&d, &o2),
        Step::Wait(Wait::Electing {
            alive: 2,
            needed: 2
        })
    );
    // Its data gone too: quorum cannot come back.
    m[1] = destroyed(m[1].clone());
    let o3 = Observed { members: m, ..o };
    assert_eq!(
        plan(&desired(3), &o3),
        Step::Wait(Wait::QuorumLost {
            alive: 1,
            needed: 2,
            no_restore: NoRestore::FlagOff
        })
    );
    assert_eq!(plan(&d, &o3), Step::RestoreFromBackup);
    let none = Observed {
        backup_available: false,
        ..o3
    };
    assert_eq!(
        plan(&d, &none),
        Step::Wait(Wait::QuorumLost {
            alive: 1,
            needed: 2,
            no_restore: NoRestore::NoBackup
        })
    );
}

#[test]
fn a_lost_member_is_not_removed_when_that_loses_quorum() {
    // Two of three voters gone for good, but the member list was read: the
    // one healthy member cannot lose another voter.
    let mut m = three();
    m[1] = destroyed(m[1].clone());
    m[2] = destroyed(m[2].clone());
    assert_eq!(
        plan(&desired(3), &cluster(m)),
        Step::Wait(Wait::RemoveWouldLoseQuorum {
            member: "demo-1".into()
        })
    );
}

#[test]
fn scale_up_adds_one_learner_at_a_time() {
    assert_eq!(plan(&desired(5), &cluster(three())), Step::AddLearner);
}

/// `m` with the leadership on `leader` (by name).
pub(super) fn led_by(mut m: Vec<Member>, leader: &str) -> Vec<Member> {
    for x in &mut m {
        if let Some(e) = &mut x.etcd {
            e.leader = x.name == leader;
        }
    }
    m
}

#[test]
fn scale_down_removes_the_newest_follower() {
    let mut m = three();
    m.push(up("demo-10", 11));
    m.push(with(up("demo-9", 10), |_| ()));
    assert_eq!(
        plan(&desired(3), &cluster(m)),
        Step::Remove {
            member: "demo-10".into(),
            id: 11,
            why: RemoveWhy::ScaleDown
        }
    );
}

#[test]
fn scale_down_prefers_a_dead_member() {
    let mut m = three();
    m.push(up("demo-3", 4));
    m.push(up("demo-4", 5));
    m[1] = killed(m[1].clone());
    assert_eq!(
        plan(&desired(3), &cluster(m)),
        Step::Remove {
            member: "demo-1".into(),
            id: 2,
            why: RemoveWhy::ScaleDown
        }
    );
}

#[test]
fn never_removes_healthy_member_while_another_is_unhealthy() {
    let mut m = three();
    m.push(up("demo-3", 4));
    m.push(up("demo-4", 5));
    m[4] = with(m[4].clone(), |m| m.healthy = false); // running, not ready
    assert_eq!(
        plan(&desired(3), &cluster(m)),
        Step::Wait(Wait::MemberNotReady {
            member: "demo-4".into()
        })
    );
}

#[test]
fn stray_platform_member_is_deleted() {
    let mut m = three();
    m.push(with(up("demo-3", 0), |m| m.etcd = None));
    assert_eq!(
        plan(&desired(3), &cluster(m)),
        Step::DeleteStray {
            member: "demo-3".into()
        }
    );
}

#[test]
fn member_lost_by_the_platform_is_replaced() {
    let mut m = three();
    m[2] = with(m[2].clone(), |m| {
        m.platform = None;
        m.healthy = false;
    });
    assert!(matches!(
        plan(&desired(3), &cluster(m)),
        Step::Remove {
            why: RemoveWhy::NotOnPlatform,
            ..
        }
    ));
}

#[test]
fn added_but_never_started_member_is_started() {
    let mut m = three();
    m[2] = with(destroyed(m[2].clone()), |m| {
        if let Some(e) = &mut m.etcd {
            e.started = false;
            e.learner = true;
        }
    });
    assert_eq!(
        plan(&desired(3), &cluster(m)),
        Step::Start {
            member: "demo-2".into()
        }
    );
}

#[test]
fn upgrade_goes_follower_first_and_leader_last() {
    let mut d = desired(3);
    d.version = V35;
    let mut m = three();
    assert_eq!(
        plan(&d, &cluster(m.clone())),
        Step::Upgrade {
            member: "demo-1".into(),
            to: V35
        }
    );
    for x in &mut m[1..] {
        if let Some(p) = &mut x.platform {
            p.version = V35;
        }
    }
    // The leader goes last, after handing its leadership over.
    assert!(matches!(
        plan(&d, &cluster(m.clone())),
        Step::MoveLeader { from, .. } if from == "demo-0"
    ));
    assert_eq!(
        plan(&d, &cluster(led_by(m, "demo-2"))),
        Step::Upgrade {
            member: "demo-0".into(),
            to: V35
        }
    );
}

#[test]
fn no_downgrade_and_no_upgrade_of_small_clusters() {
    let mut d = desired(3);
    d.version = Version::new(3, 3, 0);
    assert_eq!(
        plan(&d, &cluster(three())),
        Step::Wait(Wait::UpgradePath {
            from: V34,
            to: d.version
        })
    );
    let mut d = desired(1);
    d.version = V35;
    assert_eq!(
        plan(&d, &cluster(vec![up("demo-0", 1)])),
        Step::Wait(Wait::UpgradeNeedsThreeMembers)
    );
}

#[test]
fn member_order_is_numeric() {
    assert!(member_order("demo-10", "demo-9").is_gt());
    assert!(member_order("demo-1", "demo-2").is_lt());
}

mod handover;
mod survivor;
mod volumes;
