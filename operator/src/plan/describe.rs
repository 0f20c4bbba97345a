//! How steps and waits read in logs and status (`lastAction`, condition
//! reasons and messages).

use std::fmt;

use super::{AlarmKind, DefragWhy, NoRestore, RemoveWhy, RestartWhy, Step, Wait};

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Bootstrap => write!(f, "bootstrap the initial members"),
            Step::Start { member } => write!(f, "start member {member}"),
            Step::AddLearner => write!(f, "add a new member as a learner"),
            Step::Promote { member, .. } => write!(f, "promote learner {member} to voter"),
            Step::Remove { member, id, why } => {
                let why = match why {
                    RemoveWhy::DataLost => "its data is gone; it will be replaced",
                    RemoveWhy::NotOnPlatform => "the platform lost it; it will be replaced",
                    RemoveWhy::ScaleDown => "the spec asks for fewer members",
                    RemoveWhy::StorageClass => {
                        "its volume is not of spec.storage.storageClassName; a member on one \
                         that is took its place"
                    }
                    RemoveWhy::Corrupt => {
                        "its KV hash differs from the one a majority of members agrees on at \
                         the same revision (corrupt data); it will be replaced"
                    }
                };
                write!(f, "remove member {member} ({id:x}): {why}")
            }
            Step::DeleteStray { member } => {
                write!(f, "delete {member}: it is not in etcd's member list")
            }
            Step::RestoreFromBackup => write!(
                f,
                "rebuild the cluster from the newest verified backup (quorum is lost for good)"
            ),
            Step::ClearNoSpace {
                compact_to,
                defrag_order,
                disarm,
            } => {
                write!(f, "clear the NOSPACE alarm:")?;
                let mut sep = " ";
                if let Some(revision) = compact_to {
                    write!(f, "{sep}compact the history up to revision {revision}")?;
                    sep = ", then ";
                }
                if !defrag_order.is_empty() {
                    let order = defrag_order.join(", ");
                    write!(f, "{sep}defragment member {order}, one at a time")?;
                    sep = ", then ";
                }
                if disarm.is_empty() {
                    Ok(())
                } else {
                    let ids: Vec<String> =
                        disarm.iter().map(|a| format!("{:x}", a.member)).collect();
                    write!(
                        f,
                        "{sep}disarm member {}'s NOSPACE alarm once every database file has room",
                        ids.join(", ")
                    )
                }
            }
            Step::Defragment { member, why } => {
                let why = match why {
                    DefragWhy::Scheduled => "spec.defrag.interval came due",
                    DefragWhy::Fragmented => {
                        "its free space passed spec.defrag.fragmentationPercent"
                    }
                };
                write!(f, "defragment member {member} ({why})")
            }
            Step::Disarm { alarm } => {
                let kind = match alarm.kind {
                    AlarmKind::NoSpace => "NOSPACE alarm: the database has room again",
                    AlarmKind::Corrupt => "CORRUPT alarm: that member is no longer in the cluster",
                };
                write!(f, "disarm member {:x}'s {kind}", alarm.member)
            }
            Step::RebuildFromSurvivor { member, revision } => write!(
                f,
                "rebuild the cluster from member {member}, the most advanced survivor (revision \
                 {revision}): restart it alone with --force-new-cluster (quorum is lost for good)"
            ),
            Step::FinishReseed { member } => write!(
                f,
                "member {member} serves as a cluster of one: later starts no longer force a new \
                 cluster"
            ),
            Step::Upgrade { member, to } => write!(f, "upgrade member {member} to {to}"),
            Step::RenewCertificates { member } => {
                write!(f, "renew the certificates of member {member}")
            }
            Step::ExpandVolume { member, to } => write!(
                f,
                "grow member {member}'s volume to {to} (spec.storage.size), in place"
            ),
            Step::Reconfigure { member, to, .. } => {
                let scheme = |https| if https { "https" } else { "http" };
                write!(
                    f,
                    "restart member {member} with peer {} (TLS files {}), client {}",
                    scheme(to.peer_https),
                    on_off(to.files.peer),
                    scheme(to.client_https),
                )
            }
            Step::UpdatePeerUrl { member, https, .. } => write!(
                f,
                "update the peer URL of member {member} in etcd's member list to {}://",
                if *https { "https" } else { "http" }
            ),
            Step::Restart { member, why } => match why {
                RestartWhy::Settings { changed } => write!(
                    f,
                    "restart member {member} to apply the changed {}",
                    changed.join(" and ")
                ),
                RestartWhy::GrowFilesystem => write!(
                    f,
                    "restart member {member} so its filesystem grows to its volume's new size \
                     (the storage driver resizes it only while the pod is stopped)"
                ),
            },
            Step::MoveLeader { from, to, .. } => write!(
                f,
                "hand the leadership over from {from} to {to} before {from} is restarted or \
                 removed"
            ),
            Step::Wait(w) => write!(f, "wait: {w}"),
            Step::Converged => write!(f, "nothing to do"),
        }
    }
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

impl Wait {
    /// A CamelCase reason for status conditions.
    pub fn reason(&self) -> &'static str {
        match self {
            Wait::Paused => "Paused",
            Wait::Forming => "Forming",
            Wait::MemberNotReady { .. } => "MemberNotReady",
            Wait::Electing { .. } => "Electing",
            Wait::QuorumLost { .. } => "QuorumLost",
            Wait::RemoveWouldLoseQuorum { .. } => "RemoveWouldLoseQuorum",
            Wait::Unmanaged { .. } => "UnmanagedMember",
            Wait::UpgradePath { .. } => "UnsupportedUpgradePath",
            Wait::UpgradeNeedsThreeMembers => "UpgradeNeedsThreeMembers",
            Wait::RestartNeedsThreeMembers => "RestartNeedsThreeMembers",
            Wait::TlsInvalid { .. } => "TLSInvalid",
            Wait::CorruptUnconfirmed { .. } => "CorruptAlarm",
            Wait::DefragWouldRiskQuorum => "NoSpaceDefragWouldRiskQuorum",
            Wait::QuotaFull { .. } => "NoSpaceQuotaFull",
            Wait::SurvivorSilent { .. } => "SurvivorSilent",
            Wait::Reseeding { .. } => "RebuildingFromSurvivor",
            Wait::RestoreNotFound { .. } => "RestoreSourceNotFound",
            Wait::VolumeGrowing { .. } => "VolumeGrowing",
            Wait::VolumeShrink { .. } => "VolumeShrinkRefused",
            Wait::VolumeNotExpandable { .. } => "VolumeNotExpandable",
        }
    }

    /// Whether the wait means something is wrong (as opposed to a step in
    /// progress).
    pub fn is_problem(&self) -> bool {
        !matches!(
            self,
            Wait::Paused
                | Wait::Forming
                | Wait::MemberNotReady { .. }
                | Wait::Electing { .. }
                | Wait::Reseeding { .. }
                | Wait::VolumeGrowing { .. }
        )
    }
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wait::Paused => write!(f, "spec.paused is true; observing only"),
            Wait::Forming => write!(f, "initial members are electing a leader"),
            Wait::MemberNotReady { member } => write!(f, "member {member} is not ready yet"),
            Wait::Electing { alive, needed } => write!(
                f,
                "no leader yet: {alive} members run ({needed} needed for quorum), electing"
            ),
            Wait::QuorumLost {
                alive,
                needed,
                no_restore,
            } => {
                write!(
                    f,
                    "quorum lost: {alive} members run and no other member has data to restart \
                     with, {needed} are needed; "
                )?;
                match no_restore {
                    NoRestore::FlagOff => write!(
                        f,
                        "waiting: set spec.recovery.fromSurvivor to rebuild from the member that \
                         kept the most (nothing it kept is lost), or \
                         spec.recovery.restoreFromBackup to rebuild from the newest backup \
                         (writes after it are lost), or bring members back by hand"
                    ),
                    NoRestore::NoBackup => write!(
                        f,
                        "spec.recovery.restoreFromBackup is set but there is no verified backup"
                    ),
                    NoRestore::NoSurvivor => write!(
                        f,
                        "spec.recovery.fromSurvivor is set but no member kept its data; set \
                         spec.recovery.restoreFromBackup to rebuild from the newest backup"
                    ),
                }
            }
            Wait::RemoveWouldLoseQuorum { member } => write!(
                f,
                "member {member} is lost, but removing it now would lose quorum"
            ),
            Wait::Unmanaged { id } => write!(
                f,
                "etcd lists member {id:x}, which the operator does not run; \
                 remove it with `etcdctl member remove {id:x}`"
            ),
            Wait::UpgradePath { from, to } => write!(
                f,
                "cannot go from {from} to {to}: upgrades move one minor version forward \
                 at a time and never down"
            ),
            Wait::SurvivorSilent { member } => write!(
                f,
                "quorum lost for good, but member {member} runs with its data and does not \
                 answer (paused, cut off?): it may be the most advanced, so the rebuild waits \
                 for it to answer or stop"
            ),
            Wait::Reseeding { member } => write!(
                f,
                "member {member} was restarted alone with --force-new-cluster and is not serving \
                 yet"
            ),
            Wait::UpgradeNeedsThreeMembers => write!(
                f,
                "a rolling upgrade restarts one voter at a time and needs at least 3 healthy \
                 members to keep quorum; scale up first"
            ),
            Wait::RestartNeedsThreeMembers => write!(
                f,
                "a TLS change, a new trusted CA or new spec.tuning restarts one voter at a time \
                 and needs at least 3 healthy members to keep quorum; scale up first (new members \
                 start with the spec's settings)"
            ),
            Wait::TlsInvalid { message } => {
                write!(f, "{message}; nothing is restarted until it is fixed")
            }
            Wait::RestoreNotFound { message } => write!(f, "{message}"),
            Wait::VolumeGrowing { member, to } => write!(
                f,
                "member {member}'s volume grows to {to}; the next member's grows after it"
            ),
            Wait::VolumeShrink {
                member,
                has,
                wanted,
            } => write!(
                f,
                "spec.storage.size: {wanted} is smaller than member {member}'s volume ({has}): a \
                 volume claim never shrinks, so no member is added on a smaller one; set it to \
                 {has} or more (to move to smaller volumes, restore a backup into a new cluster)"
            ),
            Wait::VolumeNotExpandable {
                members,
                class,
                wanted,
            } => write!(
                f,
                "spec.storage.size: {wanted}, but storage class {class} does not allow volume \
                 expansion, so the volumes of {} stay as they are; set allowVolumeExpansion: \
                 true on the class if its driver can grow volumes, or set the size back",
                members.join(", ")
            ),
            Wait::CorruptUnconfirmed { member } => write!(
                f,
                "etcd raised a CORRUPT alarm about member {member}, but its KV hash does not \
                 differ from a majority's at the same revision; etcd refuses requests until \
                 the alarm is disarmed (`etcdctl alarm disarm`) once the data is checked"
            ),
            Wait::DefragWouldRiskQuorum => write!(
                f,
                "etcd raised NOSPACE and a member must be defragmented, but while it is busy \
                 too few voters would be left for quorum; scale up to 3 members"
            ),
            Wait::QuotaFull { in_use, quota } => write!(
                f,
                "etcd raised NOSPACE: compacted and defragmented, the keys still use {} MiB of \
                 the {} MiB quota; raise spec.quotaBackendBytes or delete keys",
                in_use >> 20,
                quota >> 20
            ),
        }
    }
}
