//! Tests of the conditions the status carries.

use super::available;
use crate::observe::Observation;
use crate::plan::{EtcdMember, Member};

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
