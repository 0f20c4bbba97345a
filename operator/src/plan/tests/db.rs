//! Scenario tests of the database rules: a NOSPACE alarm cleared in one
//! step (and what is left of one cut short), a full keyspace, a corrupt
//! member, a CORRUPT alarm.

use super::*;

const MIB: i64 = 1 << 20;

fn sized(m: Member, size: i64, in_use: i64) -> Member {
    with(m, |m| {
        m.db.size = size;
        m.db.in_use = in_use;
    })
}

/// `m` after its defragmentation since the alarm.
fn defragged(m: Member, size: i64) -> Member {
    with(sized(m, size, size), |m| m.db.defragged_since_alarm = true)
}

fn nospace(members: Vec<Member>, revision: i64, compacted: i64) -> Observed {
    let mut o = cluster(members);
    o.db = ClusterDb {
        alarms: vec![Alarm {
            member: 2,
            kind: AlarmKind::NoSpace,
        }],
        revision,
        compacted,
    };
    o
}

fn quota(mib: i64) -> Desired {
    let mut d = desired(3);
    d.db.quota = mib * MIB;
    d.backend.quota_backend_bytes = Some(mib * MIB);
    d
}

/// The plan for members that run with the spec's backend settings (as
/// they do once restarted with them).
fn planned(d: &Desired, o: &Observed) -> Step {
    let mut o = o.clone();
    for m in &mut o.members {
        if let Some(p) = &mut m.platform {
            p.backend = d.backend.clone();
        }
    }
    plan(d, &o)
}

const ALARM: Alarm = Alarm {
    member: 2,
    kind: AlarmKind::NoSpace,
};

fn clear(compact_to: Option<i64>, order: &[&str], disarm: &[Alarm]) -> Step {
    Step::ClearNoSpace {
        compact_to,
        defrag_order: order.iter().map(|m| m.to_string()).collect(),
        disarm: disarm.to_vec(),
    }
}

#[test]
fn nospace_is_cleared_in_one_step_compact_followers_leader_disarm() {
    let d = quota(64);
    let full = || three().into_iter().map(|m| sized(m, 64 * MIB, 64 * MIB));
    // demo-0 leads: it comes last, after the followers in their order.
    let o = nospace(full().collect(), 500, 0);
    let all = clear(Some(500), &["demo-1", "demo-2", "demo-0"], &[ALARM]);
    assert_eq!(planned(&d, &o), all);
    // Another leader: still last.
    let mut m: Vec<Member> = full().collect();
    for (i, m) in m.iter_mut().enumerate() {
        m.etcd = m.etcd.map(|mut e| {
            e.leader = i == 1;
            e
        });
    }
    let step = planned(&d, &nospace(m, 500, 0));
    assert_eq!(
        step,
        clear(Some(500), &["demo-0", "demo-2", "demo-1"], &[ALARM])
    );
}

#[test]
fn a_step_cut_short_is_finished_by_the_next_pass() {
    let d = quota(64);
    // Compacted, and demo-1 defragmented, before an error stopped the
    // step: the rest, in the same order; nothing compacted again.
    let mut m: Vec<Member> = three()
        .into_iter()
        .map(|m| sized(m, 64 * MIB, MIB))
        .collect();
    m[1] = defragged(m[1].clone(), MIB);
    let step = planned(&d, &nospace(m.clone(), 500, 500));
    assert_eq!(step, clear(None, &["demo-2", "demo-0"], &[ALARM]));
    // Every member defragmented, the alarm still raised (the disarm
    // failed): only the disarm is left.
    let m: Vec<Member> = m.into_iter().map(|m| defragged(m, MIB)).collect();
    assert_eq!(
        planned(&d, &nospace(m.clone(), 500, 500)),
        clear(None, &[], &[ALARM])
    );
    // Written to since: compacted again first, nothing defragmented.
    assert_eq!(
        planned(&d, &nospace(m, 600, 500)),
        clear(Some(600), &[], &[ALARM])
    );
}

#[test]
fn every_nospace_alarm_is_disarmed_in_the_same_step() {
    let d = quota(64);
    let m: Vec<Member> = three().into_iter().map(|m| defragged(m, MIB)).collect();
    let mut o = nospace(m, 500, 500);
    let other = Alarm {
        member: 3,
        kind: AlarmKind::NoSpace,
    };
    o.db.alarms.push(other);
    assert_eq!(planned(&d, &o), clear(None, &[], &[ALARM, other]));
}

#[test]
fn without_a_member_to_spare_it_compacts_and_disarms_nothing() {
    // Two voters: defragmenting either leaves no quorum while it runs.
    let d = {
        let mut d = quota(64);
        d.size = 2;
        d
    };
    let two = || {
        three()
            .into_iter()
            .take(2)
            .map(|m| sized(m, 64 * MIB, 64 * MIB))
    };
    assert_eq!(
        planned(&d, &nospace(two().collect(), 500, 0)),
        clear(Some(500), &[], &[])
    );
    assert_eq!(
        planned(&d, &nospace(two().collect(), 500, 500)),
        Step::Wait(Wait::DefragWouldRiskQuorum)
    );
    // A cluster of one is defragmented in place.
    let mut d = quota(64);
    d.size = 1;
    let one = vec![sized(up("demo-0", 1), 64 * MIB, 64 * MIB)];
    assert_eq!(
        planned(&d, &nospace(one, 500, 0)),
        clear(Some(500), &["demo-0"], &[ALARM])
    );
}

#[test]
fn nospace_waits_while_the_keys_fill_the_quota_or_a_member_is_down() {
    let d = quota(64);
    let o = nospace(
        three()
            .into_iter()
            .map(|m| defragged(m, 63 * MIB))
            .collect(),
        500,
        500,
    );
    assert!(matches!(
        planned(&d, &o),
        Step::Wait(Wait::QuotaFull { .. })
    ));
    // A member down: it is restarted first, nothing is defragmented.
    let mut m: Vec<Member> = three()
        .into_iter()
        .map(|m| sized(m, 64 * MIB, MIB))
        .collect();
    m[1] = killed(m[1].clone());
    let step = planned(&d, &nospace(m, 500, 500));
    assert_eq!(
        step,
        Step::Start {
            member: "demo-1".into()
        }
    );
}

#[test]
fn every_member_is_defragmented_once_per_alarm_whatever_its_bytes_in_use_say() {
    // etcd counts the pages a compaction freed as in use until a later
    // write commits, and under NOSPACE none comes: bytes in use say full
    // (seen under load), the file is defragmented anyway.
    let d = quota(16);
    let m: Vec<Member> = three()
        .into_iter()
        .map(|m| sized(m, 16 * MIB, 16 * MIB))
        .collect();
    assert_eq!(
        planned(&d, &nospace(m, 500, 500)),
        clear(None, &["demo-1", "demo-2", "demo-0"], &[ALARM])
    );
}

#[test]
fn scheduled_and_threshold_defrag_one_follower_at_a_time() {
    let mut d = desired(3);
    d.db.fragmentation = Some(50);
    let mut m = three();
    m[0] = sized(m[0].clone(), 40 * MIB, 4 * MIB); // the leader, 90% free
    m[2] = sized(m[2].clone(), 40 * MIB, 30 * MIB); // 25% free
    assert_eq!(
        planned(&d, &cluster(m.clone())),
        Step::Defragment {
            member: "demo-0".into(),
            why: DefragWhy::Fragmented
        }
    );
    m[1] = with(m[1].clone(), |m| m.db.defrag_due = true);
    assert_eq!(
        planned(&d, &cluster(m)),
        Step::Defragment {
            member: "demo-1".into(),
            why: DefragWhy::Scheduled
        }
    );
}

fn hashed(m: Member, hash: u32) -> Member {
    with(m, |m| {
        m.db.hash = Some(KvHash {
            revision: 100,
            compact_revision: 0,
            hash,
        })
    })
}

#[test]
fn the_member_whose_hash_differs_from_the_majority_is_replaced() {
    let mut m = three();
    m[0] = hashed(m[0].clone(), 7);
    m[1] = hashed(m[1].clone(), 9);
    m[2] = hashed(m[2].clone(), 7);
    assert_eq!(
        plan(&desired(3), &cluster(m.clone())),
        Step::Remove {
            member: "demo-1".into(),
            id: 2,
            why: RemoveWhy::Corrupt
        }
    );
    // No majority (three different hashes, or one missing): nothing.
    m[2] = hashed(m[2].clone(), 8);
    assert_eq!(plan(&desired(3), &cluster(m.clone())), Step::Converged);
    m[2] = with(m[2].clone(), |m| m.db.hash = None);
    assert_eq!(plan(&desired(3), &cluster(m)), Step::Converged);
}

#[test]
fn a_corrupt_alarm_of_a_member_gone_is_disarmed_else_reported() {
    let alarm = |member| Alarm {
        member,
        kind: AlarmKind::Corrupt,
    };
    let mut o = cluster(three());
    o.db.alarms = vec![alarm(9)];
    assert_eq!(plan(&desired(3), &o), Step::Disarm { alarm: alarm(9) });
    o.db.alarms = vec![alarm(2)];
    assert_eq!(
        plan(&desired(3), &o),
        Step::Wait(Wait::CorruptUnconfirmed {
            member: "demo-1".into()
        })
    );
}

/// Following the operator's own advice under NOSPACE (raise the quota) made
/// it disarm the alarm over and over while etcd kept its old quota and
/// refused every write: the alarm is judged by the quota the members run
/// with, and they restart with the new one first.
#[test]
fn a_raised_quota_restarts_the_members_before_the_alarm_is_judged_by_it() {
    let old = quota(16);
    let raised = quota(64);
    let m: Vec<Member> = three()
        .into_iter()
        .map(|m| defragged(m, 16 * MIB))
        .collect();
    let mut o = nospace(m, 500, 500);
    for m in &mut o.members {
        if let Some(p) = &mut m.platform {
            p.backend = old.backend.clone();
        }
    }
    // Running 16 MiB with 16 MiB in use: no room, whatever the spec says.
    assert!(
        matches!(plan(&old, &o), Step::Wait(Wait::QuotaFull { quota, .. }) if quota == 16 * MIB)
    );
    // The spec raised: a member restarts with the new quota, no disarm.
    assert!(
        matches!(plan(&raised, &o), Step::Restart { ref member, .. } if member == "demo-1"),
        "{:?}",
        plan(&raised, &o)
    );
    // Once they all run it, the alarm goes.
    assert!(
        matches!(planned(&raised, &o), Step::ClearNoSpace { ref disarm, .. } if !disarm.is_empty())
    );
}
