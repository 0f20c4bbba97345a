//! The plan's output: the step chosen, and why it waits, restarts or
//! removes.

use super::{Alarm, DefragWhy, TlsState};
use crate::version::Version;

/// The next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Create the initial members (those missing) and start those not
    /// running, all in one static bootstrap.
    Bootstrap,
    /// Start a stopped member: in place with its data, or for the first time.
    Start {
        /// Member to start.
        member: String,
    },
    /// Add a new member to etcd as a learner, then start it.
    AddLearner,
    /// Promote a caught-up learner to a voting member.
    Promote {
        /// Learner to promote.
        member: String,
        /// Its etcd id.
        id: u64,
    },
    /// Remove a member from etcd's member list, then delete it from the
    /// platform (process or pod, and its data).
    Remove {
        /// Member to remove.
        member: String,
        /// Its etcd id.
        id: u64,
        /// Why it goes.
        why: RemoveWhy,
    },
    /// Delete a member the platform runs but etcd does not list.
    DeleteStray {
        /// Member to delete.
        member: String,
    },
    /// Quorum is lost for good: move the old members' data aside and
    /// bootstrap a new cluster from the newest verified backup.
    RestoreFromBackup,
    /// Clear a NOSPACE alarm in one go: compact the history (physically:
    /// the call returns once the space is free inside the database files),
    /// defragment the members one at a time in the order given (followers
    /// first, the leader last), then disarm the alarms, but only once every
    /// member was defragmented and every database file is below
    /// [`super::DISARM_BELOW`] of the quota ([`super::room_again`]). The
    /// controller stops at the first error and observes again after.
    ClearNoSpace {
        /// Compact the history up to this revision first (`None`: compacted
        /// to the current revision already).
        compact_to: Option<i64>,
        /// Members to defragment, one at a time, in this order.
        defrag_order: Vec<String>,
        /// The NOSPACE alarms to disarm after the last defragmentation
        /// (empty when a member that needs defragmenting is left out: a
        /// later pass finishes).
        disarm: Vec<Alarm>,
    },
    /// Defragment one member's database (it answers nothing meanwhile).
    Defragment {
        /// The member.
        member: String,
        /// Why now.
        why: DefragWhy,
    },
    /// Disarm an alarm etcd raised.
    Disarm {
        /// The alarm.
        alarm: Alarm,
    },
    /// Quorum is lost for good and `member`, the most advanced survivor,
    /// kept its data: restart it alone with `--force-new-cluster` (its data
    /// and id kept, the others dropped from its member list); the others
    /// are then deleted as strays and new members added as learners.
    RebuildFromSurvivor {
        /// The survivor.
        member: String,
        /// Its revision when chosen.
        revision: i64,
    },
    /// The seed of a rebuild serves: later starts of it must not force a
    /// new cluster again (that would drop the members added next).
    FinishReseed {
        /// The seed.
        member: String,
    },
    /// Restart a member on a new version, keeping its data (and with the
    /// spec's other settings, such as its tuning).
    Upgrade {
        /// Member to upgrade.
        member: String,
        /// Version to run.
        to: Version,
    },
    /// Grow a member's data volume to the spec's size in place (its
    /// claim's request; no restart): one member at a time.
    ExpandVolume {
        /// The member.
        member: String,
        /// The size, as `spec.storage.size` writes it.
        to: String,
    },
    /// Issue a member's certificates again and install them (no restart:
    /// etcd reads certificates on each new connection).
    RenewCertificates {
        /// The member.
        member: String,
    },
    /// Restart a member with other TLS files, listeners or URLs (turning
    /// TLS on or off one member at a time, or trusting other CAs); when its
    /// peer URL changes scheme, etcd's member list is updated after.
    Reconfigure {
        /// The member.
        member: String,
        /// Its etcd id (for the member list update).
        id: u64,
        /// What it runs with next.
        to: TlsState,
    },
    /// Set a member's peer URL in etcd's member list to the scheme it
    /// listens on (finishing a change cut short between the restart and
    /// the member list update).
    UpdatePeerUrl {
        /// The member.
        member: String,
        /// Its etcd id.
        id: u64,
        /// `https://`.
        https: bool,
    },
    /// Restart a member on its version with the spec's settings, keeping
    /// its data.
    Restart {
        /// Member to restart.
        member: String,
        /// What changed.
        why: RestartWhy,
    },
    /// Move the leadership to another voter (etcd's MoveLeader) and wait
    /// until it leads: the step the plan takes before it restarts or
    /// removes the leader, so no write waits for an election.
    MoveLeader {
        /// The leader now.
        from: String,
        /// The voter to lead: healthy, the most caught up of those the
        /// next steps leave alone.
        to: String,
        /// Its etcd id.
        id: u64,
    },
    /// Nothing safe to do now; wait for a change.
    Wait(Wait),
    /// The cluster matches the spec.
    Converged,
}

/// Why a member is restarted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestartWhy {
    /// A setting etcd takes only at start changed in the spec
    /// (`spec.tuning`, `spec.quotaBackendBytes`, `spec.compaction`), or
    /// one its pod is made with (`spec.image.repository`, `spec.pod`): one
    /// comparison of [`Settings`](crate::member::Settings) finds every such change.
    Settings {
        /// The spec fields the member runs another value of
        /// ([`Settings::changed`](crate::member::Settings::changed)).
        changed: Vec<&'static str>,
    },
    /// Its volume grew, and its filesystem grows only when the pod
    /// restarts (a storage driver that resizes offline).
    GrowFilesystem,
}

/// Why a member is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoveWhy {
    /// Its data is gone (or never trusted again): it will be replaced.
    DataLost,
    /// etcd lists it but the platform has no such member: it will be replaced.
    NotOnPlatform,
    /// The spec asks for fewer members.
    ScaleDown,
    /// Its KV hash differs from the one a majority of voters agrees on at
    /// the same revision: it will be replaced.
    Corrupt,
    /// Its claim is of another storage class than
    /// `spec.storage.storageClassName`: a member on a claim of that class
    /// was added first and took its place.
    StorageClass,
}

impl RemoveWhy {
    /// The operator chose it (the spec asks for it): planned, like a
    /// rolling restart, so it waits for every other member to serve, and
    /// nothing was lost.
    pub fn planned(self) -> bool {
        matches!(self, RemoveWhy::ScaleDown | RemoveWhy::StorageClass)
    }
}

/// Why the plan waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wait {
    /// `spec.paused` is set.
    Paused,
    /// Initial members are running and electing a leader.
    Forming,
    /// A member runs but is not healthy yet (starting, catching up, or stuck).
    MemberNotReady {
        /// The member.
        member: String,
    },
    /// No member answers with a leader, but enough members run (or can) to
    /// form a quorum: they are electing.
    Electing {
        /// Members running.
        alive: usize,
        /// Votes needed.
        needed: usize,
    },
    /// Quorum cannot come back: too few members kept their data.
    QuorumLost {
        /// Members running.
        alive: usize,
        /// Votes needed.
        needed: usize,
        /// Why the cluster is not rebuilt from a backup.
        no_restore: NoRestore,
    },
    /// A lost member cannot be removed without losing quorum.
    RemoveWouldLoseQuorum {
        /// The member.
        member: String,
    },
    /// etcd lists a healthy member the platform does not run.
    Unmanaged {
        /// Its etcd id.
        id: u64,
    },
    /// The spec's version cannot be reached from a member's version in one
    /// rolling step.
    UpgradePath {
        /// Version a member runs.
        from: Version,
        /// Version the spec asks for.
        to: Version,
    },
    /// Upgrading restarts a voter, and fewer than three voters cannot
    /// spare one.
    UpgradeNeedsThreeMembers,
    /// A restart (a TLS change, new trusted CAs, or new settings from
    /// `spec.tuning`) takes a voter away, and fewer than three voters
    /// cannot spare one.
    RestartNeedsThreeMembers,
    /// Certificates cannot be used as the spec says (set by the
    /// controller, not the plan): nothing is done until they are fixed.
    TlsInvalid {
        /// What is wrong, naming the field and the file or Secret.
        message: String,
    },
    /// etcd raised a CORRUPT alarm about a member whose KV hash does not
    /// (yet) differ from a majority's.
    CorruptUnconfirmed {
        /// The member.
        member: String,
    },
    /// A NOSPACE alarm needs a defragmentation that would leave too few
    /// voters to keep quorum while it runs.
    DefragWouldRiskQuorum,
    /// Compacted and defragmented, the keys still fill the quota.
    QuotaFull {
        /// Bytes in use in the largest database.
        in_use: i64,
        /// The quota.
        quota: i64,
    },
    /// Quorum is lost for good, but a surviving member runs without
    /// answering (paused, cut off): the most advanced survivor cannot be
    /// chosen until it answers or stops.
    SurvivorSilent {
        /// The member.
        member: String,
    },
    /// The seed of a rebuild was started with `--force-new-cluster` and is
    /// not serving yet.
    Reseeding {
        /// The seed.
        member: String,
    },
    /// The backup `spec.restore` names is not where it was looked for (set
    /// by the controller, not the plan): the cluster is not created until
    /// the spec changes, or until the later try the message names.
    RestoreNotFound {
        /// Where it was looked for, what is there, and when it is looked
        /// for again.
        message: String,
    },
    /// A member's volume is growing to the spec's size; the next grows
    /// once it has.
    VolumeGrowing {
        /// The member.
        member: String,
        /// The size it grows to.
        to: String,
    },
    /// `spec.storage.size` is smaller than a member's volume: a claim never
    /// shrinks, and no member is added on a smaller one.
    VolumeShrink {
        /// The member.
        member: String,
        /// Its claim's size.
        has: String,
        /// The spec's size.
        wanted: String,
    },
    /// Volumes of a storage class that does not allow expansion are
    /// smaller than `spec.storage.size`.
    VolumeNotExpandable {
        /// The members whose volumes stay as they are.
        members: Vec<String>,
        /// Their storage class.
        class: String,
        /// The spec's size.
        wanted: String,
    },
}

/// Why a cluster that lost quorum is not rebuilt from a backup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoRestore {
    /// `spec.recovery.restoreFromBackup` is off.
    FlagOff,
    /// No verified backup exists.
    NoBackup,
    /// No member kept its data, and no backup may be used (the flag is off
    /// or there is none): said apart so the message names what is missing.
    NoSurvivor,
}

impl Step {
    /// Whether the step changes etcd's member list.
    pub fn is_membership_change(&self) -> bool {
        matches!(
            self,
            Step::AddLearner | Step::Promote { .. } | Step::Remove { .. }
        )
    }

    /// Whether the step restarts a running voter on purpose (a planned
    /// restart: an upgrade, a TLS change, or new settings).
    pub fn is_planned_restart(&self) -> bool {
        matches!(
            self,
            Step::Upgrade { .. } | Step::Reconfigure { .. } | Step::Restart { .. }
        )
    }

    /// The member the step takes out of service (restarts, or removes from
    /// the member list): a leader named here gets a [`Step::MoveLeader`]
    /// first. Every step that stops or removes a running member must be
    /// listed here.
    pub fn disrupts(&self) -> Option<&str> {
        match self {
            Step::Upgrade { member, .. }
            | Step::Restart { member, .. }
            | Step::Reconfigure { member, .. }
            | Step::Remove { member, .. } => Some(member),
            _ => None,
        }
    }

    /// A short name of the kind of step, for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Step::Bootstrap => "bootstrap",
            Step::Start { .. } => "start",
            Step::AddLearner => "add_learner",
            Step::Promote { .. } => "promote",
            Step::Remove { .. } => "remove",
            Step::DeleteStray { .. } => "delete_stray",
            Step::RestoreFromBackup => "restore_from_backup",
            Step::Upgrade { .. } => "upgrade",
            Step::Restart { .. } => "restart",
            Step::MoveLeader { .. } => "move_leader",
            Step::RenewCertificates { .. } => "renew_certificates",
            Step::ExpandVolume { .. } => "expand_volume",
            Step::Reconfigure { .. } => "reconfigure",
            Step::UpdatePeerUrl { .. } => "update_peer_url",
            Step::RebuildFromSurvivor { .. } => "rebuild_from_survivor",
            Step::FinishReseed { .. } => "finish_reseed",
            Step::ClearNoSpace { .. } => "clear_nospace",
            Step::Defragment { .. } => "defragment",
            Step::Disarm { .. } => "disarm",
            Step::Wait(_) => "wait",
            Step::Converged => "converged",
        }
    }
}
