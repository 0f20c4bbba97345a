//! Property tests of the status judgement, on the plan's own model
//! cluster (`plan::props`):
//!
//! * every step the plan takes to carry out a spec change (a scale up or
//!   down, an upgrade, new settings) on an otherwise healthy cluster, with
//!   the members it moves slow to come back and etcd refusing membership
//!   changes now and then, is progress: `Degraded` never True, the phase
//!   never `Recovering`, and a quorum always available;
//! * every condition raised by an observation (a member down, an alarm, a
//!   member failing at start, a full state folder, an invalid spec, a
//!   failed step, a failed observation) clears once that cause is gone,
//!   and a step's failure once the plan chooses another step: the
//!   judgement is then the healthy cluster's, exactly.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::{Facts, Judged, judge};
use crate::controller::facts::{Failed, Failure, Moves};
use crate::crd::{MemberStatus, Phase};
use crate::member::MemberAddr;
use crate::observe::Observation;
use crate::plan::props::{Model, VERSIONS, desired_for};
use crate::plan::{Desired, Observed, Step, plan};
use crate::platform::PlatformMember;

/// The controller's observation of the model's state.
fn observation(o: &Observed) -> Observation {
    let name_of = |m: &crate::plan::Member| m.name.clone();
    let leader = o
        .members
        .iter()
        .find(|m| m.etcd.is_some_and(|e| e.leader))
        .map(name_of);
    let members = o
        .members
        .iter()
        .map(|m| MemberStatus {
            name: m.name.clone(),
            id: m.etcd.map(|e| format!("{:x}", e.id)),
            client_url: format!("http://{}:2379", m.name),
            peer_url: format!("http://{}:2380", m.name),
            ready: m.healthy,
            leader: m.etcd.is_some_and(|e| e.leader),
            learner: m.etcd.is_some_and(|e| e.learner),
            version: m.platform.as_ref().map(|p| p.version.to_string()),
            volume_size: None,
            storage_class_name: None,
        })
        .collect();
    let platform = o
        .members
        .iter()
        .filter_map(|m| {
            let p = m.platform.as_ref()?;
            Some(PlatformMember {
                addr: MemberAddr {
                    name: m.name.clone(),
                    peer_url: format!("http://{}:2380", m.name),
                    client_url: format!("http://{}:2379", m.name),
                },
                running: p.running,
                has_data: p.has_data,
                version: p.version,
                tuning: p.tuning,
                backend: p.backend.clone(),
                pod: p.pod.clone(),
                volume: p.volume.clone(),
                bootstrap: p.bootstrap,
                started_at: None,
                call_url: None,
                metrics_url: None,
                crash_looping: p.crash_looping,
                problem: None,
                moving: None,
                pod_ready: Some(!o.not_serving.contains(&m.name)),
                tls: p.tls.files.clone(),
            })
        })
        .collect();
    Observation {
        observed: o.clone(),
        members,
        platform,
        leader,
        ..Observation::default()
    }
}

/// The facts of a healthy, valid, formed cluster at `now`.
fn facts<'a>(
    obs: &'a Observation,
    step: &'a Step,
    moves: &'a Moves,
    d: &Desired,
    now: Instant,
) -> Facts<'a> {
    Facts {
        obs,
        step: Some(step),
        invalid: None,
        state_full: None,
        failure: None,
        failing: None,
        formed: true,
        lost: None,
        moves,
        size: Some(d.size),
        previous_phase: None,
        now,
    }
}

/// A spec change the plan carries out on a cluster of `size`.
#[derive(Clone, Debug)]
enum Change {
    Scale(usize),
    Upgrade,
    Tuning,
}

fn change() -> impl Strategy<Value = (usize, Change)> {
    prop_oneof![
        (1usize..=5, 1usize..=7).prop_map(|(n, k)| (n, Change::Scale(k))),
        (3usize..=5).prop_map(|n| (n, Change::Upgrade)),
        (3usize..=5).prop_map(|n| (n, Change::Tuning)),
    ]
}

proptest! {
    #[test]
    fn planned_steps_are_progress_never_degraded(
        (size, change) in change(),
        slow in prop::collection::vec(0u8..4, 40),
        refusals in prop::collection::vec(prop::bool::weighted(0.3), 40),
    ) {
        let base = desired_for(size, VERSIONS[0]);
        let mut model = Model::converged(&base).map_err(TestCaseError::fail)?;
        let d = match change {
            Change::Scale(k) => Desired { size: k, ..base },
            Change::Upgrade => Desired { version: VERSIONS[1], ..base },
            Change::Tuning => Desired {
                tuning: crate::member::Tuning::new(Some(25), Some(250)),
                ..base
            },
        };
        let t0 = Instant::now();
        let mut moves = Moves::default();
        let mut failure: Option<Failure> = None;
        // Members slow to come back, and for how many more passes.
        let mut starting: Vec<(String, u8)> = Vec::new();
        let mut converged = false;
        for pass in 0..200usize {
            let now = t0 + Duration::from_millis(100 * pass as u64);
            for (name, left) in &mut starting {
                *left = left.saturating_sub(1);
                if *left == 0 {
                    model.set_hung(name, false);
                }
            }
            starting.retain(|(_, left)| *left > 0);
            model.all_pods_ready();
            let obs = observation(&model.observed());
            moves.observed(&obs);
            let step = plan(&d, &obs.observed);
            if failure.as_ref().is_some_and(|f| !f.current(Some(&step))) {
                failure = None;
            }
            let f = Facts { failure: failure.as_ref(), ..facts(&obs, &step, &moves, &d, now) };
            let Judged { phase, available, progressing, degraded } = judge(&f);
            prop_assert_ne!(degraded.status.as_str(), "True", "{} ({}): {}; {:?}", step, degraded.reason, degraded.message, progressing);
            prop_assert!(
                !matches!(phase, Phase::Recovering | Phase::Degraded | Phase::Failed),
                "{}: phase {:?}, {:?}", step, phase, progressing
            );
            prop_assert_eq!(available.status.as_str(), "True", "{}: {}", step, available.message);
            if step == Step::Converged {
                prop_assert_eq!(phase, Phase::Running);
                converged = true;
                break;
            }
            if matches!(step, Step::Wait(_)) {
                continue;
            }
            let i = pass % refusals.len();
            if step.is_membership_change() && refusals[i] {
                let message = format!("{step} failed: etcdserver: unhealthy cluster");
                failure = Some(Failure::new(Failed::Step(step.clone()), message, true, failure.as_ref(), now));
                continue;
            }
            failure = None;
            let added = model.next_name();
            model.act(&d, &step);
            let added = (step == Step::AddLearner).then_some(added.as_str());
            moves.acted(&step, &obs, added, now);
            let moved = match &step {
                Step::AddLearner => added.map(str::to_string),
                Step::Upgrade { member, .. } | Step::Restart { member, .. } => Some(member.clone()),
                _ => None,
            };
            if let Some(name) = moved.filter(|_| slow[i] > 0) {
                model.set_hung(&name, true);
                starting.push((name, slow[i]));
            }
        }
        prop_assert!(converged, "no convergence");
    }

    #[test]
    fn a_condition_clears_once_its_cause_is_gone(
        size in 1usize..=5,
        causes in prop::collection::vec(0usize..CAUSES, 1..5),
        down in 1usize..=5,
        stale in any::<bool>(),
    ) {
        let d = desired_for(size, VERSIONS[0]);
        let model = Model::converged(&d).map_err(TestCaseError::fail)?;
        let t0 = Instant::now();
        let moves = Moves::default();
        let healthy_obs = observation(&model.observed());
        let converged = Step::Converged;
        let healthy = judge(&facts(&healthy_obs, &converged, &moves, &d, t0));
        prop_assert_eq!(healthy.degraded.status.as_str(), "False");
        prop_assert_eq!(healthy.available.status.as_str(), "True");
        prop_assert_eq!(healthy.phase, Phase::Running);
        // Causes go away one at a time; each time the judgement is that of
        // the causes left, and with none left the healthy one.
        let mut left: Vec<usize> = causes.clone();
        left.sort_unstable();
        left.dedup();
        while !left.is_empty() {
            let judged = with_causes(&model, &d, (&left, stale), down, t0);
            prop_assert_eq!(judged.degraded.status.as_str(), "True", "causes {:?}: {:?}", left, judged);
            left.remove(0);
        }
        // A step's failure is gone with the step: the plan chooses another.
        let judged = with_causes(&model, &d, (&[], stale), down, t0);
        prop_assert_eq!(judged, healthy);
    }
}

/// How many kinds of cause [`with_causes`] knows.
const CAUSES: usize = 7;

/// The judgement of the model's cluster with `causes` of trouble: 0
/// `down` members stopped, 1 NOSPACE raised, 2 a member failing at start,
/// 3 the state folder full, 4 an invalid spec, 5 the chosen step failed,
/// 6 observing failed; and with `stale`, an earlier step failed that the
/// plan no longer chooses (no trouble by itself).
fn with_causes(
    model: &Model,
    d: &Desired,
    (causes, stale): (&[usize], bool),
    down: usize,
    now: Instant,
) -> Judged {
    let mut model = model.clone();
    let names = model.names();
    if causes.contains(&0) {
        for name in names.iter().take(down.min(names.len())) {
            model.stop(name);
        }
    }
    if causes.contains(&1)
        && let Some(name) = names.first()
    {
        model.raise_nospace(name);
    }
    let failed = causes.contains(&6);
    let obs = if failed {
        Observation::default()
    } else {
        observation(&model.observed())
    };
    let step = plan(d, &obs.observed);
    let moves = Moves::default();
    let failure = if failed {
        Some(Failure::new(
            Failed::Observe,
            "cannot observe the cluster: the API server is away".into(),
            false,
            None,
            now,
        ))
    } else if causes.contains(&5) {
        Some(Failure::new(
            Failed::Step(step.clone()),
            format!("{step} failed: no such binary"),
            false,
            None,
            now,
        ))
    } else if stale {
        let earlier = Step::Upgrade {
            member: "c-1".into(),
            to: VERSIONS[1],
        };
        Some(Failure::new(
            Failed::Step(earlier),
            "upgrade member c-1 to 3.5.1 failed: no such binary".into(),
            false,
            None,
            now,
        ))
    } else {
        None
    };
    let step = if failed || causes.contains(&4) {
        None
    } else {
        Some(&step)
    };
    let facts = Facts {
        obs: &obs,
        step,
        invalid: causes
            .contains(&4)
            .then_some("spec.size: must be at least 1"),
        state_full: causes
            .contains(&3)
            .then_some("cannot write status.json: No space left on device"),
        failure: failure.as_ref(),
        failing: causes
            .contains(&2)
            .then_some("member c-1 failed 2 time(s) right after start"),
        formed: true,
        lost: None,
        moves: &moves,
        size: Some(d.size),
        previous_phase: Some(Phase::Running),
        now,
    };
    judge(&facts)
}
