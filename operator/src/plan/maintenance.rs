//! The plan's rules for a member's database: replacing a corrupt member
//! (its KV hash differs from the one a majority agrees on at the same
//! revision), clearing a NOSPACE alarm (compact, defragment member by
//! member, disarm: one step, [`Step::ClearNoSpace`], that the controller
//! carries out in one go), disarming alarms of members that are gone, and
//! scheduled defragmentation. Pure, like the rest of the plan.
//!
//! Rules:
//! * a member is replaced as corrupt only when a strict majority of the
//!   voters reported the same hash at the same revision (and compaction)
//!   and its own differs; with no such majority nothing is done;
//! * one defragmentation at a time, only when every member is healthy and
//!   the voters other than the one defragmented still form a quorum (a
//!   cluster of one member is defragmented in place: it has no one else);
//!   followers first, the leader only when no follower needs it (a
//!   NOSPACE step lists the members in that order; the controller runs
//!   them one after the other and stops at the first error);
//! * a NOSPACE alarm is disarmed only after every member that needs it was
//!   defragmented, and once every member's database file is below
//!   [`DISARM_BELOW`] of the quota ([`room_again`], asked again by the
//!   controller with the sizes after its defragmentations); while the keys
//!   themselves fill the quota the plan waits and says so.

use super::{Member, Step, View, Wait, quorum};

/// A NOSPACE alarm is disarmed once every member's database file is below
/// this share of the quota (in percent): below it writes have room again.
pub const DISARM_BELOW: i64 = 95;

/// Whether a NOSPACE alarm may be disarmed: the largest database file
/// (`largest`, bytes) is below [`DISARM_BELOW`] of `quota`. The plan asks
/// it of what it observed; the controller again with the sizes after its
/// defragmentations.
pub fn room_again(largest: i64, quota: i64) -> bool {
    largest.saturating_mul(100) < quota.saturating_mul(DISARM_BELOW)
}

/// The quota etcd holds these members to: the smallest backend quota a
/// member runs with (`None` when no member's configuration is known).
/// NOSPACE is judged by it, not by the spec's: until a raised quota is
/// rolled out, etcd raises the alarm again at once above its own.
pub fn running_quota(members: &[Member]) -> Option<i64> {
    members
        .iter()
        .filter_map(|m| m.platform.as_ref())
        .map(|p| p.backend.quota())
        .min()
}

/// Free space inside a database file worth a defragmentation.
pub const MIN_RECLAIM: i64 = 1 << 20;

/// Maintenance settings from the spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbPolicy {
    /// The backend quota members run with (etcd's default when unset).
    pub quota: i64,
    /// Defragment a member whose reclaimable share reaches this percentage.
    pub fragmentation: Option<u8>,
}

impl Default for DbPolicy {
    fn default() -> Self {
        DbPolicy {
            quota: crate::member::backend::DEFAULT_QUOTA,
            fragmentation: None,
        }
    }
}

/// What was seen of a member's database.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DbFacts {
    /// Size of the database file in bytes (0: unknown).
    pub size: i64,
    /// Bytes of it in use; the rest is free space a defragmentation gives
    /// back.
    pub in_use: i64,
    /// Its KV hash at the revision of the last hash check, if it answered.
    pub hash: Option<KvHash>,
    /// The defragmentation schedule came due for it since its last
    /// defragmentation.
    pub defrag_due: bool,
    /// It was defragmented since the NOSPACE alarm now raised was first
    /// seen. (Its bytes in use cannot tell: etcd counts pages a compaction
    /// freed as in use until a later write commits, and under NOSPACE no
    /// write comes, so every member is defragmented once per alarm.)
    pub defragged_since_alarm: bool,
}

impl DbFacts {
    /// Bytes a defragmentation would give back.
    pub fn reclaimable(&self) -> i64 {
        (self.size - self.in_use).max(0)
    }
}

/// A member's KV hash at a revision (etcd's HashKV).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KvHash {
    /// The revision hashed up to.
    pub revision: i64,
    /// The compaction revision of the member when it hashed: hashes are
    /// comparable only when it is the same.
    pub compact_revision: i64,
    /// The hash.
    pub hash: u32,
}

/// What was seen of the cluster's databases as a whole.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterDb {
    /// etcd's alarm list (read from a member with a leader).
    pub alarms: Vec<Alarm>,
    /// The highest revision a member reported.
    pub revision: i64,
    /// The revision the operator last compacted the cluster to (0: none
    /// known).
    pub compacted: i64,
}

/// An alarm etcd raised about a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Alarm {
    /// The member's etcd id.
    pub member: u64,
    /// Which alarm.
    pub kind: AlarmKind,
}

/// Alarms the operator acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlarmKind {
    /// The backend reached its quota: etcd refuses writes.
    NoSpace,
    /// A corruption check found the member's data differs: etcd refuses
    /// requests.
    Corrupt,
}

/// Why a member is defragmented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefragWhy {
    /// `spec.defrag.interval` came due.
    Scheduled,
    /// Its free share passed `spec.defrag.fragmentationPercent`.
    Fragmented,
}

impl View<'_> {
    /// The alarm or defragmentation step, if one is due: every member is
    /// healthy and the membership matches the spec when this is asked.
    pub(super) fn maintain(&self, policy: &DbPolicy) -> Option<Step> {
        if let Some(a) = self.db.alarms.iter().find(|a| a.kind == AlarmKind::Corrupt) {
            return Some(match self.by_id(a.member) {
                None => Step::Disarm { alarm: *a },
                Some(m) => Step::Wait(Wait::CorruptUnconfirmed {
                    member: m.name.clone(),
                }),
            });
        }
        let nospace: Vec<&Alarm> = self
            .db
            .alarms
            .iter()
            .filter(|a| a.kind == AlarmKind::NoSpace)
            .collect();
        if !nospace.is_empty() {
            // None: the keys fill the quota the members run with, and the
            // spec asks for a larger one: members restart with it first
            // (the roll), then the alarm is cleared.
            return self.clear_nospace(&nospace, policy);
        }
        self.scheduled_defrag(policy)
    }

    /// Removal of a corrupt member, if one is found: asked once every
    /// member is healthy and no membership change is in flight, before the
    /// cluster is resized (so a resize never keeps a corrupt member and
    /// removes good ones).
    pub(super) fn replace_corrupt(&self) -> Option<Step> {
        let m = self.corrupt()?;
        let id = m.etcd?.id;
        Some(if self.remove_is_safe(m) {
            Step::Remove {
                member: m.name.clone(),
                id,
                why: super::RemoveWhy::Corrupt,
            }
        } else {
            Step::Wait(Wait::RemoveWouldLoseQuorum {
                member: m.name.clone(),
            })
        })
    }

    fn by_id(&self, id: u64) -> Option<&Member> {
        self.members
            .iter()
            .find(|m| m.etcd.is_some_and(|e| e.id == id))
    }

    /// A voter or learner whose hash differs from the one a strict majority
    /// of voters reported at the same revision and compaction.
    fn corrupt(&self) -> Option<&Member> {
        let hashes: Vec<(&Member, KvHash)> = self
            .members
            .iter()
            .filter_map(|m| m.db.hash.map(|h| (m, h)))
            .collect();
        let voter = |m: &Member| m.etcd.is_some_and(|e| !e.learner);
        let majority = hashes.iter().find_map(|(_, h)| {
            let agreeing = hashes.iter().filter(|(m, o)| voter(m) && o == h).count();
            (agreeing >= quorum(self.voters)).then_some(*h)
        })?;
        hashes
            .iter()
            .find(|(_, h)| {
                h.revision == majority.revision
                    && h.compact_revision == majority.compact_revision
                    && h.hash != majority.hash
            })
            .map(|(m, _)| *m)
    }

    /// Compact, then defragment member by member, then disarm, all in one
    /// [`Step::ClearNoSpace`]: the members that need it (each once per
    /// alarm, and again while it holds [`MIN_RECLAIM`] of free space),
    /// followers first, the leader last, each only when it is safe; the
    /// alarms are disarmed only when every member that needs it is in the
    /// order (the leader waits for every follower).
    fn clear_nospace(&self, alarms: &[&Alarm], policy: &DbPolicy) -> Option<Step> {
        let compact_to = (self.db.revision > self.db.compacted).then_some(self.db.revision);
        let leader = |m: &Member| m.etcd.is_some_and(|e| e.leader);
        let needing: Vec<&Member> = self
            .members
            .iter()
            .filter(|m| !m.db.defragged_since_alarm || m.db.reclaimable() >= MIN_RECLAIM)
            .collect();
        let followers = needing.iter().filter(|m| !leader(m));
        let leaders = needing.iter().filter(|m| leader(m));
        let mut defrag_order = Vec::new();
        let mut all = true;
        for m in followers.chain(leaders) {
            // Up to the first that is not safe: the leader comes only
            // after every follower that needs it.
            if !self.defrag_is_safe(m) {
                all = false;
                break;
            }
            defrag_order.push(m.name.clone());
        }
        if compact_to.is_some() || !defrag_order.is_empty() {
            return Some(Step::ClearNoSpace {
                compact_to,
                disarm: if all {
                    alarms.iter().map(|a| **a).collect()
                } else {
                    Vec::new()
                },
                defrag_order,
            });
        }
        if !all {
            return Some(Step::Wait(Wait::DefragWouldRiskQuorum));
        }
        // Judged by the quota the members run with, not the spec's: etcd
        // raises NOSPACE again at once above its own.
        let quota = running_quota(self.members).unwrap_or(policy.quota);
        let largest = self.members.iter().map(|m| m.db.size).max().unwrap_or(0);
        if room_again(largest, quota) {
            Some(Step::ClearNoSpace {
                compact_to: None,
                defrag_order: Vec::new(),
                disarm: alarms.iter().map(|a| **a).collect(),
            })
        } else if policy.quota > quota {
            None
        } else {
            let in_use = self.members.iter().map(|m| m.db.in_use).max().unwrap_or(0);
            Some(Step::Wait(Wait::QuotaFull { in_use, quota }))
        }
    }

    /// Defragmentation by `spec.defrag`: members whose schedule came due
    /// or whose free share passed the threshold.
    fn scheduled_defrag(&self, policy: &DbPolicy) -> Option<Step> {
        let fragmented = |m: &Member| {
            policy.fragmentation.is_some_and(|p| {
                let free = m.db.reclaimable();
                free >= MIN_RECLAIM && free * 100 >= m.db.size * i64::from(p)
            })
        };
        let due: Vec<&Member> = self.members.iter().filter(|m| m.db.defrag_due).collect();
        if let Some(step) = self.defrag_one(&due, DefragWhy::Scheduled) {
            return Some(step);
        }
        let over: Vec<&Member> = self.members.iter().filter(|m| fragmented(m)).collect();
        self.defrag_one(&over, DefragWhy::Fragmented)
    }

    /// One of `wanting` to defragment: a follower (or learner) first, the
    /// leader only when it is the only one left; `None` when none is safe.
    fn defrag_one(&self, wanting: &[&Member], why: DefragWhy) -> Option<Step> {
        let leader = |m: &Member| m.etcd.is_some_and(|e| e.leader);
        let pick = wanting
            .iter()
            .find(|m| !leader(m))
            .or_else(|| wanting.first())?;
        self.defrag_is_safe(pick).then(|| Step::Defragment {
            member: pick.name.clone(),
            why,
        })
    }

    /// Every member is healthy, and the voters other than `m` still form a
    /// quorum while it is busy (a lone member has no one else to wait for).
    pub(super) fn defrag_is_safe(&self, m: &Member) -> bool {
        let all_healthy = self.members.iter().all(|o| o.healthy);
        let Some(e) = m.etcd else {
            return false;
        };
        let others = self.healthy_voters - usize::from(!e.learner && m.healthy);
        all_healthy && m.healthy && (others >= quorum(self.voters) || self.voters == 1)
    }
}
