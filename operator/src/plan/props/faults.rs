//! The faults the model suffers, and the random events (faults, plan
//! steps, writes, spec changes) the properties interleave.

use proptest::prelude::*;

use super::*;
use crate::member::Tuning;

impl Model {
    pub(super) fn fault(&mut self, f: &Fault) {
        if self.members.is_empty() {
            return;
        }
        let i = f.victim % self.members.len();
        let before = self.clone();
        let m = &mut self.members[i];
        match f.kind {
            FaultKind::Kill => m.running = false,
            FaultKind::Destroy => {
                m.running = false;
                m.has_data = false;
            }
            FaultKind::LosePlatform => {
                m.on_platform = false;
                m.running = false;
                m.has_data = false;
            }
            FaultKind::Hang => m.hung = true,
            FaultKind::PodUnready => m.pod_ready = false,
            FaultKind::PodsReady => {
                for m in &mut self.members {
                    m.pod_ready = true;
                }
            }
            FaultKind::Unhang => {
                for m in &mut self.members {
                    m.hung = false;
                    m.defragging = false;
                }
            }
            // Distinct damage gives distinct hashes.
            FaultKind::Corrupt => m.hash = 1000 + (m.id as u32),
            FaultKind::Fragment => m.size += 8 << 20,
            FaultKind::FillUp => {
                let id = m.id;
                self.history = QUOTA - LIVE;
                self.revision += 100;
                for m in &mut self.members {
                    m.size = m.size.max(QUOTA);
                    m.defragged_since_alarm = false;
                }
                if self.bootstrapped {
                    self.nospace = Some(id);
                }
            }
        }
        if self.storage == StoragePolicy::Ephemeral {
            for m in self.members.iter_mut().filter(|m| !m.running) {
                m.has_data = false;
            }
        }
        self.members.retain(|m| m.in_etcd || m.on_platform);
        if !self.recoverable() {
            *self = before; // faults never take away the majority's data
        }
        self.settle();
    }
}

#[derive(Clone, Debug)]
pub(super) enum FaultKind {
    Kill,
    Destroy,
    LosePlatform,
    Hang,
    Unhang,
    Corrupt,
    Fragment,
    FillUp,
    /// A member's pod stops being Ready (a failing probe).
    PodUnready,
    /// Every pod is Ready again.
    PodsReady,
}

#[derive(Clone, Debug)]
pub(super) struct Fault {
    pub(super) kind: FaultKind,
    pub(super) victim: usize,
}

pub(super) fn fault() -> impl Strategy<Value = Fault> {
    let kind = prop_oneof![
        4 => Just(FaultKind::Kill),
        3 => Just(FaultKind::Destroy),
        1 => Just(FaultKind::LosePlatform),
        1 => Just(FaultKind::Hang),
        2 => Just(FaultKind::Unhang),
        1 => Just(FaultKind::Corrupt),
        1 => Just(FaultKind::Fragment),
        1 => Just(FaultKind::FillUp),
        1 => Just(FaultKind::PodUnready),
        3 => Just(FaultKind::PodsReady),
    ];
    (kind, 0usize..16).prop_map(|(kind, victim)| Fault { kind, victim })
}

/// Either a fault or a plan step, a write (one member may lag it), and
/// sometimes a new spec size or timing.
#[derive(Clone, Debug)]
pub(super) enum Event {
    Fault(Fault),
    Step,
    Write(usize),
    Resize(usize),
    Retune(Tuning),
}

fn tuning() -> impl Strategy<Value = Tuning> {
    prop_oneof![
        Just(Tuning::default()),
        Just(Tuning::new(Some(25), Some(250))),
        Just(Tuning::new(None, Some(3000))),
    ]
}

pub(super) fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        3 => fault().prop_map(Event::Fault),
        6 => Just(Event::Step),
        2 => (0usize..16).prop_map(Event::Write),
        1 => (1usize..=9).prop_map(Event::Resize),
        1 => tuning().prop_map(Event::Retune),
    ]
}
