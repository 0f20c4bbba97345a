//! Status: phase, conditions and members, from an observation and the step
//! the plan chose, and publishing it (with why members fail) each pass.
//! The judgement is in [`judge`]; [`build`] puts the resource together
//! from it, the time given.

use std::time::{Instant, SystemTime};

use super::backup_conditions::{backups_failing, chain_behind};
use super::{Cluster, STATUS_REFRESH, SpecState};
use crate::crd::{
    BackupStatus, Condition, EtcdCluster, EtcdClusterSpec, EtcdClusterStatus, Phase,
    RecoveryStatus, RestoreStatus, StandbyStatus, TlsStatus,
};
use crate::observe::Observation;
use crate::plan::Step;
use crate::platform::Platform;

pub mod judge;
#[cfg(test)]
mod props;

pub use self::judge::{Facts, Judged, available, judge};

impl<P: Platform> Cluster<P> {
    /// Builds the status and publishes it when it changed (or every
    /// [`STATUS_REFRESH`]); a write that fails for lack of space is noted
    /// and said in the status kept in memory at once.
    /// `failing` names the members failing at start or stuck, each with
    /// why ([`Self::failing`]).
    pub(super) async fn publish(
        &mut self,
        obs: &Observation,
        step: Option<&Step>,
        failing: &[(String, String)],
    ) {
        let failing = failing_note(failing);
        let resource = self.status_of(obs, step, failing.as_deref());
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
                    let resource = self.status_of(obs, step, failing.as_deref());
                    let _ = self.platform.save_status(&self.name, &resource).await;
                }
            }
            Err(e) => {
                self.metrics.error(e.category());
                tracing::warn!("cannot publish status: {e}");
            }
        }
    }

    /// The resource to publish for this pass.
    fn status_of(
        &self,
        obs: &Observation,
        step: Option<&Step>,
        failing: Option<&str>,
    ) -> EtcdCluster {
        let previous = self.published.as_ref().map(|(s, _)| s);
        let (invalid, size) = match &self.spec {
            SpecState::Invalid { message, .. } => (Some(message.as_str()), None),
            SpecState::Valid { spec, .. } => (None, Some(spec.size)),
        };
        let facts = Facts {
            obs,
            step,
            invalid,
            state_full: self.state_full.as_deref(),
            failure: self.failure.as_ref(),
            failing,
            formed: self.formed,
            lost: self.lost.as_ref(),
            moves: &self.moves,
            size,
            previous_phase: previous.map(|p| p.phase),
            now: Instant::now(),
        };
        build(self.parts(), &facts, previous, SystemTime::now())
    }

    /// What the status carries besides the judgement.
    fn parts(&self) -> Parts {
        let mut resource = match &self.spec {
            SpecState::Valid { resource, .. } => (**resource).clone(),
            SpecState::Invalid {
                resource: Some(r), ..
            } => (**r).clone(),
            SpecState::Invalid { resource: None, .. } => {
                let spec = serde_json::from_str::<EtcdClusterSpec>(&self.record.spec_json)
                    .unwrap_or_else(|_| EtcdClusterSpec::minimal(0, ""));
                EtcdCluster::new(&self.name, spec)
            }
        };
        if resource.metadata.uid.is_none() {
            // The identity its backups carry, for the `backups` command.
            resource.metadata.uid = self.uid();
        }
        Parts {
            resource,
            generation: self.record.generation,
            backup: self
                .schedule
                .as_ref()
                .map(|s| s.status())
                .or_else(|| self.backups_waiting()),
            revision: (self.record.last_revision > 0).then_some(self.record.last_revision),
            last_recovery: self.record.last_recovery.clone(),
            restore: self.record.restored.clone(),
            standby: self.standby_status(),
            segment_interval: match &self.spec {
                SpecState::Valid { spec, .. } => spec.backup.as_ref().and_then(|b| b.continuous),
                SpecState::Invalid { .. } => None,
            }
            .map(|c| c.segment_interval),
            tls: self
                .tls
                .status
                .clone()
                .filter(|t| t.peer != "Off" || t.client != "Off" || t.change.is_some()),
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

    /// Members failing at start, with the reason from their log, and
    /// members not ready for a reason the platform reports (a pod stuck
    /// Pending, a container the kubelet restarts): each with a line for
    /// status.
    pub(super) async fn failing(&self, obs: &Observation) -> Vec<(String, String)> {
        let failing = self.crashes.failing();
        let mut out = Vec::new();
        for (member, n) in &failing {
            let hint = self.platform.failure_hint(&self.name, member).await;
            let why = hint.map(|h| format!(": {h}")).unwrap_or_default();
            let line = format!("member {member} failed {n} time(s) right after start{why}");
            out.push((member.clone(), line));
        }
        let troubled = obs.platform.iter().filter_map(|p| {
            let name = &p.addr.name;
            let problem = p.problem.as_ref()?;
            let ready = obs.members.iter().any(|m| &m.name == name && m.ready);
            (!ready && !failing.iter().any(|(f, _)| f == name)).then_some((name, problem))
        });
        for (member, problem) in troubled {
            out.push((member.clone(), format!("member {member}: {problem}")));
        }
        out
    }
}

/// The members failing, in one line for status.
fn failing_note(failing: &[(String, String)]) -> Option<String> {
    let lines: Vec<&str> = failing.iter().map(|(_, line)| line.as_str()).collect();
    (!lines.is_empty()).then(|| lines.join("; "))
}

/// Whether two statuses say the same, ignoring when they were observed.
pub fn same(a: &EtcdClusterStatus, b: &EtcdClusterStatus) -> bool {
    let strip = |s: &EtcdClusterStatus| EtcdClusterStatus {
        observed_at: None,
        ..s.clone()
    };
    strip(a) == strip(b)
}

/// What the status carries besides the judgement: the resource as read,
/// and what the cluster's record and backups say.
#[derive(Clone, Debug)]
pub struct Parts {
    /// The resource, its spec as read.
    pub resource: EtcdCluster,
    /// The spec's generation.
    pub generation: i64,
    /// Backups, when `spec.backup` is set.
    pub backup: Option<BackupStatus>,
    /// The highest revision seen.
    pub revision: Option<i64>,
    /// The last rebuild after a quorum loss.
    pub last_recovery: Option<RecoveryStatus>,
    /// What the cluster was created from.
    pub restore: Option<RestoreStatus>,
    /// Where a standby stands, when the cluster is one.
    pub standby: Option<StandbyStatus>,
    /// TLS, when in use.
    pub tls: Option<TlsStatus>,
    /// `spec.backup.continuous.segmentInterval`, when continuous backups
    /// are on (for the chain's condition).
    pub segment_interval: Option<std::time::Duration>,
}

/// The resource to publish: the spec as read, with a fresh status judged
/// from `facts` at `now` (a condition keeps its transition time from
/// `previous` while its status stays).
pub fn build(
    parts: Parts,
    facts: &Facts,
    previous: Option<&EtcdClusterStatus>,
    now: SystemTime,
) -> EtcdCluster {
    let Parts {
        mut resource,
        generation,
        backup,
        revision,
        last_recovery,
        restore,
        standby,
        tls,
        segment_interval,
    } = parts;
    let obs = facts.obs;
    let Judged {
        phase,
        available,
        progressing,
        degraded,
    } = judge(facts);
    let observed_at = humantime::format_rfc3339_millis(now).to_string();
    let at = now;
    let now = humantime::format_rfc3339_seconds(now).to_string();
    let backups = backup.as_ref().map(backups_failing);
    let chain = backup
        .as_ref()
        .zip(segment_interval)
        .and_then(|(b, i)| chain_behind(b, i, at));
    let standby_cond = standby
        .as_ref()
        .map(super::backup_conditions::standby_behind);
    let conditions = [
        Some(available),
        Some(progressing),
        Some(degraded),
        backups,
        chain,
        standby_cond,
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
        observed_generation: Some(generation),
        current_version: obs.current_version.clone(),
        leader: obs.leader.clone(),
        last_action: facts.step.map(|s| s.to_string()),
        observed_at: Some(observed_at),
        backup,
        revision,
        last_recovery,
        restore,
        standby,
        tls,
    });
    resource
}

pub(crate) fn cond(type_: &str, status: bool, reason: &str, message: String) -> Condition {
    Condition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        last_transition_time: None,
    }
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
