//! Scenario tests of the handover rule: the leader hands its leadership
//! over before an upgrade, new timing or a TLS change restarts it, and a
//! scale-down keeps it.

use super::super::*;
use super::{V35, cluster, desired, led_by, three, up, with};
use crate::member::Tuning;

/// Sets how far `m`'s log goes.
fn caught_up(m: &mut Member, raft_index: u64) {
    m.position = Some(Position {
        raft_index,
        revision: 50,
    });
}

#[test]
fn a_scale_down_keeps_the_leader_and_removes_the_newest_followers() {
    let mut m = three();
    m.push(up("demo-3", 4));
    m.push(up("demo-4", 5));
    let m = led_by(m, "demo-4");
    // The newest leads: it stays (no handover, no new leader), and the
    // newest followers go, the newest first.
    let remove = |member: &str, id| Step::Remove {
        member: member.into(),
        id,
        why: RemoveWhy::ScaleDown,
    };
    assert_eq!(plan(&desired(3), &cluster(m.clone())), remove("demo-3", 4));
    let left: Vec<Member> = m.iter().filter(|x| x.name != "demo-3").cloned().collect();
    assert_eq!(
        plan(&desired(3), &cluster(left.clone())),
        remove("demo-2", 3)
    );
    let left: Vec<Member> = left.into_iter().filter(|x| x.name != "demo-2").collect();
    assert_eq!(plan(&desired(3), &cluster(left)), Step::Converged);
    // Led by one of the oldest, the newest go as before.
    assert_eq!(
        plan(&desired(3), &cluster(led_by(m.clone(), "demo-1"))),
        remove("demo-4", 5)
    );
    // A scale-down to one member keeps the leader too.
    assert_eq!(
        plan(&desired(1), &cluster(led_by(m.clone(), "demo-2"))),
        remove("demo-4", 5)
    );
    // Without the handover (a benchmark's switch) the newest go, the
    // leader among them, at once.
    let mut d = desired(3);
    d.handover = false;
    assert_eq!(plan(&d, &cluster(m)), remove("demo-4", 5));
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
    caught_up(&mut m[2], 101);
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
            why: RestartWhy::Settings {
                changed: vec!["spec.tuning"]
            }
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
            why: RestartWhy::Settings {
                changed: vec!["spec.tuning"]
            }
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

#[test]
fn a_rolling_restart_waits_for_the_last_restarted_pod_to_be_ready() {
    let mut d = desired(3);
    d.tuning = Tuning::new(Some(25), Some(250));
    let mut m = three();
    // demo-1 was restarted first; etcd calls it healthy, its pod is not
    // Ready yet: the next member waits (issue: 1 of 3 pods Ready).
    if let Some(p) = &mut m[1].platform {
        p.tuning = d.tuning;
    }
    let mut o = cluster(m);
    o.not_serving = vec!["demo-1".into()];
    assert_eq!(
        plan(&d, &o),
        Step::Wait(Wait::MemberNotReady {
            member: "demo-1".into()
        })
    );
    o.not_serving.clear();
    assert!(matches!(plan(&d, &o), Step::Restart { member, .. } if member == "demo-2"));
    // The member to restart itself not being Ready does not hold it.
    o.not_serving = vec!["demo-2".into()];
    assert!(matches!(plan(&d, &o), Step::Restart { member, .. } if member == "demo-2"));
}
