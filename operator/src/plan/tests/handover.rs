//! Scenario tests of the handover rule: the leader hands its leadership
//! over before a scale-down, an upgrade, new timing or a TLS change
//! restarts or removes it.

use super::super::*;
use super::{V35, cluster, desired, led_by, three, up, with};
use crate::member::Tuning;

#[test]
fn scale_down_hands_over_first_when_the_leader_must_go() {
    let mut m = three();
    m.push(up("demo-3", 4));
    m.push(up("demo-4", 5));
    // demo-1 is the most caught up of the members that stay; demo-3, more
    // caught up still, goes too.
    m[1].raft_index = 120;
    m[3].raft_index = 130;
    let m = led_by(m, "demo-4");
    assert_eq!(
        plan(&desired(3), &cluster(m.clone())),
        Step::MoveLeader {
            from: "demo-4".into(),
            to: "demo-1".into(),
            id: 2
        }
    );
    // Once demo-1 leads, demo-4 goes, then demo-3.
    let m = led_by(m, "demo-1");
    assert_eq!(
        plan(&desired(3), &cluster(m.clone())),
        Step::Remove {
            member: "demo-4".into(),
            id: 5,
            why: RemoveWhy::ScaleDown
        }
    );
    // Without the handover (a benchmark's switch) the leader goes at once.
    let mut d = desired(3);
    d.handover = false;
    assert!(matches!(
        plan(&d, &cluster(led_by(m, "demo-4"))),
        Step::Remove { id: 5, .. }
    ));
}

#[test]
fn the_handover_goes_to_the_most_caught_up_then_the_oldest() {
    let mut d = desired(3);
    d.version = V35;
    let mut m = three();
    for x in &mut m[1..] {
        if let Some(p) = &mut x.platform {
            p.version = V35;
        }
    }
    assert_eq!(
        plan(&d, &cluster(m.clone())),
        Step::MoveLeader {
            from: "demo-0".into(),
            to: "demo-1".into(),
            id: 2
        }
    );
    m[2].raft_index = 101;
    assert!(matches!(
        plan(&d, &cluster(m.clone())),
        Step::MoveLeader { id: 3, .. }
    ));
    // An unhealthy voter or a learner never leads.
    m[2] = with(m[2].clone(), |m| m.healthy = false);
    m[1] = with(m[1].clone(), |m| {
        if let Some(e) = &mut m.etcd {
            e.learner = true;
        }
    });
    assert!(!matches!(plan(&d, &cluster(m)), Step::MoveLeader { .. }));
}

#[test]
fn new_tuning_is_rolled_out_followers_first_leader_last_after_a_handover() {
    let mut d = desired(3);
    d.tuning = Tuning::new(Some(25), Some(250));
    let mut m = three();
    assert_eq!(
        plan(&d, &cluster(m.clone())),
        Step::Restart {
            member: "demo-1".into(),
            why: RestartWhy::Tuning
        }
    );
    for x in &mut m[1..] {
        if let Some(p) = &mut x.platform {
            p.tuning = d.tuning;
        }
    }
    assert!(matches!(
        plan(&d, &cluster(m.clone())),
        Step::MoveLeader { to, .. } if to == "demo-1"
    ));
    let m = led_by(m, "demo-1");
    assert_eq!(
        plan(&d, &cluster(m.clone())),
        Step::Restart {
            member: "demo-0".into(),
            why: RestartWhy::Tuning
        }
    );
    // A version change takes the tuning along: one restart, an Upgrade.
    d.version = V35;
    assert!(matches!(plan(&d, &cluster(m)), Step::Upgrade { .. }));
    // Fewer than 3 members cannot spare a restart.
    let mut d = desired(1);
    d.tuning = Tuning::new(Some(25), Some(250));
    assert_eq!(
        plan(&d, &cluster(vec![up("demo-0", 1)])),
        Step::Wait(Wait::RestartNeedsThreeMembers)
    );
}

#[test]
fn a_tls_restart_of_the_leader_hands_over_first() {
    let old = TlsWanted {
        peer: true,
        client: true,
        trust: "ca-1".into(),
    };
    let mut d = desired(3);
    d.tls = TlsWanted {
        trust: "ca-2".into(),
        ..old.clone()
    };
    let on = tls::for_new_member(&old, &[]);
    let mut m: Vec<Member> = three()
        .into_iter()
        .map(|x| {
            with(x, |x| {
                if let Some(p) = &mut x.platform {
                    p.tls = on.clone();
                }
                if let Some(e) = &mut x.etcd {
                    e.peer_https = true;
                }
            })
        })
        .collect();
    // New trusted CAs: followers restart first.
    assert!(matches!(
        plan(&d, &cluster(m.clone())),
        Step::Reconfigure { member, .. } if member == "demo-1"
    ));
    let renewed = tls::target(&d.tls, &on, &[&on]);
    assert_eq!(renewed.files.trust, "ca-2");
    for x in &mut m[1..] {
        if let Some(p) = &mut x.platform {
            p.tls = renewed.clone();
        }
    }
    // The leader last, after handing over to a member already restarted.
    assert!(matches!(
        plan(&d, &cluster(m.clone())),
        Step::MoveLeader { from, to, .. } if from == "demo-0" && to == "demo-1"
    ));
    let m = led_by(m, "demo-1");
    assert!(matches!(
        plan(&d, &cluster(m)),
        Step::Reconfigure { member, .. } if member == "demo-0"
    ));
}
