use proptest::prelude::*;

use super::*;

fn member(name: &str, role: Role) -> MemberView {
    MemberView {
        name: name.into(),
        role,
        running: true,
        eligible: true,
    }
}

fn cluster(name: &str, roles: &[Role]) -> ClusterView {
    ClusterView {
        name: name.into(),
        members: roles
            .iter()
            .enumerate()
            .map(|(i, r)| member(&format!("{name}-{i}"), *r))
            .collect(),
    }
}

const HEALTHY3: [Role; 3] = [Role::Follower, Role::Leader, Role::Follower];

#[test]
fn leader_target_hits_the_leader() {
    let c = [cluster("a", &HEALTHY3)];
    for tick in 0..50 {
        assert_eq!(
            choose(7, tick, &c, Target::Leader, usize::MAX),
            vec![Pick {
                cluster: 0,
                member: 1
            }]
        );
    }
}

#[test]
fn follower_target_never_hits_leader_or_learner() {
    let c = [cluster("a", &[Role::Leader, Role::Learner, Role::Follower])];
    for tick in 0..50 {
        assert_eq!(
            choose(7, tick, &c, Target::Follower, usize::MAX),
            vec![Pick {
                cluster: 0,
                member: 2
            }]
        );
    }
}

#[test]
fn no_known_leader_means_no_victim() {
    let c = [cluster("a", &[Role::Unknown; 3])];
    assert!(choose(1, 0, &c, Target::Leader, usize::MAX).is_empty());
    assert_eq!(choose(1, 0, &c, Target::Random, usize::MAX).len(), 1);
}

#[test]
fn a_member_of_unknown_role_keeps_no_quorum() {
    // Two voters and a learner that does not answer yet: hitting either
    // voter loses quorum for good.
    let c = [cluster("a", &[Role::Leader, Role::Follower, Role::Unknown])];
    assert!(choose(1, 0, &c, Target::Minority, usize::MAX).is_empty());
    let c = [cluster(
        "a",
        &[Role::Leader, Role::Follower, Role::Follower, Role::Unknown],
    )];
    assert!(choose(1, 0, &c, Target::Minority, usize::MAX).is_empty());
    let c = [cluster(
        "a",
        &[Role::Leader, Role::Follower, Role::Follower, Role::Learner],
    )];
    assert_eq!(choose(1, 0, &c, Target::Minority, usize::MAX).len(), 1);
}

#[test]
fn minority_sizes() {
    for (size, want) in [(1, 0), (2, 0), (3, 1), (4, 1), (5, 2), (7, 3)] {
        let c = [cluster("a", &vec![Role::Follower; size])];
        assert_eq!(
            choose(3, 0, &c, Target::Minority, usize::MAX).len(),
            want,
            "size {size}"
        );
    }
}

#[test]
fn minority_counts_members_already_down() {
    let mut c = cluster("a", &[Role::Follower; 5]);
    c.members[0].running = false;
    assert_eq!(
        choose(3, 0, &[c.clone()], Target::Minority, usize::MAX).len(),
        1
    );
    c.members[1].running = false;
    assert!(choose(3, 0, &[c], Target::Minority, usize::MAX).is_empty());
}

#[test]
fn minority_ignores_learners_for_quorum() {
    // Mid-replacement: two voters and a new learner. Losing a voter loses
    // quorum, so nothing is hit.
    let c = [cluster("a", &[Role::Leader, Role::Follower, Role::Learner])];
    assert!(choose(3, 0, &c, Target::Minority, usize::MAX).is_empty());
}

#[test]
fn majority_sizes() {
    for (size, want) in [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3)] {
        let c = [cluster("a", &vec![Role::Follower; size])];
        assert_eq!(
            choose(3, 0, &c, Target::Majority, usize::MAX).len(),
            want,
            "size {size}"
        );
    }
}

#[test]
fn young_and_stopped_members_are_spared() {
    let mut c = cluster("a", &HEALTHY3);
    c.members[0].eligible = false;
    c.members[1].running = false;
    for tick in 0..50 {
        assert_eq!(
            choose(9, tick, &[c.clone()], Target::Random, usize::MAX),
            vec![Pick {
                cluster: 0,
                member: 2
            }]
        );
    }
}

#[test]
fn operator_target_picks_no_member() {
    assert!(choose(1, 0, &[cluster("a", &HEALTHY3)], Target::Operator, 9).is_empty());
}

#[test]
fn seeds_spread_over_members() {
    let c = [cluster("a", &HEALTHY3), cluster("b", &HEALTHY3)];
    let mut seen = std::collections::BTreeSet::new();
    for tick in 0..200 {
        seen.extend(choose(5, tick, &c, Target::Random, 1));
    }
    assert_eq!(seen.len(), 6, "every member is hit some time: {seen:?}");
}

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![
        Just(Role::Leader),
        Just(Role::Follower),
        Just(Role::Learner),
        Just(Role::Unknown)
    ]
}

fn member_view() -> impl Strategy<Value = MemberView> {
    (role(), any::<bool>(), any::<bool>()).prop_map(|(role, running, eligible)| MemberView {
        name: String::new(),
        role,
        running,
        eligible,
    })
}

fn clusters() -> impl Strategy<Value = Vec<ClusterView>> {
    prop::collection::vec(prop::collection::vec(member_view(), 0..8), 0..4).prop_map(|cs| {
        cs.into_iter()
            .enumerate()
            .map(|(i, members)| ClusterView {
                name: format!("c{i}"),
                members: members
                    .into_iter()
                    .enumerate()
                    .map(|(j, m)| MemberView {
                        name: format!("c{i}-{j}"),
                        ..m
                    })
                    .collect(),
            })
            .collect()
    })
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        Just(Target::Random),
        Just(Target::Leader),
        Just(Target::Follower),
        Just(Target::Minority),
        Just(Target::Majority),
        Just(Target::Operator),
    ]
}

proptest! {
    #[test]
    fn same_inputs_same_victims(seed: u64, tick: u64, cs in clusters(), t in target(), cap in 1usize..5) {
        prop_assert_eq!(choose(seed, tick, &cs, t, cap), choose(seed, tick, &cs.clone(), t, cap));
    }

    #[test]
    fn picks_are_distinct_eligible_and_capped(seed: u64, tick: u64, cs in clusters(), t in target(), cap in 1usize..5) {
        let picks = choose(seed, tick, &cs, t, cap);
        prop_assert!(picks.len() <= cap);
        let mut dedup = picks.clone();
        dedup.dedup();
        prop_assert_eq!(dedup.len(), picks.len());
        for p in &picks {
            let m = &cs[p.cluster].members[p.member];
            prop_assert!(m.running && m.eligible, "{:?}", m);
        }
        if matches!(t, Target::Random | Target::Leader | Target::Follower) {
            prop_assert!(picks.len() <= 1);
        }
        if let Some(first) = picks.first() {
            // A tick hits one cluster.
            prop_assert!(picks.iter().all(|p| p.cluster == first.cluster));
        }
    }

    #[test]
    fn something_is_hit_when_anything_can_be(seed: u64, tick: u64, cs in clusters()) {
        let any = cs.iter().any(|c| c.members.iter().any(|m| m.running && m.eligible));
        prop_assert_eq!(choose(seed, tick, &cs, Target::Random, 1).len(), usize::from(any));
    }

    #[test]
    fn minority_keeps_quorum(seed: u64, tick: u64, cs in clusters(), cap in 1usize..5) {
        let picks = choose(seed, tick, &cs, Target::Minority, cap);
        if let Some(first) = picks.first() {
            // Members of unknown role may be voters (in the quorum to keep)
            // or learners (keeping none of it): quorum holds either way.
            let c = &cs[first.cluster];
            let voters = c.voters();
            let sure = |i: usize, m: &MemberView| {
                m.running
                    && matches!(m.role, Role::Leader | Role::Follower)
                    && !picks.iter().any(|p| p.member == i)
            };
            let running_after = c.members.iter().enumerate().filter(|(i, m)| sure(*i, m)).count();
            prop_assert!(running_after > voters / 2, "{} of {} voters left", running_after, voters);
        }
    }

    #[test]
    fn majority_hits_more_than_half_unless_capped(seed: u64, tick: u64, cs in clusters()) {
        let picks = choose(seed, tick, &cs, Target::Majority, usize::MAX);
        if let Some(first) = picks.first() {
            let c = &cs[first.cluster];
            let hittable = c.members.iter().filter(|m| m.running && m.eligible).count();
            prop_assert_eq!(picks.len(), (c.members.len() / 2 + 1).min(hittable));
        }
    }

    #[test]
    fn role_targets_hit_their_role(seed: u64, tick: u64, cs in clusters()) {
        for (t, want) in [(Target::Leader, Role::Leader), (Target::Follower, Role::Follower)] {
            for p in choose(seed, tick, &cs, t, 1) {
                prop_assert_eq!(cs[p.cluster].members[p.member].role, want);
            }
        }
    }
}
