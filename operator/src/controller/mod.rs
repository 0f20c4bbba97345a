//! The reconcile loop of one cluster: observe -> plan -> act -> status.
//!
//! [`Cluster::reconcile`] is one pass; it returns when to come back if
//! nothing happens meanwhile. The local controller ([`local`]) runs one task
//! per cluster that calls it again at once after every step and on every
//! event (a member's exit, a spec change); the timer is only a backstop.

pub mod act;
pub mod alarm_poll;
pub mod backup_conditions;
pub mod backups;
mod crashes;
pub mod facts;
pub mod kube;
pub mod live;
pub mod local;
mod maintenance;
mod outcome;
mod recovery;
mod remember;
mod standby;
pub mod status;
mod story;
#[cfg(test)]
mod tests;
mod tls;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use self::crashes::Crashes;
use self::facts::{Failed, Failure, Lost, Moves};
use crate::backup::schedule::Schedule;
use crate::crd::{EtcdCluster, EtcdClusterStatus};
use crate::etcd::Clients;
use crate::metrics::ClusterMetrics;
use crate::observe::{ListCache, Observation, observe};
use crate::plan::{Desired, Step, Wait, plan};
use crate::platform::{ClusterRecord, Platform};
use crate::validate::ValidSpec;

/// How often a converged cluster is looked at without any event (member
/// exits and spec changes wake it at once; this is the backstop).
pub const IDLE_INTERVAL: Duration = Duration::from_secs(5);
/// How often a member that is starting is polled.
pub const STARTING_INTERVAL: Duration = Duration::from_millis(20);
/// How often a cluster that waits on a problem is looked at.
pub const PROBLEM_INTERVAL: Duration = Duration::from_secs(1);
/// How often a cluster is looked at while a member whose data is gone
/// cannot be removed without losing quorum: usually a majority was just
/// lost and the survivors still name the dead leader, until their election
/// timeout (1 s by default); the pass after that starts the rebuild, so
/// waiting a whole [`PROBLEM_INTERVAL`] more cost up to a second of it.
pub const LOSING_INTERVAL: Duration = Duration::from_millis(100);
pub use crate::member::crash::{CRASH_LOOP_EXITS, CRASH_LOOP_EXITS_WITHOUT_QUORUM, CRASH_WINDOW};
/// Retry interval after etcd refused a membership change.
pub const REFUSED_RETRY: Duration = Duration::from_millis(200);
/// Published status is rewritten at least this often (for `observedAt`).
pub(super) const STATUS_REFRESH: Duration = Duration::from_secs(5);

/// The spec of a cluster as the controller has it.
#[derive(Clone, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "one per cluster task, mostly Valid: boxing would only add an indirection"
)]
pub enum SpecState {
    /// A spec that passed validation.
    Valid {
        /// The resource as read.
        resource: Box<EtcdCluster>,
        /// Its checked spec.
        spec: Box<ValidSpec>,
        /// Where it came from (a manifest file locally).
        source: Option<PathBuf>,
    },
    /// A spec that cannot be used; nothing is done to the cluster.
    Invalid {
        /// The resource as read, when it could be read.
        resource: Option<Box<EtcdCluster>>,
        /// Which file and field, and what is allowed.
        message: String,
    },
}

/// The result of one reconcile pass.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The step the plan chose (`None` for an invalid spec).
    pub step: Option<Step>,
    /// Come back after this long, unless an event comes first.
    pub next: Duration,
}

/// Hands the platform the resource `spec` came with, if any (a manifest
/// that cannot be read has none), saying whether its members may be acted
/// on (a valid spec, not paused).
async fn prepare<P: Platform>(
    platform: &P,
    cluster: &str,
    spec: &SpecState,
    voters: usize,
) -> crate::platform::Result<()> {
    let (resource, active) = match spec {
        SpecState::Valid { resource, spec, .. } => (Some(resource), !spec.paused),
        SpecState::Invalid { resource, .. } => (resource.as_ref(), false),
    };
    match resource {
        Some(r) => platform.prepare(cluster, r, voters, active).await,
        None => Ok(()),
    }
}

/// One cluster under management.
#[derive(Debug)]
pub struct Cluster<P> {
    name: String,
    platform: Arc<P>,
    clients: Arc<Clients>,
    spec: SpecState,
    record: ClusterRecord,
    crashes: Crashes,
    /// The last failure, until the same thing succeeds (or, for a step,
    /// the plan chooses another).
    failure: Option<Failure>,
    errors_in_row: u32,
    /// What was lost (a member removed to be replaced, the quorum) that
    /// the steps under way replace, until the plan converges.
    lost: Option<Lost>,
    /// Members moved on purpose that are not ready again yet.
    moves: Moves,
    /// What began and has not ended yet, for the Events.
    story: story::Story,
    /// A `spec.restore` whose backup was not found, for this spec.
    restore_refused: Option<backups::RestoreRefusal>,
    published: Option<(EtcdClusterStatus, Instant)>,
    schedule: Option<Schedule>,
    /// The applier of a standby (`spec.standby`), while it follows.
    standby: Option<crate::standby::Applier>,
    /// When creating the standby again past a gap last failed.
    rebootstrap_failed: Option<std::time::Instant>,
    revision_saved: Option<Instant>,
    tls: tls::Tls,
    /// Hand a leader's leadership over before restarting or removing it.
    handover: bool,
    metrics: ClusterMetrics,
    /// The leader last seen and its term, to count leader changes.
    last_leader: Option<(String, u64)>,
    /// Since when members are not all ready (for the recovery time).
    unready_since: Option<Instant>,
    /// Every member was ready at least once since the cluster was
    /// bootstrapped (or when this operator took it over): until then a
    /// member still on its way up is creation, not recovery.
    formed: bool,
    /// This pass acted, failed.
    pass_acted: bool,
    pass_failed: bool,
    db: maintenance::DbState,
    /// The last write that failed because the state folder is full, until
    /// a status write succeeds again.
    state_full: Option<String>,
    /// etcd's member list as last read (reused while it cannot have
    /// changed, see [`ListCache`]).
    lists: ListCache,
}

impl<P: Platform> Cluster<P> {
    /// Takes over cluster `name` (loading its record, if it has one).
    /// Its backups go to the platform's store ([`Platform::backups`]).
    #[tracing::instrument(name = "take_over", skip_all, fields(cluster = %name))]
    pub async fn new(
        name: &str,
        platform: Arc<P>,
        clients: Arc<Clients>,
        spec: SpecState,
    ) -> crate::platform::Result<Self> {
        // The platform takes the resource first: on Kubernetes its uid tells
        // this cluster's record from an earlier resource's of the same name.
        prepare(&*platform, name, &spec, 0).await?;
        let record = platform.load_record(name).await?.unwrap_or_default();
        let formed = record.bootstrapped;
        let mut cluster = Cluster {
            name: name.to_string(),
            platform,
            clients,
            spec: SpecState::Invalid {
                resource: None,
                message: String::new(),
            },
            record,
            crashes: Crashes::default(),
            failure: None,
            errors_in_row: 0,
            lost: None,
            moves: Moves::default(),
            story: story::Story::default(),
            restore_refused: None,
            published: None,
            schedule: None,
            standby: None,
            rebootstrap_failed: None,
            revision_saved: None,
            tls: tls::Tls::default(),
            handover: true,
            metrics: ClusterMetrics::detached(name),
            last_leader: None,
            unready_since: None,
            formed,
            pass_acted: false,
            pass_failed: false,
            db: maintenance::DbState::default(),
            state_full: None,
            lists: ListCache::default(),
        };
        // A cluster without a resource uid (locally) gets its uid when first
        // seen, before its backup schedule starts: a new cluster keeps it
        // with its record from its first save on, one created before
        // clusters had a uid has it saved now, so its next backups carry it.
        if backups::spec_uid(&spec).is_none() && cluster.record.uid.is_none() {
            cluster.record.uid = Some(crate::platform::new_cluster_uid());
            if cluster.record.bootstrapped || !cluster.record.initial.is_empty() {
                cluster.save_record().await;
            }
        }
        cluster.take_spec(spec).await;
        Ok(cluster)
    }

    /// Whether a leader's leadership is handed over before the leader is
    /// restarted or removed (default: yes; `--no-leader-handover` turns it
    /// off, for benchmarks).
    pub fn set_handover(&mut self, on: bool) {
        self.handover = on;
    }

    /// Where the cluster's metrics go (by default nowhere).
    pub fn set_metrics(&mut self, metrics: ClusterMetrics) {
        self.metrics = metrics;
        self.schedule = None;
        self.sync_schedule();
    }

    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cluster's record.
    pub fn record(&self) -> &ClusterRecord {
        &self.record
    }

    /// Takes a new spec, handing the platform its resource first
    /// ([`Platform::prepare`]; on an error the spec is not taken); a
    /// changed valid spec bumps the generation.
    #[tracing::instrument(name = "spec", skip_all, fields(cluster = %self.name))]
    pub async fn set_spec(&mut self, spec: SpecState) -> crate::platform::Result<()> {
        let voters = self.record.last_voters;
        prepare(&*self.platform, &self.name, &spec, voters).await?;
        self.take_spec(spec).await;
        Ok(())
    }

    async fn take_spec(&mut self, spec: SpecState) {
        if let SpecState::Valid {
            resource, source, ..
        } = &spec
        {
            let json = serde_json::to_string(&resource.spec).unwrap_or_default();
            if json != self.record.spec_json || *source != self.record.source {
                if json != self.record.spec_json {
                    self.record.generation += 1;
                }
                self.record.spec_json = json;
                self.record.source.clone_from(source);
                if let Err(e) = self.platform.save_record(&self.name, &self.record).await {
                    tracing::warn!("cannot save the cluster record: {e}");
                }
            }
        }
        self.spec = spec;
        self.sync_schedule();
    }

    /// Notes that a member's process exited (`crashed`: by itself, with a
    /// failure).
    #[tracing::instrument(skip_all, fields(cluster = %self.name, %member, crashed = crashed))]
    pub fn member_exited(&mut self, member: &str, crashed: bool) {
        tracing::info!("member process exited");
        self.crashes.exited(member, crashed);
    }

    /// One pass of observe -> plan -> act -> status, in a span naming the
    /// cluster (every log line of the pass carries it), measured.
    #[tracing::instrument(name = "reconcile", skip_all, fields(cluster = %self.name))]
    pub async fn reconcile(&mut self) -> Outcome {
        let started = Instant::now();
        (self.pass_acted, self.pass_failed) = (false, false);
        let mut out = self.pass().await;
        // A standby being promoted is looked at often: its promotion is
        // said (and the cluster goes on alone) as soon as it is done.
        if self.standby_promoting() {
            out.next = out.next.min(STARTING_INTERVAL * 5);
        }
        let outcome = match &out.step {
            _ if self.pass_failed => "failed",
            _ if self.pass_acted => "acted",
            None => "invalid",
            Some(Step::Converged) => "converged",
            Some(_) => "waiting",
        };
        self.metrics.reconciled(outcome, started.elapsed());
        tracing::debug!(next = ?out.next, step = ?out.step, outcome, "reconciled");
        out
    }

    async fn pass(&mut self) -> Outcome {
        // A member that dies at start while the state folder is full dies
        // of the full disk, not of its data: no crash loop is judged then.
        let looping = match self.state_full {
            Some(_) => HashSet::new(),
            None => self.crashes.looping(CRASH_LOOP_EXITS),
        };
        let valid = match &self.spec {
            SpecState::Valid { spec, .. } => Some((**spec).clone()),
            SpecState::Invalid { .. } => None,
        };
        if let Some(spec) = &valid {
            self.tls_prepare(spec).await;
        }
        let tls = self.tls.client().cloned();
        let obs = match observe(
            &*self.platform,
            &self.clients,
            &mut self.lists,
            &self.name,
            &self.record,
            &looping,
            tls.as_ref(),
        )
        .await
        {
            Ok(o) => o,
            Err(e) => {
                let message = format!("cannot observe the cluster: {e}");
                self.failed(Failed::Observe, e.category(), message, false);
                self.publish(&Observation::default(), None, &[]).await;
                return self.retry();
            }
        };
        if self
            .failure
            .as_ref()
            .is_some_and(|f| f.what == Failed::Observe)
        {
            self.failure = None;
        }
        let mut obs = obs;
        for m in obs.observed.members.iter().filter(|m| m.healthy) {
            self.crashes.healthy(&m.name);
        }
        self.remember(&obs).await;
        self.measure(&obs);
        self.db_facts(&mut obs).await;
        if obs.observed.bootstrapped && !obs.observed.membership_known {
            // Without quorum a member's data is given up only on the longer
            // proof (see CRASH_LOOP_EXITS_WITHOUT_QUORUM).
            let looping = match self.state_full {
                Some(_) => HashSet::new(),
                None => self.crashes.looping(CRASH_LOOP_EXITS_WITHOUT_QUORUM),
            };
            for m in &mut obs.observed.members {
                if let Some(p) = m.platform.as_mut() {
                    p.crash_looping &= looping.contains(&m.name);
                }
            }
            let backup = self.backup_available().await;
            obs.observed.backup_available = backup.is_some();
            obs.observed.backup_revision = backup;
        }
        let step = match &valid {
            Some(spec) => {
                let mut desired = Desired::from(spec);
                desired.handover = self.handover;
                desired.tls = self.tls_observed(&mut obs, spec).await;
                Some(match (&self.tls.problem, &obs.tls_refused) {
                    (Some(message), _) => Step::Wait(Wait::TlsInvalid {
                        message: message.clone(),
                    }),
                    // No member could be asked anything: not a quorum loss.
                    (None, Some(refusal)) if !obs.observed.membership_known => {
                        Step::Wait(Wait::TlsInvalid {
                            message: format!(
                                "every member refuses the operator's TLS connections, so whether \
                                 a quorum serves is unknown (the CAs the members trust and the \
                                 operator's client certificate do not match; after changing a \
                                 provided CA, keep the old CA in ca.crt until every member \
                                 restarted): {refusal}"
                            ),
                        })
                    }
                    (None, _) => plan(&desired, &obs.observed),
                })
            }
            None => None,
        };
        let step = step.map(|s| self.restore_wait(s));
        self.offer_backup_sources(&obs);
        self.sync_standby(&obs).await;
        self.offer_standby_members(&obs);
        self.standby_credentials(&obs);
        let ended = self.moves.observed(&obs);
        // A step's failure says nothing once the plan chooses another step.
        if self
            .failure
            .as_ref()
            .is_some_and(|f| !f.current(step.as_ref()))
        {
            self.failure = None;
        }
        let failing = self.failing(&obs).await;
        let backup = self.schedule.as_ref().map(|s| s.status());
        let seen = story::Seen {
            obs: &obs,
            step: step.as_ref(),
            size: valid.as_ref().map(|s| s.size),
            formed: self.formed,
            lost: self.lost.as_ref(),
            ended: &ended,
            failing: &failing,
            moves: &self.moves,
            backup: backup.as_ref(),
        };
        let notices = self.story.pass(&seen);
        self.tell(notices).await;
        self.publish(&obs, step.as_ref(), &failing).await;
        let Some(step) = step else {
            return Outcome {
                step: None,
                next: PROBLEM_INTERVAL,
            };
        };
        let next = match &step {
            Step::Converged => {
                self.lost = None;
                IDLE_INTERVAL
            }
            Step::Wait(Wait::Forming | Wait::MemberNotReady { .. }) => STARTING_INTERVAL,
            Step::Wait(Wait::RemoveWouldLoseQuorum { .. }) => LOSING_INTERVAL,
            Step::Wait(Wait::RestoreNotFound { .. }) => IDLE_INTERVAL,
            Step::Wait(_) => PROBLEM_INTERVAL,
            Step::Start { member } if !self.crashes.hold_off(member).is_zero() => {
                self.crashes.hold_off(member)
            }
            Step::Bootstrap if !self.bootstrap_hold_off().is_zero() => self.bootstrap_hold_off(),
            _ => return self.act(step, &obs).await,
        };
        Outcome {
            step: Some(step),
            next,
        }
    }

    /// Stops every member and deletes everything kept about the cluster.
    #[tracing::instrument(skip_all, fields(cluster = %self.name))]
    pub async fn delete(self) -> crate::platform::Result<()> {
        tracing::info!("manifest removed: deleting the cluster");
        self.metrics.forget();
        self.platform.delete_cluster(&self.name).await
    }
}
