//! The safety rules every step is checked against, and the properties run
//! over random interleavings of faults and steps.

use proptest::prelude::*;

use super::db_rules::check_db_step;
use super::faults::{Event, Fault, FaultKind, event, fault};
use super::rebuild::check_rebuild;
use super::*;
use crate::member::Tuning;

/// Checks one step against the safety rules, given the model before it.
fn check_step(model: &Model, obs: &Observed, d: &Desired, step: &Step) -> Result<(), String> {
    if d.paused && !matches!(step, Step::Wait(Wait::Paused)) {
        return Err(format!("acted while paused: {step}"));
    }
    if model.bootstrapped && *step == Step::Bootstrap {
        return Err("bootstrapped over a cluster that exists".into());
    }
    if model.bootstrapped && !obs.membership_known {
        let rebuild = matches!(
            step,
            Step::RestoreFromBackup | Step::RebuildFromSurvivor { .. }
        );
        if !(rebuild || matches!(step, Step::Start { .. } | Step::Wait(_))) {
            return Err(format!(
                "without quorum it may only restart members (or, with quorum gone for good, \
                 rebuild): {step}"
            ));
        }
    }
    check_rebuild(model, obs, d, step)?;
    if model.reseeding.is_some()
        && matches!(
            step,
            Step::AddLearner
                | Step::Promote { .. }
                | Step::Remove { .. }
                | Step::DeleteStray { .. }
        )
    {
        return Err(format!(
            "changed the membership while the seed still starts with --force-new-cluster: {step}"
        ));
    }
    if matches!(step, Step::FinishReseed { .. }) && !obs.membership_known {
        return Err("settled the seed before it served".into());
    }
    let planned = step.is_planned_restart()
        || matches!(
            step,
            Step::Remove {
                why: RemoveWhy::ScaleDown,
                ..
            }
        );
    if planned
        && let Some(other) = obs
            .not_serving
            .iter()
            .find(|m| Some(m.as_str()) != step.disrupts())
    {
        return Err(format!(
            "planned disruption while the pod of {other} is not Ready (a PodDisruptionBudget \
             broken by the operator's own hand): {step}"
        ));
    }
    let all_healthy = obs.members.iter().all(|m| m.healthy);
    let target_healthy = |name: &str| obs.members.iter().any(|m| m.name == name && m.healthy);
    match step {
        Step::AddLearner | Step::Promote { .. } if !all_healthy => {
            return Err(format!(
                "membership change while a member is unhealthy: {step}"
            ));
        }
        Step::Remove { member, .. } if target_healthy(member) && !all_healthy => {
            return Err(format!(
                "removed healthy {member} while another member is unhealthy"
            ));
        }
        _ => {}
    }
    // One membership change at a time: a new one (add, scale down) only when
    // no earlier one is in flight (a learner not yet promoted, a member
    // added but not started), and only one learner ever.
    let learners: Vec<&str> = obs
        .members
        .iter()
        .filter(|m| m.etcd.is_some_and(|e| e.learner))
        .map(|m| m.name.as_str())
        .collect();
    let unstarted: Vec<&str> = obs
        .members
        .iter()
        .filter(|m| m.etcd.is_some_and(|e| !e.started))
        .map(|m| m.name.as_str())
        .collect();
    let in_flight_besides = |member: &str| learners.iter().chain(&unstarted).any(|l| *l != member);
    match step {
        Step::AddLearner if !learners.is_empty() || !unstarted.is_empty() => {
            return Err(format!(
                "added a member while another change is in flight (learners {learners:?}, \
                 unstarted {unstarted:?})"
            ));
        }
        Step::Promote { member, .. } if learners.iter().any(|l| l != member) => {
            return Err(format!(
                "promoted {member} beside other learners {learners:?}"
            ));
        }
        // Taking back the change in flight itself is fine, and so is removing
        // a member that is down (it only makes quorum easier to keep).
        Step::Remove {
            member,
            why: RemoveWhy::ScaleDown,
            ..
        } if target_healthy(member) && in_flight_besides(member) => {
            return Err(format!(
                "scaled down while another change is in flight: {step}"
            ));
        }
        _ => {}
    }
    // The handover rule: a planned restart or removal never takes the
    // leader of a healthy cluster while another voter can lead; that voter
    // gets the leadership first, and only a healthy voter ever does.
    let leader = model.leader();
    let can_lead = |id: Option<u64>| {
        model
            .voters()
            .any(|m| Model::up(m) && Some(m.id) == id && m.started)
    };
    let another_leader = model
        .voters()
        .any(|m| Model::up(m) && m.started && Some(m.id) != leader);
    if d.handover && model.bootstrapped && leader.is_some() {
        let victim = step
            .disrupts()
            .and_then(|v| model.members.iter().find(|m| m.name == v));
        if victim.is_some_and(|v| Some(v.id) == leader) && another_leader {
            return Err(format!(
                "{step}: the leader of a healthy cluster without a handover first"
            ));
        }
    }
    if let Step::MoveLeader { from, id, .. } = step {
        let from_leads = model
            .members
            .iter()
            .any(|m| &m.name == from && Some(m.id) == leader);
        if !from_leads || Some(*id) == leader || !can_lead(Some(*id)) {
            return Err(format!(
                "{step}: leadership goes only from the leader to another healthy voter"
            ));
        }
    }
    check_db_step(model, obs, d, step)?;
    // Quorum by the plan's own hand: apply only the step's immediate effect
    // (a restarted member is down until it comes back).
    if model.bootstrapped && model.has_quorum() {
        let mut after = model.clone();
        match step {
            Step::Remove { member, .. } => after.members.retain(|m| &m.name != member),
            Step::Upgrade { member, .. }
            | Step::Restart { member, .. }
            | Step::Reconfigure { member, .. } => after.find(member).running = false,
            Step::Promote { member, .. } => after.find(member).learner = false,
            _ => {}
        }
        if !after.has_quorum() {
            return Err(format!("step loses quorum: {step}"));
        }
    }
    Ok(())
}

/// Peer and client TLS on, trusting one CA.
fn tls_on() -> TlsWanted {
    TlsWanted {
        peer: true,
        client: true,
        trust: "ca-1".into(),
    }
}

pub(super) fn desired(size: usize, version: Version, storage: StoragePolicy) -> Desired {
    Desired {
        size,
        version,
        storage,
        paused: false,
        restore_from_backup: false,
        tls: TlsWanted::default(),
        tuning: Tuning::default(),
        backend: Backend {
            quota_backend_bytes: Some(QUOTA),
            compaction: None,
            standby: false,
        },
        pod: Default::default(),
        volume: None,
        storage_class: None,
        handover: true,
        db: DbPolicy {
            quota: QUOTA,
            fragmentation: Some(50),
        },
        from_survivor: false,
    }
}

/// Runs the plan without faults until it stops acting; returns the last step.
pub(super) fn converge(model: &mut Model, d: &Desired) -> Result<Step, String> {
    for _ in 0..200 {
        // The operator waits for a defragmentation to end, and for a
        // restarted pod to be Ready.
        for m in &mut model.members {
            m.defragging = false;
            m.pod_ready = true;
        }
        let obs = model.observe();
        let step = plan(d, &obs);
        check_step(model, &obs, d, &step)?;
        if matches!(step, Step::Wait(_) | Step::Converged) {
            return Ok(step);
        }
        model.apply(d, &step);
    }
    Err("no convergence within 200 steps".into())
}

fn storage() -> impl Strategy<Value = StoragePolicy> {
    prop_oneof![
        3 => Just(StoragePolicy::Persistent),
        1 => Just(StoragePolicy::Ephemeral),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Every step taken under random faults keeps the rules, and once the
    /// faults stop (and hung members resume) the cluster converges to the
    /// last size asked for, healthy and on the spec's version.
    #[test]
    fn safe_under_faults_and_converges(
        size in 1usize..=9,
        storage in storage(),
        upgrade in any::<bool>(),
        tls in any::<bool>(),
        events in prop::collection::vec(event(), 0..80),
    ) {
        let mut d = desired(size, V34, storage);
        let mut model = Model::new(storage);
        let first = converge(&mut model, &d).map_err(TestCaseError::fail)?;
        prop_assert_eq!(first, Step::Converged);
        if upgrade {
            d.version = V35;
        }
        if tls {
            d.tls = tls_on();
        }
        for e in &events {
            match e {
                Event::Fault(f) => model.fault(f),
                Event::Resize(n) => d.size = *n,
                Event::Retune(t) => d.tuning = *t,
                Event::Write(lagging) => model.write(*lagging),
                Event::Step => {
                    let obs = model.observe();
                    let step = plan(&d, &obs);
                    check_step(&model, &obs, &d, &step).map_err(TestCaseError::fail)?;
                    model.apply(&d, &step);
                }
            }
        }
        model.fault(&Fault { kind: FaultKind::Unhang, victim: 0 });
        let last = converge(&mut model, &d).map_err(TestCaseError::fail)?;
        let voters = model.voters().count();
        if last == Step::Wait(Wait::DefragWouldRiskQuorum) {
            prop_assert!(voters == 2, "NOSPACE not cleared with {} voters", voters);
            return Ok(());
        }
        prop_assert!(model.nospace.is_none(), "NOSPACE left: {:?}", model);
        // Where good voters form a quorum they agree on one hash, and the
        // plan does not stop while a member differs from it.
        let corrupt = model.corrupt_voters();
        if voters - corrupt >= quorum(voters.max(1)) {
            prop_assert_eq!(corrupt, 0, "a corrupt minority left: {:?}", model);
        }
        let small = [Wait::UpgradeNeedsThreeMembers, Wait::RestartNeedsThreeMembers];
        if matches!(&last, Step::Wait(w) if small.contains(w)) {
            prop_assert!(voters < 3, "upgrade refused with {} voters", voters);
            return Ok(());
        }
        prop_assert_eq!(&last, &Step::Converged, "model: {:?}", model);
        prop_assert_eq!(voters, d.size);
        prop_assert_eq!(model.members.len(), d.size, "no learners or strays left");
        prop_assert!(model.members.iter().all(|m| Model::up(m) && m.version == d.version));
        prop_assert!(model.members.iter().all(|m| m.tuning == d.tuning));
        let settled = tls::for_new_member(&d.tls, &[]);
        prop_assert!(model.members.iter().all(|m| m.tls == settled && m.listed_https == settled.peer_https));
    }

    /// A scale-down of a healthy cluster led by any member never changes
    /// the leader: no handover, no removal of the leader, and it still leads
    /// once the cluster has the size asked for.
    #[test]
    fn a_scale_down_keeps_the_leader(
        size in 2usize..=7,
        down in 1usize..=6,
        lead in 0usize..7,
    ) {
        let mut d = desired(size, V34, StoragePolicy::Persistent);
        let mut model = Model::new(StoragePolicy::Persistent);
        converge(&mut model, &d).map_err(TestCaseError::fail)?;
        let first = model.members[lead % size].id;
        model.preferred = Some(first);
        d.size = size.saturating_sub(down).max(1);
        for _ in 0..200 {
            model.pods_ready();
            let obs = model.observe();
            let step = plan(&d, &obs);
            check_step(&model, &obs, &d, &step).map_err(TestCaseError::fail)?;
            prop_assert!(!matches!(step, Step::MoveLeader { .. }), "a scale-down moved the leadership: {}", step);
            let hits_leader = step.disrupts().is_some_and(|v| model.find_id(v) == Some(first));
            prop_assert!(!hits_leader, "a scale-down removed the leader: {}", step);
            if matches!(step, Step::Wait(_) | Step::Converged) {
                break;
            }
            model.apply(&d, &step);
        }
        prop_assert_eq!(plan(&d, &model.observe()), Step::Converged);
        prop_assert_eq!(model.voters().count(), d.size);
        prop_assert_eq!(model.leader(), Some(first));
    }

    /// Scale-downs, upgrades, new timing and turning TLS on from a healthy
    /// cluster led by any member: the leader is never restarted or removed while another
    /// voter can lead (checked on every step), and whenever the planned
    /// work reached the leader, it had handed its leadership over first.
    #[test]
    fn the_leader_hands_over_before_planned_disruption(
        size in 3usize..=7,
        down in 0usize..=4,
        upgrade in any::<bool>(),
        retune in any::<bool>(),
        tls in any::<bool>(),
        lead in 0usize..7,
    ) {
        let mut d = desired(size, V34, StoragePolicy::Persistent);
        let mut model = Model::new(StoragePolicy::Persistent);
        converge(&mut model, &d).map_err(TestCaseError::fail)?;
        let first = model.members[lead % size].id;
        model.preferred = Some(first);
        d.size = size.saturating_sub(down).max(1);
        if upgrade {
            d.version = V35;
        }
        if retune {
            d.tuning = Tuning::new(Some(25), Some(250));
        }
        if tls {
            d.tls = tls_on();
        }
        let mut handed_over = false;
        let mut disrupted = false;
        for _ in 0..200 {
            model.pods_ready();
            let obs = model.observe();
            let step = plan(&d, &obs);
            check_step(&model, &obs, &d, &step).map_err(TestCaseError::fail)?;
            match &step {
                Step::MoveLeader { .. } if model.leader() == Some(first) => handed_over = true,
                s if s.disrupts().is_some_and(|v| model.find_id(v) == Some(first)) => {
                    disrupted = true;
                }
                Step::Wait(_) | Step::Converged => break,
                _ => {}
            }
            model.apply(&d, &step);
        }
        prop_assert!(!disrupted || handed_over, "the first leader was disrupted without a handover");
        let last = plan(&d, &model.observe());
        let small = [Wait::UpgradeNeedsThreeMembers, Wait::RestartNeedsThreeMembers];
        if !matches!(&last, Step::Wait(w) if small.contains(w)) {
            prop_assert_eq!(last, Step::Converged);
            prop_assert!(model.members.iter().all(|m| m.version == d.version && m.tuning == d.tuning));
            let settled = tls::for_new_member(&d.tls, &[]);
            prop_assert!(model.members.iter().all(|m| m.tls == settled));
        }
    }

    /// When a majority of voters lost their data the plan never invents a
    /// new cluster and never removes voters: it restarts what it can, then
    /// waits.
    #[test]
    fn never_overwrites_a_cluster_that_lost_quorum(
        (size, destroyed, killed) in (3usize..=9).prop_flat_map(|size| (
            Just(size),
            prop::sample::subsequence((0..size).collect::<Vec<_>>(), (size - quorum(size) + 1)..=size),
            prop::collection::vec(any::<bool>(), size),
        )),
    ) {
        let d = desired(size, V34, StoragePolicy::Persistent);
        let mut model = Model::new(StoragePolicy::Persistent);
        converge(&mut model, &d).map_err(TestCaseError::fail)?;
        for (i, m) in model.members.iter_mut().enumerate() {
            if destroyed.contains(&i) {
                m.running = false;
                m.has_data = false;
            } else if killed[i] {
                m.running = false;
            }
        }
        let mut flagged = model.clone();
        let last = converge(&mut model, &d).map_err(TestCaseError::fail)?;
        prop_assert!(
            matches!(last, Step::Wait(Wait::QuorumLost { .. })),
            "expected to wait on quorum loss, got {}", last
        );
        prop_assert_eq!(model.voters().count(), size);
        // With restoreFromBackup on, the same state is rebuilt from the
        // backup and converges.
        let d = Desired { restore_from_backup: true, ..d };
        let last = converge(&mut flagged, &d).map_err(TestCaseError::fail)?;
        prop_assert_eq!(last, Step::Converged);
        prop_assert!(flagged.restored);
        prop_assert_eq!(flagged.voters().count(), size);
    }

    /// Damaged data is judged by a majority: with a good majority the
    /// corrupt members (each damaged its own way) are replaced one by one
    /// and the cluster converges, all good; when the corrupt members are a
    /// majority no member is replaced as corrupt (no majority agrees).
    #[test]
    fn corruption_is_judged_by_a_majority(
        (size, corrupted) in (1usize..=9).prop_flat_map(|size| (
            Just(size),
            prop::sample::subsequence((0..size).collect::<Vec<_>>(), 0..=size),
        )),
    ) {
        let d = desired(size, V34, StoragePolicy::Persistent);
        let mut model = Model::new(StoragePolicy::Persistent);
        converge(&mut model, &d).map_err(TestCaseError::fail)?;
        for i in &corrupted {
            model.fault(&Fault { kind: FaultKind::Corrupt, victim: *i });
        }
        let before: Vec<String> = model.members.iter().map(|m| m.name.clone()).collect();
        let last = converge(&mut model, &d).map_err(TestCaseError::fail)?;
        prop_assert_eq!(last, Step::Converged);
        prop_assert_eq!(model.voters().count(), size);
        if size - corrupted.len() >= quorum(size) {
            prop_assert!(model.members.iter().all(|m| m.hash == TRUTH), "{:?}", model);
        } else {
            let after: Vec<String> = model.members.iter().map(|m| m.name.clone()).collect();
            prop_assert_eq!(after, before, "members replaced on a corrupt majority's word");
            prop_assert_eq!(model.corrupt_voters(), corrupted.len());
        }
    }

    /// Paused means no action at all, whatever the state.
    #[test]
    fn paused_never_acts(size in 1usize..=9, events in prop::collection::vec(fault(), 0..10)) {
        let mut d = desired(size, V34, StoragePolicy::Persistent);
        let mut model = Model::new(StoragePolicy::Persistent);
        converge(&mut model, &d).map_err(TestCaseError::fail)?;
        for f in &events {
            model.fault(f);
        }
        d.paused = true;
        prop_assert_eq!(plan(&d, &model.observe()), Step::Wait(Wait::Paused));
    }
}
