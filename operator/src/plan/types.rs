//! The plan's inputs: what the spec asks for and what was observed (its
//! output, the step chosen, is in `step.rs`).

pub use super::maintenance::{Alarm, AlarmKind, ClusterDb, DbFacts, DbPolicy, DefragWhy, KvHash};
use crate::crd::StoragePolicy;
use crate::member::Tuning;
use crate::member::{Backend, MemberTls, PodSettings, Settings, Volume};
use crate::validate::ValidSpec;
use crate::version::Version;

/// What the spec asks for, as far as the plan cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    /// Voting members wanted.
    pub size: usize,
    /// Version every member should run.
    pub version: Version,
    /// Whether a stopped member's data may be used again.
    pub storage: StoragePolicy,
    /// Observe only.
    pub paused: bool,
    /// Rebuild from the newest backup when quorum cannot come back.
    pub restore_from_backup: bool,
    /// Raft timing every member should run with.
    pub tuning: Tuning,
    /// The backend quota and auto-compaction members run with.
    pub backend: Backend,
    /// The image repository and pod settings members run with.
    pub pod: PodSettings,
    /// The size members' volumes should have (`spec.storage.size`; `None`:
    /// whatever they were made with).
    pub volume: Option<crate::validate::VolumeSize>,
    /// The storage class members' volumes should be of
    /// (`spec.storage.storageClassName`; `None`: whatever they were made
    /// with).
    pub storage_class: Option<String>,
    /// Hand the leadership over before a planned restart or removal of
    /// the leader (on unless the operator runs with
    /// `--no-leader-handover`, a switch for benchmarks).
    pub handover: bool,
    /// Rebuild from the most advanced surviving member when quorum cannot
    /// come back (`spec.recovery.fromSurvivor`).
    pub from_survivor: bool,
    /// TLS wanted.
    pub tls: TlsWanted,
    /// Quota and defragmentation policy.
    pub db: DbPolicy,
}

/// TLS as the spec wants it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsWanted {
    /// Peer TLS on.
    pub peer: bool,
    /// Client TLS on.
    pub client: bool,
    /// Fingerprint of the CAs members must trust ([`crate::tls::trust_id`];
    /// empty without TLS), filled in by the controller.
    pub trust: String,
}

impl Desired {
    /// What members must run with, of what etcd takes only at start.
    pub fn settings(&self) -> Settings {
        Settings {
            version: self.version,
            tuning: self.tuning,
            backend: self.backend.clone(),
            pod: self.pod.clone(),
        }
    }
}

impl Runtime {
    /// What the member runs with, of what etcd takes only at start.
    pub fn settings(&self) -> Settings {
        Settings {
            version: self.version,
            tuning: self.tuning,
            backend: self.backend.clone(),
            pod: self.pod.clone(),
        }
    }
}

impl From<&ValidSpec> for Desired {
    fn from(s: &ValidSpec) -> Self {
        Desired {
            size: s.size,
            version: s.version,
            storage: s.storage,
            paused: s.paused,
            restore_from_backup: s.restore_from_backup,
            tls: TlsWanted {
                peer: s.tls.peer.is_some(),
                client: s.tls.client.is_some(),
                trust: String::new(),
            },
            tuning: s.tuning,
            backend: s.backend.clone(),
            pod: s.pod.clone(),
            volume: s.volumes.size.clone(),
            storage_class: s.volumes.class.clone(),
            handover: true,
            db: DbPolicy {
                quota: s.backend.quota(),
                fragmentation: s.defrag.as_ref().and_then(|d| d.fragmentation),
            },
            from_survivor: s.from_survivor,
        }
    }
}

/// What the operator saw of a cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// The cluster has formed before (its member list was read once).
    pub bootstrapped: bool,
    /// The member list was read from a member that has a leader. False when
    /// no member answered: quorum is lost, or the cluster is still forming.
    pub membership_known: bool,
    /// Every member known to the platform or to etcd.
    pub members: Vec<Member>,
    /// Voting members at the last member list read (0 if never read).
    pub voters_hint: usize,
    /// A verified backup exists to rebuild from.
    pub backup_available: bool,
    /// Alarms, the revision and the last compaction.
    pub db: ClusterDb,
    /// The revision the newest verified backup brings a rebuilt cluster
    /// to, when known: a survivor behind
    /// it is passed over for it.
    pub backup_revision: Option<i64>,
    /// A rebuild from this member is under way: it was started with
    /// `--force-new-cluster`, which must be cleared before anyone joins it.
    pub reseeding: Option<String>,
    /// Members the platform does not count as serving (Kubernetes: a pod
    /// that is not Ready), whatever etcd says: no planned restart or
    /// scale-down of another member while one is, so the operator never
    /// breaks the cluster's PodDisruptionBudget (or a drain's) by its own
    /// hand.
    pub not_serving: Vec<String>,
}

/// One member, joined from the platform's record and etcd's member list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Member name.
    pub name: String,
    /// What the platform runs for it, if anything.
    pub platform: Option<Runtime>,
    /// Its entry in etcd's member list, if any.
    pub etcd: Option<EtcdMember>,
    /// Answers with a leader (and is in the member list when that is known).
    pub healthy: bool,
    /// Its database: size, free space, KV hash, defragmentation due.
    pub db: DbFacts,
    /// How far its log goes, when it answered a status call (or, not
    /// serving, its metrics port): to choose the survivor that seeds a
    /// rebuild, and whom to hand the leadership to.
    pub position: Option<Position>,
}

impl Member {
    /// The raft index it reported (0 when unknown): how caught up it is.
    pub fn raft_index(&self) -> u64 {
        self.position.map_or(0, |p| p.raft_index)
    }
}

/// How far a member's log goes, as its status says: the raft index it
/// knows committed (what `--force-new-cluster` keeps), then its store
/// revision. Ordered: the greater is the more advanced member.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// Raft index (committed, as the member knows it).
    pub raft_index: u64,
    /// Store revision.
    pub revision: i64,
}

/// A member as the platform runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Runtime {
    /// Its process (or pod) is running.
    pub running: bool,
    /// Its data directory (or volume) holds etcd data.
    pub has_data: bool,
    /// It keeps dying soon after being started: its data is not trusted.
    pub crash_looping: bool,
    /// The version it runs (or will run when started).
    pub version: Version,
    /// The raft timing it runs (or will run) with.
    pub tuning: Tuning,
    /// The backend quota and auto-compaction it runs (or will run) with.
    pub backend: Backend,
    /// The image repository and pod settings it runs (or will run) with.
    pub pod: PodSettings,
    /// Its data volume, where it has one of its own (a claim).
    pub volume: Option<Volume>,
    /// One of the members the cluster was bootstrapped with.
    pub bootstrap: bool,
    /// Its TLS files and listeners, and its URLs' schemes.
    pub tls: TlsState,
    /// Its certificates must be (re)issued: two thirds of their validity
    /// passed, they are missing, or another CA must sign them.
    pub certs_due: bool,
}

/// A member's TLS as configured: files, listeners, URL schemes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsState {
    /// Files and listeners.
    pub files: MemberTls,
    /// Its peer URL is `https://`.
    pub peer_https: bool,
    /// Its client URL is `https://`.
    pub client_https: bool,
}

/// A member as etcd lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EtcdMember {
    /// etcd member id.
    pub id: u64,
    /// Has run at least once (etcd lists unstarted members without a name).
    pub started: bool,
    /// Non-voting learner.
    pub learner: bool,
    /// The current leader.
    pub leader: bool,
    /// Its listed peer URL is `https://`.
    pub peer_https: bool,
}
