//! The judgement of a cluster each pass: phase, `Available`, `Progressing`
//! and `Degraded`, computed from the observation, the step the plan chose
//! and the [`Facts`] beside them, with no clock and no I/O (`now` is
//! given), so every condition clears the pass its cause is gone.
//!
//! * A step the plan chose, and a member it moved on purpose (added,
//!   upgraded, restarted) on its way back, are `Progressing` with a reason
//!   that names what the step waits for: never `Degraded`. So is etcd
//!   refusing a step for now (for 5 s after a member reconnects), up to
//!   [`REFUSAL_GRACE`](crate::controller::facts::REFUSAL_GRACE).
//! * `Degraded` is the cluster worse than its spec for a reason the
//!   operator did not choose: a member that died or is not ready and was
//!   not moved, quorum trouble, alarms, members failing at start, an
//!   invalid spec, a full state folder, an action that failed while the
//!   plan still chooses it.
//! * The phase of planned work says the work (`Scaling`, `Upgrading`);
//!   `Recovering` is for repairs.

use std::time::Instant;

use super::cond;
use crate::controller::facts::{Failed, Failure, Lost, MoveKind, Moves};
use crate::crd::{Condition, Phase};
use crate::observe::Observation;
use crate::plan::{AlarmKind, RemoveWhy, Step, Wait, quorum};

/// Everything the judgement reads.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    /// This pass's observation (empty when observing failed).
    pub obs: &'a Observation,
    /// The step the plan chose (`None`: invalid spec, or nothing observed).
    pub step: Option<&'a Step>,
    /// Why the spec is invalid, if it is.
    pub invalid: Option<&'a str>,
    /// The last write that failed for lack of space, while it lasts.
    pub state_full: Option<&'a str>,
    /// The last failure ([`Failure::current`] decides whether it counts).
    pub failure: Option<&'a Failure>,
    /// Members failing at start or stuck, with why (from their logs or pods).
    pub failing: Option<&'a str>,
    /// Every member was ready once: until then members coming up are the
    /// cluster being created.
    pub formed: bool,
    /// What was lost that the steps under way replace.
    pub lost: Option<&'a Lost>,
    /// Members moved on purpose, not ready again yet.
    pub moves: &'a Moves,
    /// The voting members the spec asks for (`None`: invalid spec).
    pub size: Option<usize>,
    /// The phase published last (kept while nothing can be observed).
    pub previous_phase: Option<Phase>,
    /// Now.
    pub now: Instant,
}

/// The judgement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judged {
    /// One word for where the cluster stands.
    pub phase: Phase,
    /// A quorum serves.
    pub available: Condition,
    /// The step under way, what it waits for.
    pub progressing: Condition,
    /// Worse than the spec, not by choice.
    pub degraded: Condition,
}

/// A member that is not ready, and why.
struct Unready {
    name: String,
    note: String,
    /// Moved (or on its way) as planned.
    planned: bool,
}

/// Judges the cluster.
pub fn judge(f: &Facts) -> Judged {
    let observe = f.failure.filter(|x| x.what == Failed::Observe);
    let available = match observe {
        Some(_) => condition(
            "Available",
            "Unknown",
            "NotObserved",
            "the cluster could not be observed this pass".into(),
        ),
        None => available(f.obs),
    };
    let unready = unready(f);
    let degraded = degraded(f, &unready);
    let (phase, progressing) = match (f.invalid, observe, f.step) {
        (Some(_), _, _) | (None, None, None) => (
            Phase::Invalid,
            cond(
                "Progressing",
                false,
                "InvalidSpec",
                "waiting for a valid spec".into(),
            ),
        ),
        (None, Some(x), _) => (
            f.previous_phase.unwrap_or_default(),
            condition("Progressing", "Unknown", "NotObserved", x.message.clone()),
        ),
        (None, None, Some(step)) => progress(f, step, &unready),
    };
    Judged {
        phase,
        available,
        progressing,
        degraded,
    }
}

fn condition(type_: &str, status: &str, reason: &str, message: String) -> Condition {
    Condition {
        status: status.into(),
        ..cond(type_, false, reason, message)
    }
}

/// Members not ready, each said planned or not.
fn unready(f: &Facts) -> Vec<Unready> {
    let obs = f.obs;
    let known = obs.observed.membership_known;
    obs.members
        .iter()
        .filter(|m| !m.ready)
        .map(|m| {
            let name = m.name.clone();
            let member = obs.observed.members.iter().find(|o| o.name == m.name);
            let platform = obs.platform.iter().find(|p| p.addr.name == m.name);
            let etcd = member.and_then(|o| o.etcd);
            let moving = platform.and_then(|p| p.moving.clone());
            if let Some(mv) = f.moves.on_its_way(&name, f.now) {
                let note = moving.unwrap_or_else(|| mv.kind.note());
                return Unready {
                    name,
                    note,
                    planned: true,
                };
            }
            let planned = |note: String| Unready {
                name: name.clone(),
                note,
                planned: true,
            };
            if !f.formed {
                return planned("on its way up: the cluster is being created".into());
            }
            if etcd.is_some_and(|e| e.learner || !e.started) {
                return planned("a new member: it starts and catches up".into());
            }
            if let Some(note) = moving {
                return planned(note);
            }
            if known && etcd.is_none() && platform.is_some() {
                return planned("not in etcd's member list: it is deleted".into());
            }
            let note = match (platform, f.moves.get(&name)) {
                (_, Some(mv)) => format!(
                    "{}, and still not ready after {}",
                    mv.kind.note(),
                    humantime::format_duration(crate::controller::facts::PROGRESS_DEADLINE)
                ),
                (None, _) => "the platform has no such member".into(),
                (Some(p), _) if !p.running => "stopped".into(),
                (Some(_), _) => "runs but does not answer with a leader".into(),
            };
            Unready {
                name,
                note,
                planned: false,
            }
        })
        .collect()
}

fn listed(members: &[&Unready]) -> String {
    let parts: Vec<String> = members
        .iter()
        .map(|u| format!("{} ({})", u.name, u.note))
        .collect();
    parts.join(", ")
}

/// `Degraded`: the first trouble found, in order of what a user must hear
/// of first; False when there is none.
fn degraded(f: &Facts, unready: &[Unready]) -> Condition {
    let yes = |reason: &str, message: String| cond("Degraded", true, reason, message);
    if let Some(message) = f.invalid {
        return yes(
            "InvalidSpec",
            format!("{message}; nothing is done until it is fixed"),
        );
    }
    if let Some(Step::Wait(w)) = f.step
        && w.is_problem()
    {
        let message = match f.failing {
            Some(failing) => format!("{w}; {failing}"),
            None => w.to_string(),
        };
        return yes(w.reason(), message);
    }
    if let Some(e) = f.state_full {
        return yes(
            "StateFolderFull",
            format!(
                "state folder full: {e}; members that stop cannot start again and status files \
                 are not written until space is freed (this status is the operator's own, kept \
                 in memory)"
            ),
        );
    }
    if let Some(x) = f.failure {
        match &x.what {
            Failed::Observe => return yes("ObserveFailed", x.message.clone()),
            Failed::Record => return yes("ActionFailed", x.message.clone()),
            Failed::Step(s) if x.current(f.step) && !x.waits_for_etcd(s, f.now) => {
                return yes("ActionFailed", x.message.clone());
            }
            Failed::Step(_) => {}
        }
    }
    if let Some((reason, message)) = alarm_note(f.obs, f.step) {
        return yes(reason, message);
    }
    if let Some(failing) = f.failing {
        return yes("MemberFailing", failing.to_string());
    }
    let trouble: Vec<&Unready> = unready.iter().filter(|u| !u.planned).collect();
    if !trouble.is_empty() {
        return yes(
            "MembersNotReady",
            format!("not ready: {}", listed(&trouble)),
        );
    }
    if let Some(lost) = f.lost.filter(|l| !l.planned()) {
        let doing = f.step.map(|s| format!("; {s}")).unwrap_or_default();
        return yes(lost.reason(), format!("{}{doing}", lost.message()));
    }
    let planned: Vec<&Unready> = unready.iter().filter(|u| u.planned).collect();
    if planned.is_empty() {
        cond(
            "Degraded",
            false,
            "AllMembersReady",
            "every member is ready".into(),
        )
    } else {
        cond(
            "Degraded",
            false,
            "AsPlanned",
            format!(
                "members not ready are on their way as planned: {}",
                listed(&planned)
            ),
        )
    }
}

/// The phase and `Progressing` for a pass that chose `step`.
fn progress(f: &Facts, step: &Step, unready: &[Unready]) -> (Phase, Condition) {
    let (phase, reason) = activity(f, step);
    let mut message = step.to_string();
    if let Some(x) = f.failure.filter(|x| x.waits_for_etcd(step, f.now)) {
        message = format!(
            "{}; etcd refuses it for now (it takes membership changes again once every member \
             has been connected for 5 s): asked again every {} ms",
            x.message,
            crate::controller::REFUSED_RETRY.as_millis()
        );
        return (phase, cond("Progressing", true, "WaitingForEtcd", message));
    }
    if let Step::Wait(Wait::MemberNotReady { member }) = step
        && let Some(u) = unready.iter().find(|u| &u.name == member)
    {
        message = format!("{message} ({})", u.note);
    }
    let progressing = match phase {
        Phase::Running if *step == Step::Converged => cond(
            "Progressing",
            false,
            reason,
            "the cluster matches the spec".into(),
        ),
        Phase::Paused | Phase::Degraded | Phase::Failed => {
            cond("Progressing", false, reason, message)
        }
        _ => cond("Progressing", true, reason, message),
    };
    (phase, progressing)
}

/// The phase a step puts the cluster in, and the reason `Progressing`
/// gives for it.
fn activity(f: &Facts, step: &Step) -> (Phase, &'static str) {
    let obs = f.obs;
    let repairing = f.lost.is_some_and(|l| !l.planned());
    // A member added while the cluster has its size (a learner beside
    // them, or one voter over) takes the place of one on an old storage
    // class: the plan adds no other.
    let full = f.size.is_some_and(|size| {
        let etcd = || obs.observed.members.iter().filter_map(|m| m.etcd);
        let voters = etcd().filter(|e| !e.learner).count();
        let learner = etcd().any(|e| e.learner) || *step == Step::AddLearner;
        voters > size || (voters == size && learner)
    });
    let grow = match f.lost {
        Some(l) if l.planned() => (Phase::Upgrading, l.reason()),
        Some(_) => (Phase::Recovering, "ReplacingMember"),
        None if full => (Phase::Upgrading, "MovingToStorageClass"),
        None => (Phase::Scaling, "ScalingUp"),
    };
    let moved = |member: &str| f.moves.on_its_way(member, f.now).map(|m| &m.kind);
    match step {
        Step::Converged => (Phase::Running, "Converged"),
        Step::Bootstrap => (Phase::Creating, "Bootstrapping"),
        Step::Wait(Wait::Paused) => (Phase::Paused, "Paused"),
        Step::Wait(Wait::Forming) => (Phase::Creating, "Forming"),
        Step::Wait(w @ Wait::RestoreNotFound { .. }) => (Phase::Failed, w.reason()),
        Step::Wait(w) if w.is_problem() => (Phase::Degraded, w.reason()),
        Step::Wait(_) if !obs.observed.bootstrapped => (Phase::Creating, "Forming"),
        // The first members of a new cluster coming up one by one (pods
        // scheduled, claims bound, learners added): creation goes on.
        Step::Wait(_) | Step::Start { .. } | Step::AddLearner | Step::Promote { .. }
            if !f.formed =>
        {
            (Phase::Creating, "Forming")
        }
        Step::Wait(Wait::MemberNotReady { member }) => match moved(member) {
            Some(MoveKind::Added) => (grow.0, "WaitingForNewMember"),
            Some(MoveKind::Upgraded { .. }) => (Phase::Upgrading, "WaitingForUpgradedMember"),
            Some(MoveKind::Restarted | MoveKind::Reconfigured) => {
                (Phase::Upgrading, "WaitingForRestartedMember")
            }
            Some(MoveKind::Reseeded) => (Phase::Recovering, "RebuildingFromSurvivor"),
            None if crate::controller::facts::newcomer(obs, member) => {
                (grow.0, "WaitingForNewMember")
            }
            None if moving(obs, member) => (Phase::Upgrading, "WaitingForUpgradedMember"),
            None => (Phase::Recovering, "WaitingForMember"),
        },
        Step::Wait(w @ Wait::VolumeGrowing { .. }) => (Phase::Running, w.reason()),
        Step::Wait(_) => (Phase::Recovering, "WaitingForMember"),
        Step::Upgrade { .. } => (Phase::Upgrading, "Upgrading"),
        Step::Restart { .. } => (Phase::Upgrading, "Restarting"),
        Step::Reconfigure { .. } => (Phase::Upgrading, "ChangingTLS"),
        Step::UpdatePeerUrl { .. } => (Phase::Upgrading, "UpdatingPeerURL"),
        Step::MoveLeader { .. } => {
            let voters = obs
                .observed
                .members
                .iter()
                .filter(|m| m.etcd.is_some_and(|e| !e.learner))
                .count();
            let corrupt = alarm_note(obs, Some(step)).is_some();
            if repairing || corrupt {
                (Phase::Recovering, "HandingOverLeadership")
            } else if f.size.is_some_and(|size| voters > size) {
                (Phase::Scaling, "HandingOverLeadership")
            } else {
                (Phase::Upgrading, "HandingOverLeadership")
            }
        }
        Step::RenewCertificates { .. } => (Phase::Running, "RenewingCertificates"),
        Step::ExpandVolume { .. } => (Phase::Running, "ExpandingVolume"),
        Step::Defragment { .. } => (Phase::Running, "Defragmenting"),
        Step::ClearNoSpace { .. } => (Phase::Recovering, "ClearingNoSpace"),
        Step::Disarm { .. } => (Phase::Recovering, "DisarmingAlarm"),
        Step::Remove {
            why: RemoveWhy::ScaleDown,
            ..
        } => (Phase::Scaling, "ScalingDown"),
        Step::Remove {
            why: RemoveWhy::Corrupt,
            ..
        } => (Phase::Recovering, "ReplacingCorruptMember"),
        Step::Remove {
            why: RemoveWhy::StorageClass,
            ..
        } => (Phase::Upgrading, "MovingToStorageClass"),
        Step::Remove { member, .. } if moved(member).is_some() => {
            (Phase::Upgrading, "RecreatingMember")
        }
        Step::Remove { .. } => (Phase::Recovering, "ReplacingMember"),
        Step::DeleteStray { .. } => (Phase::Recovering, "DeletingStrayMember"),
        Step::RestoreFromBackup => (Phase::Recovering, "RestoringFromBackup"),
        Step::RebuildFromSurvivor { .. } | Step::FinishReseed { .. } => {
            (Phase::Recovering, "RebuildingFromSurvivor")
        }
        Step::AddLearner | Step::Promote { .. } => grow,
        Step::Start { member } => match moved(member) {
            Some(MoveKind::Added) => (grow.0, "StartingNewMember"),
            // Its new pod cannot run yet (an image being pulled again).
            Some(MoveKind::Upgraded { .. } | MoveKind::Restarted | MoveKind::Reconfigured) => {
                (Phase::Upgrading, "RestartingMember")
            }
            _ if crate::controller::facts::newcomer(obs, member) => (grow.0, "StartingNewMember"),
            _ => (Phase::Recovering, "RestartingMember"),
        },
    }
}

/// Whether the platform says member `name` is being moved.
fn moving(obs: &Observation, name: &str) -> bool {
    obs.platform
        .iter()
        .any(|p| p.addr.name == name && p.moving.is_some())
}

/// The Degraded reason and message for an alarm etcd raised, or a member
/// about to be replaced as corrupt.
fn alarm_note(obs: &Observation, step: Option<&Step>) -> Option<(&'static str, String)> {
    let name = |id: u64| {
        obs.members
            .iter()
            .find(|m| m.id.as_deref() == Some(&format!("{id:x}")))
            .map(|m| m.name.clone())
            .unwrap_or_else(|| format!("{id:x}"))
    };
    let alarms = &obs.observed.db.alarms;
    let doing = step.map(|s| format!("; {s}")).unwrap_or_default();
    if let Some(a) = alarms.iter().find(|a| a.kind == AlarmKind::NoSpace) {
        let largest = obs.observed.members.iter().map(|m| m.db.size).max();
        return Some((
            "NoSpaceAlarm",
            format!(
                "etcd raised NOSPACE (member {}; largest database file {} MiB): writes are \
                 refused until the operator compacts, defragments member by member and \
                 disarms the alarm{doing}",
                name(a.member),
                largest.unwrap_or_default() >> 20
            ),
        ));
    }
    if let Some(a) = alarms.iter().find(|a| a.kind == AlarmKind::Corrupt) {
        return Some((
            "CorruptAlarm",
            format!(
                "etcd raised CORRUPT about member {}: requests are refused{doing}",
                name(a.member)
            ),
        ));
    }
    match step {
        Some(
            s @ Step::Remove {
                why: RemoveWhy::Corrupt,
                ..
            },
        ) => Some(("CorruptMember", s.to_string())),
        _ => None,
    }
}

/// `Available`: a quorum of the voting members is ready (answers with a
/// leader and is in the member list) and a leader is known. That the
/// member list could be read from one member is not enough: a member cut
/// off from the others may still answer with the leader it last knew.
pub fn available(obs: &Observation) -> Condition {
    if !obs.observed.membership_known {
        return if obs.observed.bootstrapped {
            cond(
                "Available",
                false,
                "QuorumLost",
                "no member answers with a leader".into(),
            )
        } else {
            cond(
                "Available",
                false,
                "NotCreated",
                "the cluster has not formed yet".into(),
            )
        };
    }
    let voters = obs
        .observed
        .members
        .iter()
        .filter(|m| m.etcd.is_some_and(|e| !e.learner));
    let total = voters.clone().count();
    let ready = voters.filter(|m| m.healthy).count();
    let needed = quorum(total);
    match &obs.leader {
        Some(leader) if ready >= needed => cond(
            "Available",
            true,
            "QuorumAvailable",
            format!(
                "{ready} of {total} voting members ready ({needed} needed), leader {leader}; \
                 {} of {} members ready",
                obs.ready(),
                obs.members.len()
            ),
        ),
        Some(_) => cond(
            "Available",
            false,
            "QuorumNotReady",
            format!("only {ready} of {total} voting members are ready, {needed} needed"),
        ),
        None => cond(
            "Available",
            false,
            "NoLeader",
            format!("{ready} of {total} voting members are ready, but none names a leader"),
        ),
    }
}
