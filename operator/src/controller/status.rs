//! Status: phase, conditions and members, from an observation and the step
//! the plan chose, and publishing it (with why members fail) each pass.

use std::time::{Instant, SystemTime};

use super::backup_conditions::{backups_failing, chain_behind};
use super::{Cluster, STATUS_REFRESH, SpecState};
use crate::crd::{Condition, EtcdCluster, EtcdClusterSpec, EtcdClusterStatus, Phase};
use crate::observe::Observation;
use crate::plan::{AlarmKind, RemoveWhy, Step, Wait, quorum};
use crate::platform::Platform;

impl<P: Platform> Cluster<P> {
    /// Builds the status and publishes it when it changed (or every
    /// [`STATUS_REFRESH`]); a write that fails for lack of space is noted
    /// and said in the status kept in memory at once.
    pub(super) async fn publish(&mut self, obs: &Observation, step: Option<&Step>) {
        let failing = self.failing_note(obs).await;
        let previous = self.published.as_ref().map(|(s, _)| s);
        let resource = build(self, obs, step, previous, failing);
        let Some(status) = resource.status.clone() else {
            return;
        };
        let backup_interval = match &self.spec {
            SpecState::Valid { spec, .. } => spec.backup.as_ref().map(|b| b.interval),
            SpecState::Invalid { .. } => None,
        };
        self.metrics.status(&status, backup_interval);
        let fresh = self
            .published
            .as_ref()
            .is_some_and(|(s, at)| at.elapsed() < STATUS_REFRESH && same(s, &status));
        if fresh {
            return;
        }
        match self.platform.save_status(&self.name, &resource).await {
            Ok(()) => {
                self.published = Some((status, Instant::now()));
                if self.state_full.take().is_some() {
                    tracing::info!("the state folder takes writes again");
                }
            }
            Err(e) if e.is_storage_full() => {
                self.metrics.error(e.category());
                let first = self.state_full.is_none();
                self.note_storage(&e);
                if first {
                    // The status kept in memory says so at once.
                    let failing = self.failing_note(obs).await;
                    let previous = self.published.as_ref().map(|(s, _)| s);
                    let resource = build(self, obs, step, previous, failing);
                    let _ = self.platform.save_status(&self.name, &resource).await;
                }
            }
            Err(e) => {
                self.metrics.error(e.category());
                tracing::warn!("cannot publish status: {e}");
            }
        }
    }

    /// Notes a write that failed for lack of space under the state folder
    /// (logged once while it lasts).
    pub(super) fn note_storage(&mut self, e: &crate::platform::Error) {
        if !e.is_storage_full() {
            return;
        }
        if self.state_full.is_none() {
            tracing::error!(
                "state folder full: {e}; status is kept in memory (`etcd-operator status` asks \
                 the operator)"
            );
        }
        self.state_full = Some(e.to_string());
    }

    /// A line for status about members failing at start, with the reason
    /// from their log, and members not ready for a reason the platform
    /// reports (a pod stuck Pending, a container the kubelet restarts).
    async fn failing_note(&self, obs: &Observation) -> Option<String> {
        let failing = self.crashes.failing();
        let mut parts = Vec::new();
        for (member, n) in &failing {
            let hint = self.platform.failure_hint(&self.name, member).await;
            let why = hint.map(|h| format!(": {h}")).unwrap_or_default();
            parts.push(format!(
                "member {member} failed {n} time(s) right after start{why}"
            ));
        }
        let troubled = obs.platform.iter().filter_map(|p| {
            let name = &p.addr.name;
            let problem = p.problem.as_ref()?;
            let ready = obs.members.iter().any(|m| &m.name == name && m.ready);
            (!ready && !failing.iter().any(|(f, _)| f == name)).then_some((name, problem))
        });
        for (member, problem) in troubled {
            parts.push(format!("member {member}: {problem}"));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// Whether two statuses say the same, ignoring when they were observed.
pub fn same(a: &EtcdClusterStatus, b: &EtcdClusterStatus) -> bool {
    let strip = |s: &EtcdClusterStatus| EtcdClusterStatus {
        observed_at: None,
        ..s.clone()
    };
    strip(a) == strip(b)
}

/// The resource to publish: the spec as read, with a fresh status.
pub(super) fn build<P>(
    c: &Cluster<P>,
    obs: &Observation,
    step: Option<&Step>,
    previous: Option<&EtcdClusterStatus>,
    failing: Option<String>,
) -> EtcdCluster {
    let mut resource = match &c.spec {
        SpecState::Valid { resource, .. } => (**resource).clone(),
        SpecState::Invalid {
            resource: Some(r), ..
        } => (**r).clone(),
        SpecState::Invalid { resource: None, .. } => {
            let spec = serde_json::from_str::<EtcdClusterSpec>(&c.record.spec_json)
                .unwrap_or_else(|_| EtcdClusterSpec::minimal(0, ""));
            EtcdCluster::new(&c.name, spec)
        }
    };
    if resource.metadata.uid.is_none() {
        // The identity its backups carry, for the `backups` command.
        resource.metadata.uid = c.uid();
    }
    let invalid = match &c.spec {
        SpecState::Invalid { message, .. } => Some(message.as_str()),
        SpecState::Valid { .. } => None,
    };
    let (phase, progressing, degraded) = judge(c, obs, step, invalid, failing);
    let now = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let available = available(obs);
    let backup = c.schedule.as_ref().map(|s| s.status());
    let backups = backup.as_ref().map(backups_failing);
    let segment_interval = match &c.spec {
        SpecState::Valid { spec, .. } => spec.backup.as_ref().and_then(|b| b.continuous),
        SpecState::Invalid { .. } => None,
    }
    .map(|c| c.segment_interval);
    let chain = backup
        .as_ref()
        .zip(segment_interval)
        .and_then(|(b, i)| chain_behind(b, i, SystemTime::now()));
    let conditions = [
        Some(available),
        Some(progressing),
        Some(degraded),
        backups,
        chain,
    ]
    .into_iter()
    .flatten()
    .map(|mut new| {
        let old = previous.and_then(|p| p.condition(&new.type_));
        new.last_transition_time = match old {
            Some(o) if o.status == new.status => o.last_transition_time.clone(),
            _ => Some(now.clone()),
        };
        new
    })
    .collect();
    resource.status = Some(EtcdClusterStatus {
        phase,
        conditions,
        members: obs.members.clone(),
        ready_members: i64::try_from(obs.ready()).unwrap_or(i64::MAX),
        observed_generation: Some(c.record.generation),
        current_version: obs.current_version.clone(),
        leader: obs.leader.clone(),
        last_action: step.map(|s| s.to_string()),
        observed_at: Some(humantime::format_rfc3339_millis(SystemTime::now()).to_string()),
        backup,
        revision: (c.record.last_revision > 0).then_some(c.record.last_revision),
        last_recovery: c.record.last_recovery.clone(),
        restore: c.record.restored.clone(),
        standby: c.standby_status(),
        tls: c
            .tls
            .status
            .clone()
            .filter(|t| t.peer != "Off" || t.client != "Off" || t.change.is_some()),
    });
    resource
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

fn cond(type_: &str, status: bool, reason: &str, message: String) -> Condition {
    Condition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        last_transition_time: None,
    }
}

/// Phase, Progressing and Degraded.
fn judge<P>(
    c: &Cluster<P>,
    obs: &Observation,
    step: Option<&Step>,
    invalid: Option<&str>,
    failing: Option<String>,
) -> (Phase, Condition, Condition) {
    let not_ready: Vec<&str> = obs
        .members
        .iter()
        .filter(|m| !m.ready)
        .map(|m| m.name.as_str())
        .collect();
    let mut degraded = if let Some(message) = invalid {
        cond(
            "Degraded",
            true,
            "InvalidSpec",
            format!("{message}; nothing is done until it is fixed"),
        )
    } else if let Some(e) = &c.state_full {
        cond(
            "Degraded",
            true,
            "StateFolderFull",
            format!(
                "state folder full: {e}; members that stop cannot start again and status files \
                 are not written until space is freed (this status is the operator's own, kept \
                 in memory)"
            ),
        )
    } else if let Some(e) = &c.last_error {
        cond("Degraded", true, "ActionFailed", e.clone())
    } else if let Some((reason, message)) = alarm_note(obs, step) {
        cond("Degraded", true, reason, message)
    } else if let Some(f) = failing {
        cond("Degraded", true, "MemberFailing", f)
    } else if !not_ready.is_empty() && c.formed {
        // (Before every member was ready once, members on their way up
        // are the cluster being created, not degraded.)
        cond(
            "Degraded",
            true,
            "MembersNotReady",
            format!("not ready: {}", not_ready.join(", ")),
        )
    } else {
        cond(
            "Degraded",
            false,
            "AllMembersReady",
            "every member is ready".into(),
        )
    };
    let Some(step) = step else {
        let p = cond(
            "Progressing",
            false,
            "InvalidSpec",
            "waiting for a valid spec".into(),
        );
        return (Phase::Invalid, p, degraded);
    };
    let all_ready = not_ready.is_empty();
    let (phase, reason) = match step {
        Step::Converged => (Phase::Running, "Converged"),
        Step::Bootstrap => (Phase::Creating, "Bootstrapping"),
        Step::Wait(Wait::Paused) => (Phase::Paused, "Paused"),
        Step::Wait(Wait::Forming) => (Phase::Creating, "Forming"),
        Step::Wait(w) if w.is_problem() => {
            let mut message = w.to_string();
            if degraded.reason == "MemberFailing" {
                message = format!("{message}; {}", degraded.message);
            }
            degraded = cond("Degraded", true, w.reason(), message);
            (Phase::Degraded, w.reason())
        }
        Step::Wait(_) if !obs.observed.bootstrapped => (Phase::Creating, "Forming"),
        // The first members of a new cluster coming up one by one (pods
        // scheduled, claims bound, learners added): creation goes on.
        Step::Wait(_) | Step::Start { .. } | Step::AddLearner | Step::Promote { .. }
            if !c.formed =>
        {
            (Phase::Creating, "Forming")
        }
        Step::Upgrade { .. } => (Phase::Recovering, "Upgrading"),
        Step::Restart { .. } => (Phase::Recovering, "Restarting"),
        Step::MoveLeader { .. } => (Phase::Recovering, "HandingOverLeadership"),
        Step::RenewCertificates { .. } => (Phase::Recovering, "RenewingCertificates"),
        Step::Reconfigure { .. } => (Phase::Recovering, "ChangingTLS"),
        Step::UpdatePeerUrl { .. } => (Phase::Recovering, "UpdatingPeerURL"),
        Step::ClearNoSpace { .. } => (Phase::Recovering, "ClearingNoSpace"),
        Step::Disarm { .. } => (Phase::Recovering, "DisarmingAlarm"),
        Step::Defragment { .. } => (Phase::Running, "Defragmenting"),
        Step::Remove {
            why: RemoveWhy::Corrupt,
            ..
        } => (Phase::Recovering, "ReplacingCorruptMember"),
        Step::RestoreFromBackup => (Phase::Recovering, "RestoringFromBackup"),
        Step::RebuildFromSurvivor { .. } | Step::FinishReseed { .. } => {
            (Phase::Recovering, "RebuildingFromSurvivor")
        }
        Step::Remove {
            why: RemoveWhy::ScaleDown,
            ..
        } if all_ready => (Phase::Scaling, "ScalingDown"),
        Step::AddLearner | Step::Promote { .. } if all_ready && !c.replacing => {
            (Phase::Scaling, "ScalingUp")
        }
        Step::Wait(_) => (Phase::Recovering, "WaitingForMember"),
        Step::Start { .. } => (Phase::Recovering, "RestartingMember"),
        _ => (Phase::Recovering, "ReplacingMember"),
    };
    let progressing = match phase {
        Phase::Running if *step == Step::Converged => cond(
            "Progressing",
            false,
            reason,
            "the cluster matches the spec".into(),
        ),
        Phase::Paused | Phase::Degraded => cond("Progressing", false, reason, step.to_string()),
        _ => cond("Progressing", true, reason, step.to_string()),
    };
    (phase, progressing, degraded)
}

/// The status of a resource refused before it got a cluster (its name is
/// invalid, so nothing may be named after it): phase Invalid, no members.
pub fn refused(resource: &EtcdCluster, message: &str) -> EtcdCluster {
    let mut resource = resource.clone();
    let now = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let conditions = [
        cond(
            "Available",
            false,
            "NotCreated",
            "the cluster has not formed yet".into(),
        ),
        cond(
            "Progressing",
            false,
            "InvalidSpec",
            "waiting for a valid spec".into(),
        ),
        cond(
            "Degraded",
            true,
            "InvalidSpec",
            format!("{message}; nothing is done until it is fixed"),
        ),
    ]
    .into_iter()
    .map(|mut c| {
        c.last_transition_time = Some(now.clone());
        c
    })
    .collect();
    resource.status = Some(EtcdClusterStatus {
        phase: Phase::Invalid,
        conditions,
        observed_at: Some(humantime::format_rfc3339_millis(SystemTime::now()).to_string()),
        ..EtcdClusterStatus::default()
    });
    resource
}

#[cfg(test)]
mod tests;
