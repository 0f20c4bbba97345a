//! Events that tell the story of a cluster: a Normal notice when a step
//! the operator took begins and when it ends (a member added, promoted,
//! upgraded, replaced or removed; a scale-up, scale-down, upgrade or
//! rebuild done; a backup taken, a restore check passed), a Warning for
//! each failure (a step that failed, an upgrade that does not start, a
//! member that stopped by itself, a backup that fails, a restore check
//! that does not match). The words are chosen here, once, so both
//! platforms say the same ([`Platform::announce`]: Events on Kubernetes,
//! the event log locally).
//!
//! [`Story`] is pure: it is told what each pass observed and chose, and
//! what each step did, and answers with the notices to announce. Backup
//! milestones are read from the backup schedule's status, compared with
//! the last pass's.

use std::collections::BTreeSet;

use super::facts::{Failed, Failure, Lost, Move, MoveKind, Moves, newcomer};
use crate::crd::BackupStatus;
use crate::observe::Observation;
use crate::plan::{RemoveWhy, Step};
use crate::platform::{Notice, Platform};
use crate::version::Version;

/// What one pass saw, for the story.
#[derive(Clone, Copy, Debug)]
pub struct Seen<'a> {
    /// The observation.
    pub obs: &'a Observation,
    /// The step the plan chose (`None`: invalid spec).
    pub step: Option<&'a Step>,
    /// The voting members the spec asks for.
    pub size: Option<usize>,
    /// Every member was ready once.
    pub formed: bool,
    /// What was lost that the steps under way replace.
    pub lost: Option<&'a Lost>,
    /// Members moved on purpose whose move ended this pass (`true`: ready
    /// again; `false`: gone).
    pub ended: &'a [(String, Move, bool)],
    /// Members failing at start or stuck, with why.
    pub failing: &'a [(String, String)],
    /// Members moved on purpose, not ready again yet.
    pub moves: &'a Moves,
    /// The backup schedule's status, when backups are on.
    pub backup: Option<&'a BackupStatus>,
}

/// What the story remembers between passes: what began and has not ended.
#[derive(Clone, Debug, Default)]
pub struct Story {
    /// A scale began, from this many voters.
    scaling: Option<usize>,
    /// A rolling upgrade began: from this version (when they agreed) to
    /// this one.
    upgrading: Option<(Option<String>, Version)>,
    /// The member added last, to name the replacement of a lost one.
    added: Option<String>,
    /// Members that stopped by themselves and were started again, until
    /// they serve.
    down: BTreeSet<String>,
    /// Members said failing, until they no longer are.
    failing: BTreeSet<String>,
    /// The last failure said, until a step succeeds.
    failure: Option<String>,
    /// The cluster formed (said once).
    formed: Option<bool>,
    /// The backup status of the last pass that had one.
    backup: Option<BackupStatus>,
}

/// The number of voting members observed.
fn voters(obs: &Observation) -> usize {
    let members = obs.observed.members.iter();
    members
        .filter(|m| m.etcd.is_some_and(|e| !e.learner))
        .count()
}

impl Story {
    /// The notices of a pass: steps that ended, members that serve again
    /// or fail, backup milestones.
    pub fn pass(&mut self, seen: &Seen) -> Vec<Notice> {
        let mut out = Vec::new();
        let obs = seen.obs;
        match self.formed {
            Some(false) if seen.formed => out.push(Notice::normal(
                "Created",
                format!(
                    "the cluster formed: {} of {} members ready",
                    obs.ready(),
                    obs.members.len()
                ),
            )),
            _ => {}
        }
        self.formed = Some(seen.formed);
        for (member, mv, _) in seen.ended.iter().filter(|(_, _, arrived)| *arrived) {
            if let Some(n) = arrival(member, &mv.kind) {
                out.push(n);
            }
        }
        let back: Vec<String> = self
            .down
            .iter()
            .filter(|m| obs.members.iter().any(|s| &s.name == *m && s.ready))
            .cloned()
            .collect();
        for member in back {
            self.down.remove(&member);
            out.push(Notice::normal(
                "MemberRecovered",
                format!("member {member} serves again"),
            ));
        }
        self.down
            .retain(|m| obs.members.iter().any(|s| &s.name == m));
        self.failing_members(seen, &mut out);
        if seen.step == Some(&Step::Converged) {
            self.converged(seen, &mut out);
        }
        if let Some(b) = seen.backup {
            out.extend(backup_milestones(self.backup.as_ref(), b));
            self.backup = Some(b.clone());
        }
        out
    }

    fn failing_members(&mut self, seen: &Seen, out: &mut Vec<Notice>) {
        for (member, line) in seen.failing {
            if !self.failing.insert(member.clone()) {
                continue;
            }
            out.push(match seen.moves.get(member).map(|m| &m.kind) {
                Some(MoveKind::Upgraded { to, .. }) => Notice::warning(
                    "UpgradeFailed",
                    format!("member {member} does not start on {to}: {line}"),
                ),
                _ => Notice::warning("MemberFailing", line.clone()),
            });
        }
        self.failing
            .retain(|m| seen.failing.iter().any(|(f, _)| f == m));
    }

    /// The plan converged: what began ends.
    fn converged(&mut self, seen: &Seen, out: &mut Vec<Notice>) {
        let obs = seen.obs;
        let ready = format!("{} of {} members ready", obs.ready(), obs.members.len());
        if let Some(from) = self.scaling.take() {
            let now = voters(obs);
            let (reason, word) = if now >= from {
                ("ScaledUp", "up")
            } else {
                ("ScaledDown", "down")
            };
            out.push(Notice::normal(
                reason,
                format!("scaled {word} from {from} to {now} members: {ready}"),
            ));
        }
        if let Some((from, to)) = self.upgrading.take() {
            let was = from.map(|f| format!(" (was {f})")).unwrap_or_default();
            match &obs.current_version {
                Some(v) if *v == to.to_string() => out.push(Notice::normal(
                    "UpgradeFinished",
                    format!("every member runs {to}{was}: {ready}"),
                )),
                now => out.push(Notice::normal(
                    "UpgradeStopped",
                    format!(
                        "the upgrade to {to} stopped: the spec asks for another version; \
                         members run {}",
                        now.as_deref().unwrap_or("several versions")
                    ),
                )),
            }
        }
        match seen.lost {
            Some(Lost::Member { member, .. }) => {
                let by = self
                    .added
                    .take()
                    .map(|a| format!(" by {a}"))
                    .unwrap_or_default();
                out.push(Notice::normal(
                    "MemberReplaced",
                    format!("member {member} was replaced{by}: {ready}"),
                ));
            }
            Some(Lost::Quorum { from }) => out.push(Notice::normal(
                "RebuildFinished",
                format!("the cluster rebuilt from {from} is whole again: {ready}"),
            )),
            Some(Lost::Recreated { member }) => {
                let by = self
                    .added
                    .take()
                    .map(|a| format!(" as {a}"))
                    .unwrap_or_default();
                out.push(Notice::normal(
                    "MemberRecreated",
                    format!("member {member} was re-created{by} with the spec's settings: {ready}"),
                ));
            }
            None => {}
        }
    }

    /// The notices of a step carried out (`added`: the member an add
    /// created).
    pub fn acted(&mut self, step: &Step, seen: &Seen, added: Option<&str>) -> Vec<Notice> {
        self.failure = None;
        let obs = seen.obs;
        let mut out = Vec::new();
        let scaling = seen.lost.is_none() && seen.formed;
        match step {
            Step::AddLearner
            | Step::Remove {
                why: RemoveWhy::ScaleDown,
                ..
            } if scaling && self.scaling.is_none() => {
                if let Some(size) = seen.size.filter(|s| *s != voters(obs)) {
                    let from = voters(obs);
                    let word = if size > from { "up" } else { "down" };
                    let reason = if size > from {
                        "ScalingUp"
                    } else {
                        "ScalingDown"
                    };
                    self.scaling = Some(from);
                    out.push(Notice::normal(
                        reason,
                        format!("scaling {word} from {from} to {size} members"),
                    ));
                }
            }
            Step::Upgrade { to, .. } if self.upgrading.is_none() => {
                let from = obs.current_version.clone();
                let was = from
                    .as_deref()
                    .map(|f| format!(" from {f}"))
                    .unwrap_or_default();
                out.push(Notice::normal(
                    "UpgradeStarted",
                    format!(
                        "rolling upgrade{was} to {to} started: members restart one at a time, \
                         the leader last"
                    ),
                ));
                self.upgrading = Some((from, *to));
            }
            _ => {}
        }
        if let Some(n) = begun(step, seen, added) {
            out.push(n);
        }
        match step {
            Step::AddLearner => self.added = added.map(str::to_string),
            Step::Start { member }
                if !newcomer(obs, member) && seen.moves.get(member).is_none() =>
            {
                self.down.insert(member.clone());
            }
            _ => {}
        }
        out
    }

    /// The notice of a step that failed, once per failure: a refusal by
    /// etcd of the moment (it takes the change a few seconds later) is
    /// none.
    pub fn failed(&mut self, failure: &Failure) -> Option<Notice> {
        let Failed::Step(step) = &failure.what else {
            return None;
        };
        if failure.refused || self.failure.as_deref() == Some(&failure.message) {
            return None;
        }
        self.failure = Some(failure.message.clone());
        let reason = match step {
            Step::Upgrade { .. } => "UpgradeFailed",
            _ => "ActionFailed",
        };
        Some(Notice::warning(reason, failure.message.clone()))
    }
}

/// The notice of a member moved on purpose that serves again.
fn arrival(member: &str, kind: &MoveKind) -> Option<Notice> {
    match kind {
        MoveKind::Upgraded { from, to } => {
            let was = from.map(|f| format!(" (was {f})")).unwrap_or_default();
            Some(Notice::normal(
                "MemberUpgraded",
                format!("member {member} serves on {to}{was}"),
            ))
        }
        MoveKind::Restarted => Some(Notice::normal(
            "MemberRestarted",
            format!("member {member} serves again with the spec's settings"),
        )),
        MoveKind::Reconfigured => Some(Notice::normal(
            "MemberReconfigured",
            format!("member {member} serves again with its new TLS settings"),
        )),
        // A new member's arrival is its promotion; a seed's, the rebuild's
        // end.
        MoveKind::Added | MoveKind::Reseeded => None,
    }
}

/// The notice of a step begun (or, for one done within the step, done).
fn begun(step: &Step, seen: &Seen, added: Option<&str>) -> Option<Notice> {
    let obs = seen.obs;
    let n = match step {
        Step::Bootstrap => Notice::normal("Creating", format!("creating the cluster: {step}")),
        Step::AddLearner => {
            let name = added.unwrap_or("a new member");
            let why = match seen.lost {
                Some(Lost::Member { member, .. }) => format!(" to replace {member}"),
                Some(Lost::Quorum { .. }) => " to the rebuilt cluster".into(),
                Some(Lost::Recreated { member }) => format!(" to take the place of {member}"),
                None => String::new(),
            };
            Notice::normal(
                "MemberAdded",
                format!("member {name} added as a learner{why}"),
            )
        }
        Step::Promote { member, .. } => Notice::normal(
            "MemberPromoted",
            format!("learner {member} caught up and was promoted to voter"),
        ),
        Step::Remove {
            member,
            why: RemoveWhy::ScaleDown,
            ..
        } => Notice::normal(
            "MemberRemoved",
            format!("member {member} removed: the spec asks for fewer members"),
        ),
        Step::Remove {
            why: RemoveWhy::StorageClass,
            ..
        } => Notice::normal("MemberRemoved", step.to_string()),
        Step::Remove { member, .. } if seen.moves.get(member).is_some() => Notice::normal(
            "MemberRemoved",
            Lost::Recreated {
                member: member.clone(),
            }
            .message(),
        ),
        Step::Remove { member, why, .. } => Notice::warning(
            "MemberLost",
            Lost::Member {
                member: member.clone(),
                why: *why,
            }
            .message(),
        ),
        // A new member's first start, or a moved one's pod made again
        // (whose failure, if any, is told as it fails).
        Step::Start { member } if newcomer(obs, member) || seen.moves.get(member).is_some() => {
            return None;
        }
        Step::Start { member } => Notice::warning(
            "MemberStopped",
            format!(
                "member {member} stopped without the operator asking; it was started again \
                 with its data"
            ),
        ),
        Step::DeleteStray { member } => Notice::normal(
            "MemberDeleted",
            format!("member {member} deleted: it was not in etcd's member list"),
        ),
        Step::Upgrade { member, to } => {
            let from = obs.platform.iter().find(|p| &p.addr.name == member);
            let from = from
                .map(|p| format!(" from {}", p.version))
                .unwrap_or_default();
            Notice::normal(
                "UpgradingMember",
                format!("upgrading member {member}{from} to {to}: it restarts on its data"),
            )
        }
        Step::Restart { .. } => Notice::normal("RestartingMember", step.to_string()),
        Step::ExpandVolume { .. } => Notice::normal("ExpandingVolume", step.to_string()),
        Step::Reconfigure { .. } => Notice::normal("ChangingTLS", step.to_string()),
        Step::UpdatePeerUrl { .. } => Notice::normal("PeerURLUpdated", format!("{step}: done")),
        Step::MoveLeader { from, to, .. } => Notice::normal(
            "LeadershipHandedOver",
            format!(
                "leadership handed over from {from} to {to} before {from} is restarted or removed"
            ),
        ),
        Step::RenewCertificates { member } => Notice::normal(
            "CertificatesRenewed",
            format!("the certificates of member {member} were renewed"),
        ),
        Step::Defragment { .. } => Notice::normal("Defragmented", format!("{step}: done")),
        Step::ClearNoSpace { .. } => Notice::normal("ClearingNoSpace", format!("{step}: done")),
        Step::Disarm { .. } => Notice::normal("AlarmDisarmed", format!("{step}: done")),
        Step::FinishReseed { member } => Notice::normal(
            "RebuildSeedServes",
            format!(
                "member {member} serves alone as the seed of the rebuilt cluster; members are \
                 added back one at a time"
            ),
        ),
        // Said by the rebuild itself, with what it lost.
        Step::RestoreFromBackup | Step::RebuildFromSurvivor { .. } => return None,
        Step::Wait(_) | Step::Converged => return None,
    };
    Some(n)
}

/// Backup milestones between the backup status of the last pass (`None`:
/// the first) and this one's: a backup taken, a failure streak begun, a
/// restore check done.
fn backup_milestones(old: Option<&BackupStatus>, new: &BackupStatus) -> Vec<Notice> {
    let mut out = Vec::new();
    let Some(old) = old else {
        return out;
    };
    // A schedule's first round lists what is there already (it sets the
    // next backup's time with it): only a backup after that was taken.
    if let Some(name) = &new.last_backup
        && old.next_backup_time.is_some()
        && old.last_backup != new.last_backup
    {
        out.push(Notice::normal(
            "BackupTaken",
            format!(
                "backup {name} taken at {} (revision {}) and verified; {} kept",
                new.last_backup_time.as_deref().unwrap_or("?"),
                new.last_backup_revision.unwrap_or_default(),
                new.kept
            ),
        ));
    }
    if let (None, Some(e)) = (&old.last_error, &new.last_error) {
        out.push(Notice::warning("BackupFailed", e.clone()));
    }
    let check = |c: &Option<crate::crd::RestoreCheckStatus>| {
        c.as_ref().map(|c| (c.backup.clone(), c.time.clone()))
    };
    if let Some(c) = &new.last_restore_check
        && check(&old.last_restore_check) != check(&new.last_restore_check)
    {
        let text = format!("restore check of backup {}: {}", c.backup, c.message);
        out.push(match c.result.as_str() {
            "verified" => Notice::normal("RestoreCheckPassed", text),
            "mismatch" => Notice::warning("RestoreCheckMismatch", text),
            _ => Notice::warning("RestoreCheckFailed", text),
        });
    }
    out
}

impl<P: Platform> super::Cluster<P> {
    /// Announces `notices` on the platform, in order.
    pub(super) async fn tell(&self, notices: Vec<Notice>) {
        for n in notices {
            tracing::info!(reason = n.reason, kind = n.type_.as_str(), "{}", n.message);
            self.platform.announce(&self.name, &n).await;
        }
    }
}

#[cfg(test)]
#[path = "story_tests.rs"]
mod tests;
