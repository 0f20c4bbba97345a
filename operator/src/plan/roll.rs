//! Rolling a change through the members one at a time: the next member
//! to move to the spec's version and settings, and the leadership handed
//! over before a step takes the leader out of service.

use super::{Desired, Member, RestartWhy, Runtime, Step, View, Wait, member_order, quorum};

impl View<'_> {
    /// Whether a member runs another version or other settings than the
    /// spec asks for: one comparison of everything etcd takes only at start
    /// ([`crate::member::Settings::serves`]), so a new such field cannot be
    /// missed.
    pub(super) fn behind(m: &Member, d: &Desired) -> bool {
        m.platform
            .as_ref()
            .is_some_and(|p| !p.settings().serves(&d.settings()))
    }

    /// Next member to move to the spec's version and settings (a restart
    /// each): followers first, then the leader, one at a time.
    pub(super) fn roll(&self, d: &Desired) -> Step {
        let behind: Vec<(&Member, &Runtime)> = self
            .members
            .iter()
            .filter(|m| Self::behind(m, d))
            .filter_map(|m| m.platform.as_ref().map(|p| (m, p)))
            .collect();
        let Some(&(first, runtime)) = behind
            .iter()
            .find(|(m, _)| !m.etcd.is_some_and(|e| e.leader))
            .or_else(|| behind.first())
        else {
            return Step::Converged;
        };
        let upgrading = behind.iter().any(|(_, p)| p.version != d.version);
        if let Some((_, p)) = behind
            .iter()
            .find(|(_, p)| p.version != d.version && !p.version.can_upgrade_to(d.version))
        {
            return Step::Wait(Wait::UpgradePath {
                from: p.version,
                to: d.version,
            });
        }
        if self.healthy_voters < 1 + quorum(self.voters) {
            return Step::Wait(if upgrading {
                Wait::UpgradeNeedsThreeMembers
            } else {
                Wait::RestartNeedsThreeMembers
            });
        }
        if runtime.version != d.version {
            Step::Upgrade {
                member: first.name.clone(),
                to: d.version,
            }
        } else {
            Step::Restart {
                member: first.name.clone(),
                why: RestartWhy::Settings {
                    changed: runtime.settings().changed(&d.settings()),
                },
            }
        }
    }

    /// `step`, or first a [`Step::MoveLeader`] when it would restart or
    /// remove the leader and another healthy voter can lead: the one the
    /// next steps leave alone (not behind the spec's version, settings or
    /// TLS, not to be scaled down), the most caught up, the oldest on a tie. With no such voter
    /// (a cluster of one) the step is taken as it is.
    pub(super) fn hand_over_first(&self, d: &Desired, step: Step) -> Step {
        let Some(target) = step.disrupts() else {
            return step;
        };
        let Some((leader, _)) = self.members.iter().find_map(|m| {
            m.etcd
                .filter(|e| e.leader && m.healthy && m.name == target)
                .map(|e| (m, e))
        }) else {
            return step;
        };
        let doomed: Vec<&str> = if self.voters > d.size {
            self.scale_down_victims(d)
                .iter()
                .map(|m| m.name.as_str())
                .collect()
        } else {
            Vec::new()
        };
        let spared = |m: &Member| {
            !Self::behind(m, d) && !self.tls_behind(&d.tls, m) && !doomed.contains(&m.name.as_str())
        };
        let best = self
            .members
            .iter()
            .filter(|m| m.healthy && m.name != leader.name)
            .filter_map(|m| m.etcd.filter(|e| !e.learner && e.started).map(|e| (m, e)))
            .max_by(|(a, _), (b, _)| {
                (spared(a), a.raft_index())
                    .cmp(&(spared(b), b.raft_index()))
                    .then_with(|| member_order(&b.name, &a.name))
            });
        match best {
            Some((m, e)) => Step::MoveLeader {
                from: leader.name.clone(),
                to: m.name.clone(),
                id: e.id,
            },
            None => step,
        }
    }
}
