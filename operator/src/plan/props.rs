//! Property tests of the plan's safety rules against a model cluster.
//!
//! The model is a small, deliberately simple etcd: voters with a quorum, a
//! member list, learners, processes that run or not and data that exists or
//! not. Faults (kill, destroy, the platform losing a member, a member that
//! hangs) are interleaved with the plan's steps in random order; every step
//! the plan takes is checked against the rules, and once faults stop the
//! plan must converge to the spec whenever a majority of voters kept data.

use proptest::prelude::*;

use super::*;

const V34: Version = Version::new(3, 4, 23);
const V35: Version = Version::new(3, 5, 1);

#[derive(Clone, Debug)]
struct M {
    name: String,
    id: u64,
    in_etcd: bool,
    learner: bool,
    started: bool,
    on_platform: bool,
    running: bool,
    hung: bool,
    has_data: bool,
    version: Version,
    bootstrap: bool,
}

#[derive(Clone, Debug)]
struct Model {
    members: Vec<M>,
    bootstrapped: bool,
    next: u64,
    storage: StoragePolicy,
    /// A verified backup exists.
    backup: bool,
    /// Rebuilt from a backup (data written after it was lost).
    restored: bool,
}

impl Model {
    fn new(storage: StoragePolicy) -> Self {
        Model {
            members: Vec::new(),
            bootstrapped: false,
            next: 1,
            storage,
            backup: true,
            restored: false,
        }
    }

    fn up(m: &M) -> bool {
        m.on_platform && m.running && !m.hung
    }

    fn voters(&self) -> impl Iterator<Item = &M> {
        self.members.iter().filter(|m| m.in_etcd && !m.learner)
    }

    fn has_quorum(&self) -> bool {
        let voters = self.voters().count();
        voters > 0 && self.voters().filter(|m| Self::up(m)).count() >= quorum(voters)
    }

    fn leader(&self) -> Option<u64> {
        if !self.has_quorum() {
            return None;
        }
        self.voters().filter(|m| Self::up(m)).map(|m| m.id).min()
    }

    /// Forms the cluster once a majority of the initial members runs.
    fn settle(&mut self) {
        if !self.bootstrapped {
            let initial = self.members.iter().filter(|m| m.bootstrap).count();
            let running = self
                .members
                .iter()
                .filter(|m| m.bootstrap && Self::up(m))
                .count();
            if initial > 0 && running >= quorum(initial) {
                self.bootstrapped = true;
                for m in self.members.iter_mut().filter(|m| m.bootstrap) {
                    m.in_etcd = true;
                }
            }
        }
        for m in &mut self.members {
            if m.in_etcd && m.running && m.on_platform {
                m.started = true;
            }
        }
    }

    fn observe(&self) -> Observed {
        let quorum = self.bootstrapped && self.has_quorum();
        let leader = self.leader();
        Observed {
            bootstrapped: self.bootstrapped,
            membership_known: quorum,
            voters_hint: self.voters().count(),
            backup_available: self.backup,
            members: self
                .members
                .iter()
                .map(|m| Member {
                    name: m.name.clone(),
                    platform: m.on_platform.then_some(Runtime {
                        running: m.running,
                        has_data: m.has_data,
                        crash_looping: false,
                        version: m.version,
                        bootstrap: m.bootstrap,
                    }),
                    etcd: (quorum && m.in_etcd).then_some(EtcdMember {
                        id: m.id,
                        started: m.started,
                        learner: m.learner,
                        leader: leader == Some(m.id),
                    }),
                    healthy: quorum && m.in_etcd && Self::up(m),
                })
                .collect(),
        }
    }

    fn find(&mut self, name: &str) -> &mut M {
        self.members
            .iter_mut()
            .find(|m| m.name == name)
            .expect("the plan names a member it observed")
    }

    fn new_member(&mut self, d: &Desired, bootstrap: bool) -> M {
        let id = self.next;
        self.next += 1;
        M {
            name: format!("c-{id}"),
            id,
            in_etcd: false,
            learner: false,
            started: false,
            on_platform: true,
            running: true,
            hung: false,
            has_data: true,
            version: d.version,
            bootstrap,
        }
    }

    fn apply(&mut self, d: &Desired, step: &Step) {
        match step {
            Step::Bootstrap => {
                if !self.members.iter().any(|m| m.bootstrap) {
                    for _ in 0..d.size {
                        let m = self.new_member(d, true);
                        self.members.push(m);
                    }
                }
                for m in self.members.iter_mut().filter(|m| m.bootstrap) {
                    m.on_platform = true;
                    m.running = true;
                    m.has_data = true;
                }
            }
            Step::Start { member } => {
                let m = self.find(member);
                m.running = true;
                m.has_data = true;
            }
            Step::AddLearner => {
                let mut m = self.new_member(d, false);
                m.in_etcd = true;
                m.learner = true;
                self.members.push(m);
            }
            Step::Promote { member, .. } => self.find(member).learner = false,
            Step::Remove { member, .. } => self.members.retain(|m| &m.name != member),
            Step::DeleteStray { member } => {
                let m = self.find(member);
                m.on_platform = false;
                m.running = false;
                self.members.retain(|m| m.in_etcd || m.on_platform);
            }
            Step::Upgrade { member, to } => self.find(member).version = *to,
            Step::RestoreFromBackup => {
                self.members.clear();
                self.bootstrapped = false;
                self.restored = true;
            }
            Step::Wait(_) | Step::Converged => {}
        }
        if self.storage == StoragePolicy::Ephemeral {
            for m in self.members.iter_mut().filter(|m| !m.running) {
                m.has_data = false;
            }
        }
        self.settle();
    }

    /// Whether a majority of voters still has data (or is running).
    fn recoverable(&self) -> bool {
        if !self.bootstrapped {
            return true;
        }
        let voters = self.voters().count();
        let alive = self
            .voters()
            .filter(|m| m.on_platform && (m.running || m.has_data) && !m.hung)
            .count();
        voters > 0 && alive >= quorum(voters)
    }

    fn fault(&mut self, f: &Fault) {
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
            FaultKind::Unhang => {
                for m in &mut self.members {
                    m.hung = false;
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
enum FaultKind {
    Kill,
    Destroy,
    LosePlatform,
    Hang,
    Unhang,
}

#[derive(Clone, Debug)]
struct Fault {
    kind: FaultKind,
    victim: usize,
}

fn fault() -> impl Strategy<Value = Fault> {
    let kind = prop_oneof![
        4 => Just(FaultKind::Kill),
        3 => Just(FaultKind::Destroy),
        1 => Just(FaultKind::LosePlatform),
        1 => Just(FaultKind::Hang),
        2 => Just(FaultKind::Unhang),
    ];
    (kind, 0usize..16).prop_map(|(kind, victim)| Fault { kind, victim })
}

/// Either a fault or a plan step, and sometimes a new spec size.
#[derive(Clone, Debug)]
enum Event {
    Fault(Fault),
    Step,
    Resize(usize),
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        3 => fault().prop_map(Event::Fault),
        6 => Just(Event::Step),
        1 => (1usize..=9).prop_map(Event::Resize),
    ]
}

/// Checks one step against the safety rules, given the model before it.
fn check_step(model: &Model, obs: &Observed, d: &Desired, step: &Step) -> Result<(), String> {
    if d.paused && !matches!(step, Step::Wait(Wait::Paused)) {
        return Err(format!("acted while paused: {step}"));
    }
    if model.bootstrapped && *step == Step::Bootstrap {
        return Err("bootstrapped over a cluster that exists".into());
    }
    if model.bootstrapped && !obs.membership_known {
        let restore = *step == Step::RestoreFromBackup
            && d.restore_from_backup
            && model.backup
            && !model.recoverable();
        if !(restore || matches!(step, Step::Start { .. } | Step::Wait(_))) {
            return Err(format!(
                "without quorum it may only restart members (or, with the flag on and quorum \
                 gone for good, restore): {step}"
            ));
        }
    }
    if *step == Step::RestoreFromBackup && (model.recoverable() || !d.restore_from_backup) {
        return Err("restored from a backup although quorum could come back".into());
    }
    let all_healthy = obs.members.iter().all(|m| m.healthy);
    let target_healthy = |name: &str| obs.members.iter().any(|m| m.name == name && m.healthy);
    match step {
        Step::AddLearner | Step::Promote { .. } if !all_healthy => {
            return Err(format!(
                "membership change while a member is unhealthy: {step}"
            ));
        }
        Step::Remove { member, .. } if target_healthy(member) && !all_healthy => {
            return Err(format!(
                "removed healthy {member} while another member is unhealthy"
            ));
        }
        _ => {}
    }
    // One membership change at a time: a new one (add, scale down) only when
    // no earlier one is in flight (a learner not yet promoted, a member
    // added but not started), and only one learner ever.
    let learners: Vec<&str> = obs
        .members
        .iter()
        .filter(|m| m.etcd.is_some_and(|e| e.learner))
        .map(|m| m.name.as_str())
        .collect();
    let unstarted: Vec<&str> = obs
        .members
        .iter()
        .filter(|m| m.etcd.is_some_and(|e| !e.started))
        .map(|m| m.name.as_str())
        .collect();
    let in_flight_besides = |member: &str| learners.iter().chain(&unstarted).any(|l| *l != member);
    match step {
        Step::AddLearner if !learners.is_empty() || !unstarted.is_empty() => {
            return Err(format!(
                "added a member while another change is in flight (learners {learners:?}, \
                 unstarted {unstarted:?})"
            ));
        }
        Step::Promote { member, .. } if learners.iter().any(|l| l != member) => {
            return Err(format!(
                "promoted {member} beside other learners {learners:?}"
            ));
        }
        // Taking back the change in flight itself is fine, and so is removing
        // a member that is down (it only makes quorum easier to keep).
        Step::Remove {
            member,
            why: RemoveWhy::ScaleDown,
            ..
        } if target_healthy(member) && in_flight_besides(member) => {
            return Err(format!(
                "scaled down while another change is in flight: {step}"
            ));
        }
        _ => {}
    }
    // Quorum by the plan's own hand: apply only the step's immediate effect
    // (a restarted member is down until it comes back).
    if model.bootstrapped && model.has_quorum() {
        let mut after = model.clone();
        match step {
            Step::Remove { member, .. } => after.members.retain(|m| &m.name != member),
            Step::Upgrade { member, .. } => after.find(member).running = false,
            Step::Promote { member, .. } => after.find(member).learner = false,
            _ => {}
        }
        if !after.has_quorum() {
            return Err(format!("step loses quorum: {step}"));
        }
    }
    Ok(())
}

fn desired(size: usize, version: Version, storage: StoragePolicy) -> Desired {
    Desired {
        size,
        version,
        storage,
        paused: false,
        restore_from_backup: false,
    }
}

/// Runs the plan without faults until it stops acting; returns the last step.
fn converge(model: &mut Model, d: &Desired) -> Result<Step, String> {
    for _ in 0..200 {
        let obs = model.observe();
        let step = plan(d, &obs);
        check_step(model, &obs, d, &step)?;
        if matches!(step, Step::Wait(_) | Step::Converged) {
            return Ok(step);
        }
        model.apply(d, &step);
    }
    Err("no convergence within 200 steps".into())
}

fn storage() -> impl Strategy<Value = StoragePolicy> {
    prop_oneof![
        3 => Just(StoragePolicy::Persistent),
        1 => Just(StoragePolicy::Ephemeral),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Every step taken under random faults keeps the rules, and once the
    /// faults stop (and hung members resume) the cluster converges to the
    /// last size asked for, healthy and on the spec's version.
    #[test]
    fn safe_under_faults_and_converges(
        size in 1usize..=9,
        storage in storage(),
        upgrade in any::<bool>(),
        events in prop::collection::vec(event(), 0..80),
    ) {
        let mut d = desired(size, V34, storage);
        let mut model = Model::new(storage);
        let first = converge(&mut model, &d).map_err(TestCaseError::fail)?;
        prop_assert_eq!(first, Step::Converged);
        if upgrade {
            d.version = V35;
        }
        for e in &events {
            match e {
                Event::Fault(f) => model.fault(f),
                Event::Resize(n) => d.size = *n,
                Event::Step => {
                    let obs = model.observe();
                    let step = plan(&d, &obs);
                    check_step(&model, &obs, &d, &step).map_err(TestCaseError::fail)?;
                    model.apply(&d, &step);
                }
            }
        }
        model.fault(&Fault { kind: FaultKind::Unhang, victim: 0 });
        let last = converge(&mut model, &d).map_err(TestCaseError::fail)?;
        let voters = model.voters().count();
        if last == Step::Wait(Wait::UpgradeNeedsThreeMembers) {
            prop_assert!(voters < 3, "upgrade refused with {} voters", voters);
            return Ok(());
        }
        prop_assert_eq!(&last, &Step::Converged, "model: {:?}", model);
        prop_assert_eq!(voters, d.size);
        prop_assert_eq!(model.members.len(), d.size, "no learners or strays left");
        prop_assert!(model.members.iter().all(|m| Model::up(m) && m.version == d.version));
    }

    /// When a majority of voters lost their data the plan never invents a
    /// new cluster and never removes voters: it restarts what it can, then
    /// waits.
    #[test]
    fn never_overwrites_a_cluster_that_lost_quorum(
        (size, destroyed, killed) in (3usize..=9).prop_flat_map(|size| (
            Just(size),
            prop::sample::subsequence((0..size).collect::<Vec<_>>(), (size - quorum(size) + 1)..=size),
            prop::collection::vec(any::<bool>(), size),
        )),
    ) {
        let d = desired(size, V34, StoragePolicy::Persistent);
        let mut model = Model::new(StoragePolicy::Persistent);
        converge(&mut model, &d).map_err(TestCaseError::fail)?;
        for (i, m) in model.members.iter_mut().enumerate() {
            if destroyed.contains(&i) {
                m.running = false;
                m.has_data = false;
            } else if killed[i] {
                m.running = false;
            }
        }
        let mut flagged = model.clone();
        let last = converge(&mut model, &d).map_err(TestCaseError::fail)?;
        prop_assert!(
            matches!(last, Step::Wait(Wait::QuorumLost { .. })),
            "expected to wait on quorum loss, got {}", last
        );
        prop_assert_eq!(model.voters().count(), size);
        // With restoreFromBackup on, the same state is rebuilt from the
        // backup and converges.
        let d = Desired { restore_from_backup: true, ..d };
        let last = converge(&mut flagged, &d).map_err(TestCaseError::fail)?;
        prop_assert_eq!(last, Step::Converged);
        prop_assert!(flagged.restored);
        prop_assert_eq!(flagged.voters().count(), size);
    }

    /// Paused means no action at all, whatever the state.
    #[test]
    fn paused_never_acts(size in 1usize..=9, events in prop::collection::vec(fault(), 0..10)) {
        let mut d = desired(size, V34, StoragePolicy::Persistent);
        let mut model = Model::new(StoragePolicy::Persistent);
        converge(&mut model, &d).map_err(TestCaseError::fail)?;
        for f in &events {
            model.fault(f);
        }
        d.paused = true;
        prop_assert_eq!(plan(&d, &model.observe()), Step::Wait(Wait::Paused));
    }
}
