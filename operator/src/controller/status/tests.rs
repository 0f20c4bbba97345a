//! Tests of the conditions the status carries.

use std::time::Instant;

use super::{Facts, available, judge};
use crate::controller::facts::{Failed, Failure, Moves, REFUSAL_GRACE};
use crate::crd::Phase;
use crate::observe::Observation;
use crate::plan::{EtcdMember, Member, Step, Wait};

/// Three voters (and a ready learner), `ready` of the voters ready,
/// demo-0 the leader.
fn three(ready: usize) -> Observation {
    let mut obs = Observation::default();
    obs.observed.bootstrapped = true;
    obs.observed.membership_known = true;
    for i in 0..4u64 {
        let learner = i == 3;
        obs.observed.members.push(Member {
            name: format!("demo-{i}"),
            platform: None,
            etcd: Some(EtcdMember {
                id: i + 1,
                started: true,
                learner,
                leader: i == 0,
                peer_https: false,
            }),
            db: Default::default(),
            healthy: learner || (i as usize) < ready,
            position: None,
        });
    }
    obs.leader = Some("demo-0".into());
    obs
}

#[test]
fn available_means_a_ready_quorum_of_voters_with_a_leader() {
    let one = available(&three(1));
    assert_eq!(
        (one.status.as_str(), one.reason.as_str()),
        ("False", "QuorumNotReady")
    );
    assert!(
        one.message.contains("only 1 of 3 voting members"),
        "{}",
        one.message
    );
    let two = available(&three(2));
    assert_eq!(
        (two.status.as_str(), two.reason.as_str()),
        ("True", "QuorumAvailable")
    );
    assert!(
        two.message.contains("2 of 3 voting members ready"),
        "{}",
        two.message
    );
    let mut leaderless = three(3);
    leaderless.leader = None;
    assert_eq!(available(&leaderless).status, "False");
    let mut lost = three(0);
    lost.observed.membership_known = false;
    assert_eq!(available(&lost).reason, "QuorumLost");
}

fn facts<'a>(
    obs: &'a Observation,
    step: &'a Step,
    failure: Option<&'a Failure>,
    moves: &'a Moves,
    now: Instant,
) -> Facts<'a> {
    Facts {
        obs,
        step: Some(step),
        invalid: None,
        state_full: None,
        failure,
        failing: None,
        formed: true,
        lost: None,
        moves,
        size: Some(5),
        previous_phase: None,
        now,
    }
}

#[test]
fn etcd_refusing_a_scale_up_is_progress_until_it_lasts_a_minute() {
    let obs = three(3);
    let t0 = Instant::now();
    let step = Step::AddLearner;
    let refused = Failure::new(
        Failed::Step(step.clone()),
        "add a new member as a learner failed: etcdserver: unhealthy cluster".into(),
        true,
        None,
        t0,
    );
    let moves = Moves::default();
    let j = judge(&facts(&obs, &step, Some(&refused), &moves, t0));
    assert_eq!(j.phase, Phase::Scaling);
    assert_eq!(j.degraded.status, "False", "{:?}", j.degraded);
    assert_eq!(
        (j.progressing.status.as_str(), j.progressing.reason.as_str()),
        ("True", "WaitingForEtcd")
    );
    assert!(
        j.progressing.message.contains("unhealthy cluster"),
        "{}",
        j.progressing.message
    );
    let later = t0 + REFUSAL_GRACE;
    let j = judge(&facts(&obs, &step, Some(&refused), &moves, later));
    assert_eq!(
        (j.degraded.status.as_str(), j.degraded.reason.as_str()),
        ("True", "ActionFailed")
    );
}

#[test]
fn a_failed_upgrade_undone_by_the_spec_leaves_no_trouble_behind() {
    let obs = three(3);
    let t0 = Instant::now();
    let upgrade = Step::Upgrade {
        member: "demo-1".into(),
        to: "3.9.9".parse().expect("a version"),
    };
    let failed = Failure::new(
        Failed::Step(upgrade.clone()),
        "upgrade member demo-1 to 3.9.9 failed: no etcd 3.9.9 binary".into(),
        false,
        None,
        t0,
    );
    let moves = Moves::default();
    let j = judge(&facts(&obs, &upgrade, Some(&failed), &moves, t0));
    assert_eq!(
        (j.degraded.status.as_str(), j.degraded.reason.as_str()),
        ("True", "ActionFailed")
    );
    assert_eq!(j.phase, Phase::Upgrading);
    // The version set back: the plan converges, the failure says nothing.
    let j = judge(&facts(&obs, &Step::Converged, Some(&failed), &moves, t0));
    assert_eq!(j.degraded.status, "False", "{:?}", j.degraded);
    assert_eq!(j.phase, Phase::Running);
}

#[test]
fn a_member_that_died_is_degraded_one_upgraded_on_purpose_is_not() {
    let mut obs = three(3);
    obs.members = obs
        .observed
        .members
        .iter()
        .map(|m| crate::crd::MemberStatus {
            name: m.name.clone(),
            id: m.etcd.map(|e| format!("{:x}", e.id)),
            client_url: String::new(),
            peer_url: String::new(),
            ready: m.healthy && m.name != "demo-1",
            leader: m.etcd.is_some_and(|e| e.leader),
            learner: m.etcd.is_some_and(|e| e.learner),
            version: None,
            volume_size: None,
            storage_class_name: None,
        })
        .collect();
    let t0 = Instant::now();
    let waiting = Step::Wait(Wait::MemberNotReady {
        member: "demo-1".into(),
    });
    let none = Moves::default();
    let j = judge(&facts(&obs, &waiting, None, &none, t0));
    assert_eq!(
        (j.degraded.status.as_str(), j.degraded.reason.as_str()),
        ("True", "MembersNotReady")
    );
    assert_eq!(j.phase, Phase::Recovering);
    let mut moved = Moves::default();
    let upgrade = Step::Upgrade {
        member: "demo-1".into(),
        to: "3.5.1".parse().expect("a version"),
    };
    moved.acted(&upgrade, &obs, None, t0);
    let j = judge(&facts(&obs, &waiting, None, &moved, t0));
    assert_eq!(
        (j.degraded.status.as_str(), j.degraded.reason.as_str()),
        ("False", "AsPlanned")
    );
    assert_eq!(j.progressing.reason, "WaitingForUpgradedMember");
    assert_eq!(j.phase, Phase::Upgrading);
    // Past the deadline it is no progress any more.
    let late = t0 + crate::controller::facts::PROGRESS_DEADLINE;
    let j = judge(&facts(&obs, &waiting, None, &moved, late));
    assert_eq!(j.degraded.reason, "MembersNotReady");
}
