//! What the controller knows beside an observation, for status and Events
//! to be computed from on every pass: the members it moved on purpose
//! ([`Moves`]: added, upgraded, restarted, until each is ready again), the
//! last failure and the step it belonged to ([`Failure`]), and what was
//! lost that the steps under way replace ([`Lost`]). Nothing here is a
//! condition: status judges these afresh each pass, and each one ends
//! when its cause does (a member ready, a later pass that succeeds, a step
//! the plan no longer chooses).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::observe::Observation;
use crate::plan::{RemoveWhy, Step};
use crate::version::Version;

/// How long a member moved on purpose may take to be ready again before
/// status counts it as trouble: a learner catching up on a large database
/// takes minutes, a member that never gets ready is no progress.
pub const PROGRESS_DEADLINE: Duration = Duration::from_secs(600);
/// How long etcd may keep refusing a step (it refuses membership changes
/// for 5 s after a member reconnects) before the refusal counts as trouble.
pub const REFUSAL_GRACE: Duration = Duration::from_secs(60);

/// Why a member was moved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MoveKind {
    /// Added as a learner (or started for the first time), to scale up or
    /// to replace a lost member.
    Added,
    /// Restarted on a new version.
    Upgraded {
        /// The version it ran (when known).
        from: Option<Version>,
        /// The version it runs now.
        to: Version,
    },
    /// Restarted to apply changed settings (`spec.tuning`...).
    Restarted,
    /// Restarted with other TLS settings.
    Reconfigured,
    /// Restarted alone with `--force-new-cluster`: the seed of a rebuild.
    Reseeded,
}

impl MoveKind {
    /// What it waits for, as status says it.
    pub fn note(&self) -> String {
        match self {
            MoveKind::Added => "added as a new member: it starts and catches up".into(),
            MoveKind::Upgraded { to, .. } => format!("restarted on {to}: it starts on its data"),
            MoveKind::Restarted => "restarted with the spec's settings".into(),
            MoveKind::Reconfigured => "restarted with other TLS settings".into(),
            MoveKind::Reseeded => "restarted alone with --force-new-cluster".into(),
        }
    }
}

/// One member moved on purpose, and since when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    /// Why.
    pub kind: MoveKind,
    /// When the step that moved it was taken.
    pub at: Instant,
}

/// The members moved on purpose that are not ready again yet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Moves {
    members: BTreeMap<String, Move>,
}

impl Moves {
    /// Notes a step that was carried out at `now`; `added` names the
    /// member an add created.
    pub fn acted(&mut self, step: &Step, obs: &Observation, added: Option<&str>, now: Instant) {
        let kind = match step {
            Step::AddLearner => {
                if let Some(name) = added {
                    self.put(name, MoveKind::Added, now);
                }
                return;
            }
            Step::Start { member } if newcomer(obs, member) => MoveKind::Added,
            Step::Upgrade { to, member } => MoveKind::Upgraded {
                from: obs
                    .platform
                    .iter()
                    .find(|p| &p.addr.name == member)
                    .map(|p| p.version),
                to: *to,
            },
            Step::Restart { .. } => MoveKind::Restarted,
            Step::Reconfigure { .. } => MoveKind::Reconfigured,
            Step::RebuildFromSurvivor { .. } => MoveKind::Reseeded,
            Step::Remove { member, .. } | Step::DeleteStray { member } => {
                self.members.remove(member);
                return;
            }
            _ => return,
        };
        if let Some(member) = step_member(step) {
            self.put(member, kind, now);
        }
    }

    fn put(&mut self, member: &str, kind: MoveKind, at: Instant) {
        // A member moved again keeps the first time: its deadline counts
        // from when it was first taken out.
        let at = self.members.get(member).map_or(at, |m| m.at.min(at));
        self.members.insert(member.to_string(), Move { kind, at });
    }

    /// Forgets the members that are ready again (serving in etcd's and
    /// the platform's eyes) or gone, and returns them with their move:
    /// the steps that ended.
    pub fn observed(&mut self, obs: &Observation) -> Vec<(String, Move, bool)> {
        let mut ended = Vec::new();
        let names: Vec<String> = self.members.keys().cloned().collect();
        for name in names {
            let status = obs.members.iter().find(|m| m.name == name);
            let arrived =
                status.is_some_and(|m| m.ready && !obs.observed.not_serving.contains(&name));
            if (arrived || status.is_none())
                && let Some(m) = self.members.remove(&name)
            {
                ended.push((name, m, arrived));
            }
        }
        ended
    }

    /// Member `name`'s move, while it is within [`PROGRESS_DEADLINE`] at
    /// `now`.
    pub fn on_its_way(&self, name: &str, now: Instant) -> Option<&Move> {
        self.members
            .get(name)
            .filter(|m| now.saturating_duration_since(m.at) < PROGRESS_DEADLINE)
    }

    /// Member `name`'s move, however old.
    pub fn get(&self, name: &str) -> Option<&Move> {
        self.members.get(name)
    }
}

/// The member a step moves.
fn step_member(step: &Step) -> Option<&str> {
    match step {
        Step::Start { member }
        | Step::Upgrade { member, .. }
        | Step::Restart { member, .. }
        | Step::Reconfigure { member, .. }
        | Step::RebuildFromSurvivor { member, .. } => Some(member),
        _ => None,
    }
}

/// Whether `member` is a new member on its way in: a learner, or listed by
/// etcd but never started.
pub fn newcomer(obs: &Observation, member: &str) -> bool {
    obs.observed
        .members
        .iter()
        .find(|m| m.name == member)
        .and_then(|m| m.etcd)
        .is_some_and(|e| e.learner || !e.started)
}

/// What failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failed {
    /// Observing the cluster (the platform or every member unreachable).
    Observe,
    /// Saving the cluster's record.
    Record,
    /// Carrying out this step.
    Step(Step),
}

/// The last failure, until a later pass does the same thing without one
/// (or, for a step, the plan no longer chooses it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// What failed.
    pub what: Failed,
    /// What happened, naming the step.
    pub message: String,
    /// etcd refused the step for now (a membership change within 5 s of a
    /// member reconnecting): it will accept it soon.
    pub refused: bool,
    /// When this failure first happened (repeats keep it).
    pub since: Instant,
}

impl Failure {
    /// The failure, `since` kept from `last` when it is the same kind of
    /// failure of the same thing.
    pub fn new(
        what: Failed,
        message: String,
        refused: bool,
        last: Option<&Failure>,
        now: Instant,
    ) -> Self {
        let since = last
            .filter(|l| l.what == what && l.refused == refused)
            .map_or(now, |l| l.since);
        Failure {
            what,
            message,
            refused,
            since,
        }
    }

    /// Whether this is a refusal by etcd of `step`, still within
    /// [`REFUSAL_GRACE`] at `now`: progress held up, not trouble.
    pub fn waits_for_etcd(&self, step: &Step, now: Instant) -> bool {
        self.refused
            && self.what == Failed::Step(step.clone())
            && now.saturating_duration_since(self.since) < REFUSAL_GRACE
    }

    /// Whether it still says something about a pass that chose `step`:
    /// a step's failure only while the plan chooses that step again.
    pub fn current(&self, step: Option<&Step>) -> bool {
        match &self.what {
            Failed::Observe | Failed::Record => true,
            Failed::Step(s) => step == Some(s),
        }
    }
}

/// What was lost that the steps under way replace: the cluster is worse
/// than its spec, not by the operator's choice, until the plan converges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lost {
    /// A member removed to be replaced.
    Member {
        /// Its name.
        member: String,
        /// Why it went.
        why: RemoveWhy,
    },
    /// The quorum, for good: the cluster was rebuilt and members are added
    /// back.
    Quorum {
        /// From what ("member demo-0", "backup NAME").
        from: String,
    },
    /// A member moved on purpose whose data lived in its pod (a
    /// Kubernetes emptyDir member whose new settings need a new pod): it
    /// was removed and a new member takes its place, as planned.
    Recreated {
        /// Its name.
        member: String,
    },
}

impl Lost {
    /// The Degraded reason (the Progressing one for a planned re-creation).
    pub fn reason(&self) -> &'static str {
        match self {
            Lost::Member { .. } => "ReplacingLostMember",
            Lost::Quorum { .. } => "RebuildingAfterQuorumLoss",
            Lost::Recreated { .. } => "RecreatingMember",
        }
    }

    /// Whether the operator chose it (a planned re-creation): progress,
    /// not trouble.
    pub fn planned(&self) -> bool {
        matches!(self, Lost::Recreated { .. })
    }

    /// What happened, in words.
    pub fn message(&self) -> String {
        match self {
            Lost::Member { member, why } => {
                let why = match why {
                    RemoveWhy::DataLost => "its data was gone",
                    RemoveWhy::NotOnPlatform => "the platform had lost it",
                    RemoveWhy::Corrupt => "its data was corrupt",
                    RemoveWhy::ScaleDown => "the spec asked for fewer members",
                    RemoveWhy::StorageClass => "its volume was of another storage class",
                };
                format!("member {member} was removed ({why}); a new member replaces it")
            }
            Lost::Quorum { from } => format!(
                "quorum was lost for good and the cluster was rebuilt from {from}; members are \
                 added back one at a time"
            ),
            Lost::Recreated { member } => format!(
                "member {member} was removed to take the spec's settings (its data lived in its \
                 pod); a new member takes its place"
            ),
        }
    }
}
