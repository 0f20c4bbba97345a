//! Where the faults land: the members of a platform, and the operator.
//!
//! A [`Platform`] lists clusters, observes the selected ones (members, whether
//! they run, how old they are, their roles), and injects a fault into the
//! one process or pod it observed, identified so that a member restarted
//! in between is never hit by mistake (a pidfd after checking the pid's
//! start time locally; a delete precondition on the pod's uid on
//! Kubernetes).

use std::collections::HashSet;
use std::future::Future;
use std::time::{Duration, SystemTime};

use etcd_operator::faults::Fault;

use crate::config::{Config, FaultOptions};
use crate::rng::Rng;
use crate::roles::RoleSource;
use crate::select::{ClusterView, MemberView};

pub mod kube;
pub mod local;

pub use local::store::StoreAt;

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
    /// A Kubernetes API call failed.
    #[error("{what}: {source}")]
    Kube {
        /// What was being done.
        what: String,
        /// The cause.
        source: ::kube::Error,
    },
    /// The process or pod is gone (or was replaced) since it was observed.
    #[error("{0} is gone")]
    Gone(String),
    /// The fault cannot be injected here.
    #[error("{0}")]
    Unsupported(String),
    /// A network fault's kernel rules.
    #[error(transparent)]
    Net(#[from] crate::net::Error),
    /// This machine cannot inject the fault at all (missing rights or
    /// tools, leftovers of a killed run): exit code 2 at start.
    #[error("{0}")]
    Setup(String),
    /// The process found is not one the monkey may take for its target
    /// (a store it cannot identify): nothing is hit; exit code 2 at start.
    #[error("{0}")]
    Refused(String),
}

/// A lasting fault to start on one cluster (it runs for a while and is
/// healed): a network fault (who is cut or slowed from whom), a clock skew
/// or a slow disk (the victims).
#[derive(Clone, Debug)]
pub struct LastingPlan<H> {
    /// partition, delay, loss, blackhole-until-snapshot, clock-skew or
    /// slow-disk.
    pub fault: Fault,
    /// The cluster.
    pub cluster: String,
    /// Its running members: name and process or pod.
    pub members: Vec<(String, H)>,
    /// Pairs of indexes into `members` whose traffic is cut or slowed.
    pub pairs: Vec<(usize, usize)>,
    /// Indexes into `members` of the victims (the victim's side of a split).
    pub victims: Vec<usize>,
    /// Latency, loss and the rest.
    pub options: FaultOptions,
    /// Seed of the fault's own random draws (a delay's jitter).
    pub seed: u64,
}

impl<H> LastingPlan<H> {
    /// The names of the members cut from member `i`.
    pub fn cut_from(&self, i: usize) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .pairs
            .iter()
            .filter_map(|&(a, b)| match () {
                () if a == i => Some(self.members[b].0.as_str()),
                () if b == i => Some(self.members[a].0.as_str()),
                () => None,
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// A (cluster, member) pair.
pub type MemberKey = (String, String);

/// A member as observed, with what it takes to hit it.
#[derive(Clone, Debug)]
pub struct Observed<H> {
    /// What victim choice sees.
    pub view: MemberView,
    /// Its process or pod, when it runs.
    pub handle: Option<H>,
    /// Where `view.role` came from (`None` while it is unknown).
    pub role_source: Option<RoleSource>,
}

/// A cluster as observed; members in the operator's order.
#[derive(Clone, Debug)]
pub struct ObservedCluster<H> {
    /// Cluster name.
    pub name: String,
    /// Its members.
    pub members: Vec<Observed<H>>,
}

impl<H> ObservedCluster<H> {
    /// The view victim choice takes.
    pub fn view(&self) -> ClusterView {
        ClusterView {
            name: self.name.clone(),
            members: self.members.iter().map(|m| m.view.clone()).collect(),
        }
    }
}

/// The operator as found.
#[derive(Clone, Debug)]
pub struct Operator<H> {
    /// What the fault log calls it: a process name or pod name.
    pub name: String,
    /// Its process or pod.
    pub handle: H,
}

/// A place members run. Every method touches only what it is given.
pub trait Platform: Send + Sync {
    /// A process or pod, as observed.
    type Handle: Clone + std::fmt::Debug + Send + Sync + 'static;

    /// Names of every cluster with members, sorted.
    fn clusters(&self) -> impl Future<Output = Result<Vec<String>, Error>> + Send;

    /// The members of these clusters. Members in `paused` count as not
    /// running (they are not asked for their role); members started less
    /// than `min_age` before `now` are not eligible. A cluster that has no
    /// members (any more) is left out.
    fn observe(
        &self,
        clusters: &[String],
        paused: &HashSet<MemberKey>,
        min_age: Duration,
        now: SystemTime,
    ) -> impl Future<Output = Result<Vec<ObservedCluster<Self::Handle>>, Error>> + Send;

    /// Which of `clusters` are standbys still following their source, as
    /// the operator published them (`status.standby`, not `Promoted`): the
    /// clusters `--target applier` aims at. A status that cannot be read
    /// counts as no standby.
    fn standbys(&self, clusters: &[String]) -> impl Future<Output = HashSet<String>> + Send;

    /// Injects `fault` (kill, destroy or pause) into the process or pod.
    fn inject(
        &self,
        fault: Fault,
        handle: &Self::Handle,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// Resumes a paused process.
    fn resume(&self, handle: &Self::Handle) -> impl Future<Output = Result<(), Error>> + Send;

    /// The running operator, if one is found.
    fn operator(
        &self,
    ) -> impl Future<Output = Result<Option<Operator<Self::Handle>>, Error>> + Send;

    /// The process of the object store at `at` (a loopback address), if
    /// one is found; `Refused` when the process there cannot be taken for
    /// the store; none on a platform that cannot reach it.
    fn store(
        &self,
        at: StoreAt,
    ) -> impl Future<Output = Result<Option<Operator<Self::Handle>>, Error>> + Send {
        let _ = at;
        async { Ok(None) }
    }

    /// A network fault in force, as needed to heal it.
    type Lasting: Send + Sync + std::fmt::Debug + 'static;

    /// Checks once, before the first tick, that `cfg.fault` can be injected
    /// here (rights, tools, nothing left behind by a killed run); returns a
    /// line saying what it will touch, if anything beyond the members.
    fn prepare(&self, cfg: &Config) -> impl Future<Output = Result<Option<String>, Error>> + Send;

    /// Starts a network fault; returns it with what it did, for the log.
    fn start(
        &self,
        plan: &LastingPlan<Self::Handle>,
    ) -> impl Future<Output = Result<(Self::Lasting, String), Error>> + Send;

    /// Whether a fault that ends on a condition (blackhole-until-snapshot)
    /// may end now: `Some(why)`.
    fn settled(&self, lasting: &mut Self::Lasting) -> impl Future<Output = Option<String>> + Send;

    /// Undoes a network fault; also safe on one that is half gone.
    fn heal(&self, lasting: &Self::Lasting) -> impl Future<Output = Result<(), Error>> + Send;

    /// Damages a member (corrupt, disk-full); returns what was done.
    fn damage(
        &self,
        fault: Fault,
        handle: &Self::Handle,
        options: &FaultOptions,
        rng: Rng,
    ) -> impl Future<Output = Result<String, Error>> + Send;
}

/// Whether `status` is a standby's still following its source.
pub fn following(status: Option<&etcd_operator::crd::EtcdClusterStatus>) -> bool {
    status
        .and_then(|s| s.standby.as_ref())
        .is_some_and(|s| s.state != etcd_operator::standby::state::PROMOTED)
}

/// Whether a member that started at `started` is old enough to be hit.
/// An unknown start time counts as old (nothing says it is young).
pub fn old_enough(started: Option<SystemTime>, min_age: Duration, now: SystemTime) -> bool {
    match started {
        _ if min_age.is_zero() => true,
        None => true,
        Some(t) => now.duration_since(t).is_ok_and(|age| age >= min_age),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages() {
        let now = SystemTime::now();
        let min = Duration::from_secs(60);
        assert!(old_enough(Some(now - Duration::from_secs(61)), min, now));
        assert!(!old_enough(Some(now - Duration::from_secs(59)), min, now));
        assert!(!old_enough(Some(now + Duration::from_secs(5)), min, now));
        assert!(old_enough(None, min, now));
        assert!(old_enough(Some(now), Duration::ZERO, now));
    }
}
