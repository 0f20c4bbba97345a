//! The plan's view of one observation ([`View`]): derived facts (voters,
//! healthy voters, which member may be restarted or removed) and the two
//! halves of the plan, with quorum and without.

use super::*;
use crate::crd::StoragePolicy;

/// Derived facts about the observation.
pub(super) struct View<'a> {
    pub(super) members: &'a [Member],
    pub(super) db: &'a ClusterDb,
    pub(super) persistent: bool,
    pub(super) voters: usize,
    pub(super) healthy_voters: usize,
}

impl<'a> View<'a> {
    pub(super) fn new(d: &Desired, o: &'a Observed) -> Self {
        let voting = o
            .members
            .iter()
            .filter(|m| m.etcd.is_some_and(|e| !e.learner));
        View {
            members: &o.members,
            db: &o.db,
            persistent: d.storage == StoragePolicy::Persistent,
            voters: voting.clone().count(),
            healthy_voters: voting.filter(|m| m.healthy).count(),
        }
    }

    /// Stopped, with data that may be used to start it again in place.
    pub(super) fn restartable(&self, m: &Member) -> bool {
        m.platform
            .as_ref()
            .is_some_and(|p| !p.running && p.has_data && self.persistent && !p.crash_looping)
    }

    pub(super) fn stopped(m: &Member) -> bool {
        m.platform.as_ref().is_some_and(|p| !p.running)
    }

    /// Removing `m` keeps a quorum of healthy voters among the voters left.
    pub(super) fn remove_is_safe(&self, m: &Member) -> bool {
        match m.etcd {
            None => false,
            Some(e) if e.learner => true,
            Some(_) => {
                let left = self.voters - 1;
                let healthy_left = self.healthy_voters - usize::from(m.healthy);
                left >= 1 && healthy_left >= quorum(left)
            }
        }
    }

    pub(super) fn remove(&self, m: &Member, why: RemoveWhy) -> Option<Step> {
        let id = m.etcd?.id;
        Some(Step::Remove {
            member: m.name.clone(),
            id,
            why,
        })
    }

    pub(super) fn find(&self, name: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.name == name)
    }

    pub(super) fn running(m: &Member) -> bool {
        m.platform.as_ref().is_some_and(|p| p.running)
    }

    /// Without quorum: restart what kept its data; only when a quorum
    /// cannot come back that way, rebuild (see [`lost`] for the rules).
    pub(super) fn without_quorum(&self, d: &Desired, o: &Observed) -> Step {
        // A rebuild from a survivor under way: its seed is started again
        // if it stopped, and waited for while it starts. A seed lost for
        // good itself leaves the choice to be made again below.
        if let Some(seed) = o.reseeding.as_deref().and_then(|s| self.find(s)) {
            if self.restartable(seed) {
                return Step::Start {
                    member: seed.name.clone(),
                };
            }
            if Self::running(seed) {
                return Step::Wait(Wait::Reseeding {
                    member: seed.name.clone(),
                });
            }
        }
        if let Some(m) = self.members.iter().find(|m| self.restartable(m)) {
            return Step::Start {
                member: m.name.clone(),
            };
        }
        // Nothing left to restart: the voters running are all that can vote.
        let alive = lost::voters_alive(self.members);
        let voters = if o.voters_hint > 0 {
            o.voters_hint
        } else {
            self.members.len()
        };
        let needed = quorum(voters);
        if alive >= needed {
            return Step::Wait(Wait::Electing { alive, needed });
        }
        // Quorum is lost for good: rebuild from what holds the most.
        let survivor = if d.from_survivor && self.persistent {
            match lost::best_survivor(self.members) {
                Ok(s) => s,
                Err(silent) => {
                    return Step::Wait(Wait::SurvivorSilent {
                        member: silent.name.clone(),
                    });
                }
            }
        } else {
            None
        };
        let backup = d.restore_from_backup && o.backup_available;
        match (survivor, backup) {
            (Some((_, p)), true) if o.backup_revision.is_some_and(|b| b > p.revision) => {
                Step::RestoreFromBackup
            }
            (Some((m, p)), _) => Step::RebuildFromSurvivor {
                member: m.name.clone(),
                revision: p.revision,
            },
            (None, true) => Step::RestoreFromBackup,
            (None, false) => Step::Wait(Wait::QuorumLost {
                alive,
                needed,
                no_restore: if d.restore_from_backup {
                    NoRestore::NoBackup
                } else if d.from_survivor && self.persistent {
                    NoRestore::NoSurvivor
                } else {
                    NoRestore::FlagOff
                },
            }),
        }
    }

    pub(super) fn with_quorum(&self, d: &Desired, o: &Observed) -> Step {
        // The seed of a rebuild serves: no later start of it may force a
        // new cluster again, so that is settled before anyone joins.
        if let Some(seed) = &o.reseeding {
            return Step::FinishReseed {
                member: seed.clone(),
            };
        }
        if let Some(step) = self.peer_url_mismatch() {
            return step;
        }
        let over_size = self.voters > d.size;
        // Members the platform runs but etcd does not list: leftovers of a
        // removal or of an add that did not happen.
        if let Some(m) = self.members.iter().find(|m| m.etcd.is_none()) {
            return Step::DeleteStray {
                member: m.name.clone(),
            };
        }
        // Stopped members that can start: in place, or for the first time.
        for m in self.members.iter().filter(|m| Self::stopped(m)) {
            let first_start = m.etcd.is_some_and(|e| !e.started);
            if self.restartable(m) || first_start {
                if over_size && self.remove_is_safe(m) {
                    return self
                        .remove(m, RemoveWhy::ScaleDown)
                        .unwrap_or(Step::Converged);
                }
                return Step::Start {
                    member: m.name.clone(),
                };
            }
        }
        // Members whose data is gone, or that the platform lost: replace.
        for m in self.members.iter().filter(|m| !m.healthy) {
            let why = match &m.platform {
                None => RemoveWhy::NotOnPlatform,
                Some(p) if !p.running => RemoveWhy::DataLost,
                Some(_) => continue,
            };
            if self.remove_is_safe(m) {
                return self.remove(m, why).unwrap_or(Step::Converged);
            }
            // Not safe yet: a member still starting may make it safe soon.
            let starting = self
                .members
                .iter()
                .find(|s| !s.healthy && s.platform.as_ref().is_some_and(|p| p.running));
            return Step::Wait(match starting {
                Some(s) => Wait::MemberNotReady {
                    member: s.name.clone(),
                },
                None => Wait::RemoveWouldLoseQuorum {
                    member: m.name.clone(),
                },
            });
        }
        if let Some(m) = self.members.iter().find(|m| !m.healthy) {
            return Step::Wait(Wait::MemberNotReady {
                member: m.name.clone(),
            });
        }
        if let Some(e) = self
            .members
            .iter()
            .find_map(|m| m.etcd.filter(|_| m.platform.is_none()))
        {
            return Step::Wait(Wait::Unmanaged { id: e.id });
        }
        // Every member is healthy from here on.
        if let Some((m, e)) = self
            .members
            .iter()
            .find_map(|m| m.etcd.filter(|e| e.learner).map(|e| (m, e)))
        {
            // A learner added to take an old storage class's member's
            // place is promoted beside it; the old member goes next.
            return if self.voters < d.size || self.moving_class(d) {
                Step::Promote {
                    member: m.name.clone(),
                    id: e.id,
                }
            } else {
                self.remove(m, RemoveWhy::ScaleDown)
                    .unwrap_or(Step::Converged)
            };
        }
        if let Some(step) = self.replace_corrupt() {
            return step;
        }
        if self.voters < d.size {
            // Never a new member on a claim smaller than the others'.
            return self.volume_shrunk(d).unwrap_or(Step::AddLearner);
        }
        if over_size && let Some(step) = self.class_victim(d) {
            return step;
        }
        if over_size {
            return self
                .scale_down_victims(d)
                .last()
                .and_then(|m| self.remove(m, RemoveWhy::ScaleDown))
                .unwrap_or(Step::Converged);
        }
        // A TLS change that can only wait (a cluster too small to restart
        // a member) does not hold back clearing an alarm.
        let tls = self.tls_change(&d.tls);
        if let Some(step) = tls.as_ref().filter(|s| !matches!(s, Step::Wait(_))) {
            return step.clone();
        }
        if let Some(step) = self.maintain(&d.db) {
            return step;
        }
        if let Some(step) = tls {
            return step;
        }
        if let Some(step) = self.grow(d) {
            return step;
        }
        if self.moving_class(d) {
            return self.volume_shrunk(d).unwrap_or(Step::AddLearner);
        }
        match self.roll(d) {
            Step::Converged => self.volume_wait(d).unwrap_or(Step::Converged),
            step => step,
        }
    }

    /// The voters a scale-down to `d.size` removes: the newest followers.
    /// The leader stays, whatever its age: a scale-down never needs a
    /// leadership change, and every change of leader, a handover's
    /// included, loses the proposals followers forward to the old leader
    /// in its moment (etcd issue 8975), which their clients only learn of
    /// from their own timeout. Without the handover (a benchmark's switch)
    /// the newest go, the leader among them. Oldest first; the plan
    /// removes the last.
    pub(super) fn scale_down_victims(&self, d: &Desired) -> Vec<&Member> {
        let mut voters: Vec<&Member> = self
            .members
            .iter()
            .filter(|m| m.etcd.is_some_and(|e| !e.learner))
            .collect();
        voters.sort_by(|a, b| member_order(&a.name, &b.name));
        let keep = d.size.min(voters.len());
        let leader = voters.iter().position(|m| m.etcd.is_some_and(|e| e.leader));
        if let Some(i) = leader.filter(|&i| d.handover && i >= keep && keep > 0) {
            let leader = voters.remove(i);
            voters.insert(0, leader);
        }
        voters.split_off(keep)
    }
}
