//! Growing members' volumes to `spec.storage.size`, one member at a time
//! and in place (no restart, unless the storage driver grows filesystems
//! only offline), and refusing a size below a member's volume: claims
//! never shrink. Moving members to another storage class (a claim's class
//! cannot change): one at a time, a member on the new class added and
//! promoted first, then the old one removed.

use super::{Desired, Member, RemoveWhy, RestartWhy, Step, View, Wait, member_order, quorum};
use crate::member::Volume;
use crate::member::volume::size_text;

impl View<'_> {
    /// Members with a volume of their own, in member order.
    fn volumes(&self) -> Vec<(&Member, &Volume)> {
        let mut v: Vec<(&Member, &Volume)> = self
            .members
            .iter()
            .filter_map(|m| Some((m, m.platform.as_ref()?.volume.as_ref()?)))
            .collect();
        v.sort_by(|(a, _), (b, _)| member_order(&a.name, &b.name));
        v
    }

    /// A member whose volume is larger than the spec's size: refused.
    pub(super) fn volume_shrunk(&self, d: &Desired) -> Option<Step> {
        let want = d.volume.as_ref()?;
        let (m, v) = self
            .volumes()
            .into_iter()
            .find(|(_, v)| v.requested > want.bytes)?;
        Some(Step::Wait(Wait::VolumeShrink {
            member: m.name.clone(),
            has: size_text(v.requested),
            wanted: want.text.clone(),
        }))
    }

    /// The next step of growing volumes, if one can be taken now: restart
    /// a member whose filesystem waits for it (a planned restart, when a
    /// voter can be spared), else grow the next bound volume smaller than
    /// the spec's size whose class may allow it, once none is growing.
    pub(super) fn grow(&self, d: &Desired) -> Option<Step> {
        let want = d.volume.as_ref()?;
        let volumes = self.volumes();
        if let Some((m, _)) = volumes.iter().find(|(_, v)| v.waits_for_restart) {
            let spare = self.healthy_voters > quorum(self.voters);
            return spare.then(|| Step::Restart {
                member: m.name.clone(),
                why: RestartWhy::GrowFilesystem,
            });
        }
        if volumes.iter().any(|(_, v)| v.growing()) {
            return None;
        }
        let (m, _) = volumes.iter().find(|(_, v)| {
            v.requested < want.bytes && v.capacity.is_some() && v.expandable != Some(false)
        })?;
        Some(Step::ExpandVolume {
            member: m.name.clone(),
            to: want.text.clone(),
        })
    }

    /// What status says of volumes once nothing else is to be done: a
    /// size below a volume (refused), a volume still growing (progress),
    /// volumes whose class cannot grow (a problem).
    pub(super) fn volume_wait(&self, d: &Desired) -> Option<Step> {
        let want = d.volume.as_ref()?;
        if let Some(step) = self.volume_shrunk(d) {
            return Some(step);
        }
        let volumes = self.volumes();
        if let Some((m, _)) = volumes.iter().find(|(_, v)| v.growing()) {
            return Some(Step::Wait(Wait::VolumeGrowing {
                member: m.name.clone(),
                to: want.text.clone(),
            }));
        }
        let stuck: Vec<&(&Member, &Volume)> = volumes
            .iter()
            .filter(|(_, v)| v.requested < want.bytes && v.expandable == Some(false))
            .collect();
        let (_, first) = stuck.first()?;
        Some(Step::Wait(Wait::VolumeNotExpandable {
            members: stuck.iter().map(|(m, _)| m.name.clone()).collect(),
            class: first.class.clone().unwrap_or_default(),
            wanted: want.text.clone(),
        }))
    }

    /// Voters whose volume is of another class than the spec names, in
    /// member order, the leader last. A claim that names no class (made
    /// before a default class existed) is left alone: which class it has
    /// cannot be told.
    fn class_behind(&self, d: &Desired) -> Vec<&Member> {
        let Some(want) = d.storage_class.as_deref() else {
            return Vec::new();
        };
        let mut behind: Vec<&Member> = self
            .volumes()
            .into_iter()
            .filter(|(m, v)| {
                m.etcd.is_some_and(|e| !e.learner) && v.class.as_deref().is_some_and(|c| c != want)
            })
            .map(|(m, _)| m)
            .collect();
        behind.sort_by_key(|m| m.etcd.is_some_and(|e| e.leader));
        behind
    }

    /// Members are to move to the spec's storage class and the cluster has
    /// its size: a new member (on the new class) comes first.
    pub(super) fn moving_class(&self, d: &Desired) -> bool {
        self.voters == d.size && !self.class_behind(d).is_empty()
    }

    /// One voter more than the size while members move to the spec's
    /// storage class: the first of those members is removed (a follower
    /// first: the leader hands over before it goes).
    pub(super) fn class_victim(&self, d: &Desired) -> Option<Step> {
        if self.voters != d.size + 1 {
            return None;
        }
        let m = *self.class_behind(d).first()?;
        self.remove(m, RemoveWhy::StorageClass)
    }
}
