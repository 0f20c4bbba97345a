//! Where members run. The controller, the chaos monkey and the soak runner
//! only talk to a [`Platform`]; `local` runs members as processes on
//! loopback addresses, and a Kubernetes platform runs them as pods (a pod
//! and its volume are one member, as a process and its data folder are here).
//!
//! A platform keeps, per member, the [`MemberConfig`] it was created with
//! (name, URLs, version, initial cluster), so a member can be started again
//! in place at any time, and reports whether it runs and whether its data
//! survived. It also stores the cluster's record and status (a folder
//! locally, the resource's status on Kubernetes), and provides the
//! [`BackupStore`] the cluster's backups go through.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::backup::{BackupStore, RestoreSource};
use crate::crd::EtcdCluster;
pub use crate::member::{InitialState, MemberAddr, MemberConfig, Settings, Tuning};
use crate::platform::tls_store::TlsStore;
use crate::version::Version;

pub mod kube;
pub mod local;
pub mod tls_store;

/// Result of platform calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong on the platform.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A record on disk could not be read.
    #[error("{path}: unreadable record: {message}")]
    Record {
        /// The file.
        path: PathBuf,
        /// The cause.
        message: String,
    },
    /// No such member.
    #[error("cluster {cluster} has no member {member}")]
    NoMember {
        /// Cluster name.
        cluster: String,
        /// Member name.
        member: String,
    },
    /// The version cannot be run here.
    #[error("{0}")]
    Version(String),
    /// A member's data could not be restored from a snapshot.
    #[error("{0}")]
    Restore(#[source] crate::backup::Error),
    /// The Kubernetes platform failed; its own category and source are
    /// kept (an API error, a busy object, an unreadable annotation...).
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

impl Error {
    /// A short label for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Io { .. } => "io",
            Error::Record { .. } => "record",
            Error::NoMember { .. } => "no_member",
            Error::Version(_) => "version",
            Error::Restore(_) => "restore",
            Error::Kube(e) => e.category(),
        }
    }
}

impl Error {
    /// A write failed because the disk under it is full (ENOSPC), or its
    /// quota is reached.
    pub fn is_storage_full(&self) -> bool {
        let io = match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        };
        io.is_some_and(|e| {
            matches!(
                e.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            )
        })
    }
}

/// Wraps an io error with what was being done.
pub(crate) fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// A member as the platform sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlatformMember {
    /// Name and URLs.
    pub addr: MemberAddr,
    /// Its process (pod) runs.
    pub running: bool,
    /// Its data folder (volume) holds etcd data.
    pub has_data: bool,
    /// The version it runs or will run.
    pub version: Version,
    /// The raft timing it runs or will run with.
    pub tuning: Tuning,
    /// The backend quota and auto-compaction it runs (or will run) with.
    pub backend: crate::member::Backend,
    /// The image repository and pod settings it runs (or will run) with.
    pub pod: crate::member::PodSettings,
    /// Its data volume, where it has one of its own (Kubernetes: its
    /// claim); `None` locally and for emptyDir members.
    pub volume: Option<crate::member::Volume>,
    /// One of the bootstrap members.
    pub bootstrap: bool,
    /// When it was last started.
    pub started_at: Option<SystemTime>,
    /// Where the operator itself reaches the member's client port (status,
    /// member list, membership changes): the client URL locally; on
    /// Kubernetes `http://POD_IP:2379`, so a re-created pod is reached at
    /// once, not through DNS answers cached for its predecessor. `None`
    /// while it cannot be reached (a pod without an IP yet). The published
    /// status keeps `addr.client_url`.
    pub call_url: Option<String>,
    /// Where the operator reads the member's position from its metrics
    /// ([`crate::member::metrics`]) when it does not answer on its client
    /// port (restarted without quorum): locally `http://IP:2381/metrics`;
    /// `None` on Kubernetes (not offered there yet).
    pub metrics_url: Option<String>,
    /// The platform restarts the member by itself (the kubelet does, on
    /// Kubernetes) and it keeps failing right after start: reported as not
    /// running, and its data is not trusted, as the controller's own
    /// crash-loop rule decides for members it restarts itself. Always
    /// false locally, where the controller restarts members and counts
    /// their exits.
    pub crash_looping: bool,
    /// What keeps it from running or getting ready, as the platform sees
    /// it (on Kubernetes: a pod that cannot be scheduled, an image that
    /// cannot be pulled, a container in CrashLoopBackOff and its last
    /// termination message). `None` locally, where a member failing at
    /// start has its log read instead ([`Platform::failure_hint`]).
    pub problem: Option<String>,
    /// Why it is not ready though nothing is wrong: it is on its way to
    /// the settings the operator moved it to (on Kubernetes the kubelet
    /// still swapping a container changed in place; etcd still answering
    /// as the version it ran). Status says it as progress, not trouble.
    pub moving: Option<String>,
    /// Its TLS files and listeners (its URLs say `https://` or not).
    /// Whether the platform itself counts the member as serving, where
    /// it has a view of its own (Kubernetes: the pod's Ready condition,
    /// which the client Service and PodDisruptionBudgets go by); `None`
    /// locally.
    pub pod_ready: Option<bool>,
    pub tls: crate::member::MemberTls,
}

/// `http://HOST:PORT` for an IP address or a host name; IPv6 addresses in
/// brackets.
pub fn http_url(host: &str, port: u16) -> String {
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(ip)) => format!("http://[{ip}]:{port}"),
        Ok(ip) => format!("http://{ip}:{port}"),
        Err(_) => format!("http://{host}:{port}"),
    }
}

/// What the operator keeps about a cluster between reconciles and restarts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRecord {
    /// `--initial-cluster-token`, unique per cluster creation.
    pub token: String,
    /// The cluster formed once (its member list was read).
    pub bootstrapped: bool,
    /// Index for the next member name (`NAME-INDEX`); never reused.
    pub next_index: u32,
    /// The name taken for the member being added, kept until it is created
    /// so that an add etcd refused (for 5 s after a member reconnects) is
    /// retried under the same name and URLs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adding: Option<String>,
    /// The members the cluster was bootstrapped with.
    #[serde(default)]
    pub initial: Vec<MemberAddr>,
    /// Generation of the spec, bumped on every change.
    pub generation: i64,
    /// The spec last seen, as JSON, to notice changes.
    #[serde(default)]
    pub spec_json: String,
    /// Where the spec came from (a manifest file locally).
    #[serde(default)]
    pub source: Option<PathBuf>,
    /// Voting members at the last member list read (to judge a quorum loss).
    #[serde(default)]
    pub last_voters: usize,
    /// The highest etcd revision seen.
    #[serde(default)]
    pub last_revision: i64,
    /// When it was first seen (ms since the Unix epoch; 0: unknown).
    #[serde(default)]
    pub last_revision_ms: u64,
    /// The snapshot the (next) bootstrap restores every member from.
    #[serde(default)]
    pub restore_from: Option<RestoreSource>,
    /// The `spec.restore.backup` the cluster was created from.
    #[serde(default)]
    pub created_from: Option<String>,
    /// The last rebuild after a quorum loss.
    #[serde(default)]
    pub last_recovery: Option<crate::crd::RecoveryStatus>,
    /// What the cluster was created from (`spec.restore`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored: Option<crate::crd::RestoreStatus>,
    /// A standby (`spec.standby`): whose, from what it was created and,
    /// once promoted, the last revision it applied (kept for status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby: Option<crate::crd::StandbyStatus>,
    /// The member a rebuild from a survivor started with
    /// `--force-new-cluster`, until it serves and the flag is cleared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reseeding: Option<String>,
    /// The cluster's identity where its resource has no uid (locally):
    /// made when the cluster is first created and kept with its record
    /// (a rebuild keeps it; a cluster re-created under the same name
    /// after its data was removed gets a new one). Backups carry it
    /// ([`crate::backup::owner`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// A new cluster uid (32 hex digits) for [`ClusterRecord::uid`].
pub fn new_cluster_uid() -> String {
    use rand::Rng as _;
    format!("{:032x}", rand::rng().random::<u128>())
}

/// Whether a [`Notice`] tells of the operator's work or of a failure (an
/// Event's type on Kubernetes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NoticeType {
    /// A step begun or ended, a backup taken: the story of the cluster.
    Normal,
    /// Something failed or was lost: a user may have to act.
    Warning,
}

impl NoticeType {
    /// `Normal` or `Warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeType::Normal => "Normal",
            NoticeType::Warning => "Warning",
        }
    }
}

/// Something users should hear of about a cluster beyond its status: a
/// step the operator began or ended, a backup milestone, a failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// Normal (the operator's work) or Warning (a failure).
    pub type_: NoticeType,
    /// A CamelCase word for what happened (an Event's reason on
    /// Kubernetes).
    pub reason: &'static str,
    /// What happened, in words a user can act on.
    pub message: String,
}

impl Notice {
    /// A Normal notice.
    pub fn normal(reason: &'static str, message: impl Into<String>) -> Self {
        Notice {
            type_: NoticeType::Normal,
            reason,
            message: message.into(),
        }
    }

    /// A Warning notice.
    pub fn warning(reason: &'static str, message: impl Into<String>) -> Self {
        Notice {
            type_: NoticeType::Warning,
            reason,
            message: message.into(),
        }
    }
}

/// Something that happened to a member without the operator asking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A member's process exited.
    Exited {
        /// Cluster name.
        cluster: String,
        /// Member name.
        member: String,
        /// It failed by itself (non-zero exit, or a crash signal), as far as
        /// can be known; a kill from outside is no crash.
        crashed: bool,
    },
}

/// Where members run. Every call names the cluster it is for, and is
/// idempotent: a call repeated after a crash, or for a member already in
/// the asked-for state, does no harm. Where TLS material is kept is its
/// [`TlsStore`] side.
pub trait Platform: TlsStore + Send + Sync + 'static {
    /// Where this platform keeps backups.
    type Backups: BackupStore;
    /// The backup store: every backup, check and restore of the controller
    /// goes through it.
    fn backups(&self) -> Arc<Self::Backups>;
    /// The store a standby's applier reads its source's backups through
    /// (`location`: the source's, an object store or a folder), several
    /// times a second, so in the operator's own process and never through
    /// a Job: the local platform's store. On Kubernetes it reads the
    /// bucket with the credentials Secret the location names
    /// (`credentialsSecret`, else the operator's own environment) and
    /// stages what it reads in the operator's scratch folder. Platforms
    /// that cannot read a source's backups say so.
    fn standby_reads(
        &self,
        cluster: &str,
        location: &crate::backup::Location,
    ) -> impl Future<Output = Result<Arc<local::backups::LocalBackups>>> + Send {
        let what = format!("cluster {cluster} cannot follow {}", location.owner());
        async move {
            Err(Error::Io {
                what,
                source: std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "this platform reads no source's backups",
                ),
            })
        }
    }
    /// Takes the cluster's resource, before each reconcile pass and before
    /// any other call about the cluster. `voters` is how many voting
    /// members it had at the last member list read (0: unknown). `active`:
    /// its spec is valid and not paused, so members may be created: what
    /// they share is readied. On Kubernetes the resource's uid owns every
    /// object created from then on, its spec says the storage, and the
    /// Services and the disruption budget are applied (the budget protects
    /// the larger of `voters` and `spec.size`); locally there is nothing
    /// to do.
    fn prepare(
        &self,
        cluster: &str,
        resource: &EtcdCluster,
        voters: usize,
        active: bool,
    ) -> impl Future<Output = Result<()>> + Send;
    /// The controller stops managing the cluster without deleting anything
    /// (its resource is gone, and on Kubernetes what it owned goes with
    /// it): the platform drops what it keeps in memory about it.
    fn forget(&self, cluster: &str);
    /// Every member of `cluster` the platform has.
    fn members(&self, cluster: &str) -> impl Future<Output = Result<Vec<PlatformMember>>> + Send;
    /// Picks URLs for new members with these names (nothing is created).
    fn allocate(
        &self,
        cluster: &str,
        names: &[String],
    ) -> impl Future<Output = Result<Vec<MemberAddr>>> + Send;
    /// Creates a member and starts it; with `restore_from` (a snapshot
    /// its backup store set aside), its data is first restored from it.
    fn create(
        &self,
        cluster: &str,
        config: &MemberConfig,
        restore_from: Option<&RestoreSource>,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Starts a stopped member in place (with its data, if any).
    fn start(&self, cluster: &str, member: &str) -> impl Future<Output = Result<()>> + Send;
    /// Stops a member gracefully, keeps its data, records `settings` in
    /// its config (version, timing) and starts it again: a rolling
    /// upgrade's or a new spec.tuning's restart. Locally the new config
    /// is recorded before the member stops, so a restart cut short is
    /// finished by the next start; on Kubernetes a member's claim records
    /// it only once the member is ready on it, so an image that never runs
    /// is undone by fixing the spec (the plan moves the member again while
    /// the spec asks). The controller hands a leader's leadership over
    /// before it asks.
    fn restart(
        &self,
        cluster: &str,
        member: &str,
        settings: &Settings,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Stops a member gracefully, keeps its data, and starts it again with
    /// these URLs (the same host and ports, another scheme) and TLS
    /// settings, recorded in its config first. A member whose data cannot
    /// outlive its process (an emptyDir pod) is stopped and left to be
    /// replaced.
    fn reconfigure(
        &self,
        cluster: &str,
        member: &str,
        addr: &MemberAddr,
        tls: &crate::member::MemberTls,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Grows a member's data volume to `size` (as `spec.storage.size`
    /// writes it) in place, without a restart: on Kubernetes its claim's
    /// request. Platforms whose members have no volume of their own (the
    /// local one: a folder) report none, so the plan never asks them.
    fn expand_volume(
        &self,
        cluster: &str,
        member: &str,
        size: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (cluster, member, size);
        async { Ok(()) }
    }
    /// Stops a member (at once) and deletes it with its data.
    fn delete(&self, cluster: &str, member: &str) -> impl Future<Output = Result<()>> + Send;
    /// Stops a member gracefully, keeping its data, and starts it again
    /// with `--force-new-cluster` ([`MemberConfig::force_new_cluster`],
    /// recorded so a start cut short is finished the same way): it becomes
    /// a cluster of one with its data and member id, the seed of a rebuild
    /// after a quorum loss. Needs the member's data to outlive its process
    /// (a volume claim on Kubernetes).
    fn force_new_cluster(
        &self,
        cluster: &str,
        member: &str,
    ) -> impl Future<Output = Result<()>> + Send;
    /// The seed serves: its recorded configuration drops
    /// `--force-new-cluster`, so that no later start of it drops the
    /// members added next. Only the record changes and etcd goes on: the
    /// local process, or on Kubernetes the seed's pod, which runs once
    /// (the kubelet never restarts it with the flag; a seed pod of an
    /// older operator, restarted always, is re-created without it).
    fn end_force_new_cluster(
        &self,
        cluster: &str,
        member: &str,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Stops every member of a cluster (at once) and moves their data aside
    /// (never deleted: it may hold writes a restore loses). Returns where it
    /// went.
    fn retire_members(
        &self,
        cluster: &str,
        tag: &str,
    ) -> impl Future<Output = Result<String>> + Send;
    /// Deletes every member of a cluster and everything kept about it.
    fn delete_cluster(&self, cluster: &str) -> impl Future<Output = Result<()>> + Send;
    /// The cluster's record, if it exists.
    fn load_record(
        &self,
        cluster: &str,
    ) -> impl Future<Output = Result<Option<ClusterRecord>>> + Send;
    /// Saves the cluster's record.
    fn save_record(
        &self,
        cluster: &str,
        record: &ClusterRecord,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Publishes the cluster's status (the whole resource, status set).
    fn save_status(
        &self,
        cluster: &str,
        resource: &EtcdCluster,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Tells users of something that happened to `cluster`, in the words
    /// the controller chose, the same on every platform: an Event of the
    /// notice's type on Kubernetes (`kubectl describe`), an entry in the
    /// cluster's event log locally (`etcd-operator status NAME`). An
    /// identical repeat counts as a repeat; distinct notices stay distinct.
    /// Never fails the caller: a notice that cannot be kept is logged.
    fn announce(&self, cluster: &str, notice: &Notice) -> impl Future<Output = ()> + Send {
        let _ = (cluster, notice);
        async {}
    }
    /// Why a member last failed, from the end of its log, for the status of
    /// a member that keeps failing at start (`None` where no log is kept).
    fn failure_hint(
        &self,
        cluster: &str,
        member: &str,
    ) -> impl Future<Output = Option<String>> + Send {
        let _ = (cluster, member);
        async { None }
    }
}
