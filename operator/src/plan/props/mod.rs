//! Property tests of the plan's safety rules against a model cluster.
//!
//! The model is a small, deliberately simple etcd: voters with a quorum, a
//! member list, learners, processes that run or not and data that exists or
//! not. Faults (kill, destroy, the platform losing a member, a member that
//! hangs) are interleaved with the plan's steps in random order; every step
//! the plan takes is checked against the rules, and once faults stop the
//! plan must converge to the spec whenever a majority of voters kept data.

use super::*;
use crate::crd::StoragePolicy;
use crate::member::{Backend, PodSettings, Tuning};
use crate::version::Version;

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
    tuning: Tuning,
    backend: Backend,
    pod: PodSettings,
    bootstrap: bool,
    /// TLS as configured on the platform.
    tls: TlsState,
    /// The peer URL's scheme in etcd's member list.
    listed_https: bool,
    /// Its certificates must be renewed.
    certs_due: bool,
    /// Size of its database file.
    size: i64,
    /// Its KV hash: [`TRUTH`] unless its data was corrupted.
    hash: u32,
    /// Busy defragmenting: answers nothing.
    defragging: bool,
    /// Defragmented since the NOSPACE alarm was raised.
    defragged_since_alarm: bool,
    /// How far its log goes (a committed index, and the revision too).
    pos: u64,
    /// The platform counts it as serving (a Kubernetes pod's Ready
    /// condition lags a restart).
    pod_ready: bool,
}

/// The KV hash of good data.
const TRUTH: u32 = 0;
/// The quota of the model's members.
const QUOTA: i64 = 64 << 20;
/// Bytes of live keys (never deleted in the model).
const LIVE: i64 = 1 << 20;

#[derive(Clone, Debug)]
pub(crate) struct Model {
    members: Vec<M>,
    bootstrapped: bool,
    next: u64,
    storage: StoragePolicy,
    /// A verified backup exists.
    backup: bool,
    /// Rebuilt from a backup (data written after it was lost).
    restored: bool,
    /// The voter leadership was handed to (it leads while it is up).
    preferred: Option<u64>,
    /// Bytes of history not yet compacted.
    history: i64,
    /// The member etcd raised NOSPACE about, if raised.
    nospace: Option<u64>,
    /// The store's revision.
    revision: i64,
    /// The revision last compacted to.
    compacted: i64,
    /// Rebuilt from this survivor, at this position.
    reseeded: Option<(String, u64)>,
    /// The seed of a rebuild still starts with `--force-new-cluster`.
    reseeding: Option<String>,
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
            preferred: None,
            history: 0,
            nospace: None,
            revision: 1,
            compacted: 0,
            reseeded: None,
            reseeding: None,
        }
    }

    fn up(m: &M) -> bool {
        m.on_platform && m.running && !m.hung && !m.defragging
    }

    /// Voters whose data is corrupt.
    fn corrupt_voters(&self) -> usize {
        self.voters().filter(|m| m.hash != TRUTH).count()
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
        let up: Vec<u64> = self
            .voters()
            .filter(|m| Self::up(m))
            .map(|m| m.id)
            .collect();
        match self.preferred {
            Some(p) if up.contains(&p) => Some(p),
            _ => up.into_iter().min(),
        }
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
            db: ClusterDb {
                alarms: self
                    .nospace
                    .filter(|_| quorum)
                    .map(|member| Alarm {
                        member,
                        kind: AlarmKind::NoSpace,
                    })
                    .into_iter()
                    .collect(),
                revision: self.revision,
                compacted: self.compacted,
            },
            backup_revision: None,
            reseeding: self.reseeding.clone(),
            not_serving: self
                .members
                .iter()
                .filter(|m| m.on_platform && !m.pod_ready)
                .map(|m| m.name.clone())
                .collect(),
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
                        tuning: m.tuning,
                        backend: m.backend.clone(),
                        pod: m.pod.clone(),
                        volume: None,
                        bootstrap: m.bootstrap,
                        tls: m.tls.clone(),
                        certs_due: m.certs_due,
                    }),
                    // Without quorum only a learner that answers says what
                    // it is (its status); the list cannot be read.
                    etcd: (m.in_etcd && (quorum || (m.learner && Self::up(m)))).then_some(
                        EtcdMember {
                            id: m.id,
                            started: m.started,
                            learner: m.learner,
                            leader: leader == Some(m.id),
                            peer_https: m.listed_https,
                        },
                    ),
                    healthy: quorum && m.in_etcd && Self::up(m),
                    db: if Self::up(m) {
                        DbFacts {
                            size: m.size,
                            in_use: LIVE + self.history,
                            hash: Some(KvHash {
                                revision: self.revision,
                                compact_revision: self.compacted,
                                hash: m.hash,
                            }),
                            defrag_due: false,
                            defragged_since_alarm: m.defragged_since_alarm,
                        }
                    } else {
                        DbFacts::default()
                    },
                    position: (Self::up(m) && m.has_data).then_some(Position {
                        raft_index: m.pos,
                        revision: i64::try_from(m.pos).unwrap_or(i64::MAX),
                    }),
                })
                .collect(),
        }
    }

    /// Every restarted pod became Ready (the operator waits for it).
    fn pods_ready(&mut self) {
        for m in &mut self.members {
            m.pod_ready = true;
        }
    }

    fn find_id(&self, name: &str) -> Option<u64> {
        self.members.iter().find(|m| m.name == name).map(|m| m.id)
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
        let states: Vec<&TlsState> = self
            .members
            .iter()
            .filter(|m| m.on_platform)
            .map(|m| &m.tls)
            .collect();
        let tls = if bootstrap {
            tls::for_new_member(&d.tls, &[])
        } else {
            tls::for_new_member(&d.tls, &states)
        };
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
            tuning: d.tuning,
            backend: d.backend.clone(),
            pod: d.pod.clone(),
            bootstrap,
            listed_https: tls.peer_https,
            tls,
            certs_due: false,
            size: LIVE + self.history,
            hash: TRUTH,
            defragging: false,
            defragged_since_alarm: false,
            pos: 0,
            pod_ready: true,
        }
    }

    fn apply(&mut self, d: &Desired, step: &Step) {
        // A restarted member's pod is not Ready again at once.
        if step.is_planned_restart()
            && let Some(member) = step.disrupts()
        {
            self.find(member).pod_ready = false;
        }
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
            Step::Upgrade { member, to } => {
                let m = self.find(member);
                m.version = *to;
                m.tuning = d.tuning;
                m.backend = d.backend.clone();
                m.pod = d.pod.clone();
            }
            Step::Restart { member, .. } => {
                let m = self.find(member);
                m.tuning = d.tuning;
                m.backend = d.backend.clone();
                m.pod = d.pod.clone();
            }
            Step::MoveLeader { id, .. } => self.preferred = Some(*id),
            Step::RenewCertificates { member } => self.find(member).certs_due = false,
            // The model's members have no volumes of their own.
            Step::ExpandVolume { .. } => {}
            Step::Reconfigure { member, to, .. } => {
                let m = self.find(member);
                m.listed_https = to.peer_https;
                m.tls = to.clone();
            }
            Step::UpdatePeerUrl { member, https, .. } => self.find(member).listed_https = *https,
            Step::ClearNoSpace {
                compact_to,
                defrag_order,
                disarm,
            } => {
                // The controller: compaction, then each defragmentation to
                // its end, then the disarm if every file has room.
                if let Some(revision) = compact_to {
                    self.compacted = *revision;
                    self.history = 0;
                }
                let in_use = LIVE + self.history;
                for member in defrag_order {
                    let m = self.find(member);
                    m.size = in_use;
                    m.defragged_since_alarm = true;
                }
                let largest = self.members.iter().map(|m| m.size).max().unwrap_or(0);
                if !disarm.is_empty() && room_again(largest, QUOTA) {
                    self.nospace = None;
                }
            }
            Step::Defragment { member, .. } => {
                let in_use = LIVE + self.history;
                let m = self.find(member);
                m.size = in_use;
                m.defragging = true;
                m.defragged_since_alarm = true;
            }
            Step::Disarm { .. } => self.nospace = None,
            Step::RestoreFromBackup => {
                self.members.clear();
                self.bootstrapped = false;
                self.restored = true;
                self.reseeding = None;
            }
            Step::RebuildFromSurvivor { member, .. } => {
                for m in &mut self.members {
                    let seed = &m.name == member;
                    m.in_etcd = seed;
                    if seed {
                        m.learner = false;
                        m.running = true;
                        m.hung = false;
                        self.reseeded = Some((m.name.clone(), m.pos));
                    }
                }
                self.reseeding = Some(member.clone());
            }
            Step::FinishReseed { .. } => self.reseeding = None,
            Step::Wait(_) | Step::Converged => {}
        }
        if self.storage == StoragePolicy::Ephemeral {
            for m in self.members.iter_mut().filter(|m| !m.running) {
                m.has_data = false;
            }
        }
        self.settle();
    }

    /// Whether a quorum may still come back by itself or by restarts:
    /// voters that run (answering or not: paused, cut off) or kept their
    /// data form a quorum. Nothing may be rebuilt while this holds.
    fn could_come_back(&self) -> bool {
        let voters = self.voters().count();
        let alive = self
            .voters()
            .filter(|m| m.on_platform && (m.running || m.has_data))
            .count();
        voters > 0 && alive >= quorum(voters)
    }

    /// A write committed by the voters that are up, all but `lagging`
    /// when the others still make a quorum: positions drift apart.
    fn write(&mut self, lagging: usize) {
        if !self.bootstrapped || !self.has_quorum() || self.members.is_empty() {
            return;
        }
        let lagging = &self.members[lagging % self.members.len()].name.clone();
        let voters = self.voters().count();
        let others = self
            .voters()
            .filter(|m| Self::up(m) && &m.name != lagging)
            .count();
        let skip = others >= quorum(voters);
        for m in &mut self.members {
            if m.in_etcd && !m.learner && Self::up(m) && !(skip && &m.name == lagging) {
                m.pos += 1;
            }
        }
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
}

/// The model as other modules' property tests drive it (the status
/// judgement's): a converged cluster, its steps, and a few faults.
impl Model {
    /// A cluster converged to `d`.
    pub(crate) fn converged(d: &Desired) -> Result<Model, String> {
        let mut model = Model::new(d.storage);
        match rules::converge(&mut model, d)? {
            Step::Converged => Ok(model),
            other => Err(format!("did not converge: {other}")),
        }
    }

    /// What the operator observes.
    pub(crate) fn observed(&self) -> Observed {
        self.observe()
    }

    /// Carries out `step`.
    pub(crate) fn act(&mut self, d: &Desired, step: &Step) {
        self.apply(d, step);
    }

    /// Every restarted pod is Ready again (the operator waits for it).
    pub(crate) fn all_pods_ready(&mut self) {
        self.pods_ready();
    }

    /// The name the next member added gets.
    pub(crate) fn next_name(&self) -> String {
        format!("c-{}", self.next)
    }

    /// Member names, oldest first.
    pub(crate) fn names(&self) -> Vec<String> {
        self.members.iter().map(|m| m.name.clone()).collect()
    }

    /// Member `name` answers nothing (`true`: starting, paused) or answers
    /// again.
    pub(crate) fn set_hung(&mut self, name: &str, hung: bool) {
        if let Some(m) = self.members.iter_mut().find(|m| m.name == name) {
            m.hung = hung;
        }
    }

    /// Member `name`'s process stops (its data kept).
    pub(crate) fn stop(&mut self, name: &str) {
        if let Some(m) = self.members.iter_mut().find(|m| m.name == name) {
            m.running = false;
        }
    }

    /// etcd raises NOSPACE about member `name`.
    pub(crate) fn raise_nospace(&mut self, name: &str) {
        self.nospace = self.find_id(name);
    }
}

/// A spec of `size` members of `version`, persistent.
pub(crate) fn desired_for(size: usize, version: Version) -> Desired {
    rules::desired(size, version, StoragePolicy::Persistent)
}

/// etcd 3.4.23 and 3.5.1.
pub(crate) const VERSIONS: [Version; 2] = [V34, V35];

mod db_rules;
mod faults;
mod rebuild;
mod rebuild_props;
mod rules;
mod settings;
