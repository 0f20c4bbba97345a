//! The operator's Prometheus metrics (prometheus-client), labelled by
//! cluster as its logs are (`cluster`, and `namespace` on Kubernetes,
//! empty locally), and the health the `/healthz` and `/readyz` endpoints
//! report ([`server`] serves all three on `--metrics-addr`).
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `etcd_operator_reconciles_total` | outcome | passes: `converged`, `waiting`, `acted`, `failed`, `invalid` |
//! | `etcd_operator_reconcile_duration_seconds` | outcome | how long a pass took (histogram) |
//! | `etcd_operator_steps_total` | kind | steps taken: `start`, `add_learner`, `remove`, `upgrade`, `restart`, `move_leader`... |
//! | `etcd_operator_errors_total` | category | failures: `timeout`, `refused`, `unreachable`, `io`, `kube_api`, `handover`... |
//! | `etcd_operator_members_ready`, `_voting`, `_learners` | | members now |
//! | `etcd_operator_leader_changes_total` | | a new leader, or the same one in a newer term (elections and handovers) |
//! | `etcd_operator_backups_total` | result | `taken` (verified) or `failed` |
//! | `etcd_operator_last_backup_age_seconds`, `etcd_operator_last_backup_size_bytes` | | the newest backup this operator took |
//! | `etcd_operator_last_recovery_duration_seconds` | | the last time members were not all ready: how long until they were again |
//!
//! and the metrics read off the published status ([`status`]: quorum,
//! Degraded and its reason, the backup interval, the last restore check,
//! certificate ends), which the alerts in `deploy/monitoring/` use.
//!
//! Counters a rate or an increase is taken of are exported at zero from a
//! cluster's first pass, not from their first event, so that first event
//! counts (`increase()` sees nothing in a series that starts at 1):
//! `reconciles_total` for every [`OUTCOMES`], `leader_changes_total`, and
//! while backups are on (`backup_interval_seconds` is set)
//! `backups_total` for both results. Steps and errors are not: their kinds
//! are many and open-ended, and a dashboard reads their rates by kind.

pub mod scrape;
pub mod server;
mod status;
#[cfg(test)]
mod zero_tests;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// The labels every series of a cluster carries.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ClusterLabels {
    /// Kubernetes namespace; empty on the local platform.
    pub namespace: String,
    /// The cluster's name.
    pub cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    namespace: String,
    cluster: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    namespace: String,
    cluster: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CategoryLabels {
    namespace: String,
    cluster: String,
    category: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    namespace: String,
    cluster: String,
    result: &'static str,
}

type Seconds = Gauge<f64, std::sync::atomic::AtomicU64>;

/// Every outcome of a reconcile pass (the controller's `reconcile`).
pub const OUTCOMES: [&str; 5] = ["converged", "waiting", "acted", "failed", "invalid"];

/// Both results of a backup.
const BACKUP_RESULTS: [&str; 2] = ["taken", "failed"];

fn duration_histogram() -> Histogram {
    // 1 ms to about 33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// Every metric of the operator, in one registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    reconciles: Family<OutcomeLabels, Counter>,
    reconcile_seconds: Family<OutcomeLabels, Histogram, fn() -> Histogram>,
    steps: Family<KindLabels, Counter>,
    errors: Family<CategoryLabels, Counter>,
    ready: Family<ClusterLabels, Gauge>,
    voting: Family<ClusterLabels, Gauge>,
    learners: Family<ClusterLabels, Gauge>,
    leader_changes: Family<ClusterLabels, Counter>,
    backups: Family<ResultLabels, Counter>,
    backup_age: Family<ClusterLabels, Seconds>,
    backup_size: Family<ClusterLabels, Gauge>,
    recovery: Family<ClusterLabels, Seconds>,
    /// When each cluster's newest backup was taken (its age is computed at
    /// each scrape).
    backup_times: Mutex<HashMap<ClusterLabels, SystemTime>>,
    /// Clusters whose counters were exported at zero (at their first
    /// pass), until they are forgotten.
    zeroed: Mutex<HashSet<ClusterLabels>>,
    /// The families read off the published status ([`status`]).
    status: status::StatusFamilies,
}

/// The name of every family the operator exports, as a scrape shows it
/// (`# TYPE NAME ...`): a family shows in a scrape only once it has a
/// series, so this fills one in each of a registry of its own. The alerts
/// and dashboard in `deploy/monitoring/` are checked against it, and it
/// against a running operator's scrape (operator/tests/metrics.rs).
pub fn family_names() -> Vec<String> {
    let metrics = Arc::new(Metrics::new());
    let c = metrics.cluster("", "every-family");
    c.reconciled("converged", Duration::ZERO);
    c.step("start");
    c.error("io");
    c.members(1, 1, 0);
    c.leader_changed();
    c.backup_taken(1, SystemTime::now());
    c.recovered(Duration::ZERO);
    c.status(&status::everything(), Some(Duration::from_secs(1)));
    let text = metrics.encode();
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect()
}

/// Registers every family, one row each: name, help, unit, family.
#[rustfmt::skip]
fn register_all(m: &Metrics, r: &mut Registry) {
    reg(r, "reconciles", "Reconcile passes by cluster and outcome", None, &m.reconciles);
    reg(r, "reconcile_duration", "How long a reconcile pass took", Some(Unit::Seconds), &m.reconcile_seconds);
    reg(r, "steps", "Steps of the plan carried out, by kind", None, &m.steps);
    reg(r, "errors", "Failures by category (a step, an observation, a record)", None, &m.errors);
    reg(r, "members_ready", "Members serving with a leader", None, &m.ready);
    reg(r, "members_voting", "Voting members in etcd's member list", None, &m.voting);
    reg(r, "members_learners", "Learners in etcd's member list", None, &m.learners);
    reg(r, "leader_changes", "New leaders seen (handovers and elections)", None, &m.leader_changes);
    reg(r, "backups", "Backups taken and verified, or failed", None, &m.backups);
    reg(r, "last_backup_age", "Age of the newest backup this operator took", Some(Unit::Seconds), &m.backup_age);
    reg(r, "last_backup_size", "Size of the newest backup this operator took", Some(Unit::Bytes), &m.backup_size);
    reg(r, "last_recovery_duration", "The last time members were not all ready: how long until they were again", Some(Unit::Seconds), &m.recovery);
    reg(r, "cluster_available", "1 while a quorum of members serves (condition Available), else 0", None, &m.status.available);
    reg(r, "cluster_degraded", "1 while condition Degraded is true, labelled with its reason", None, &m.status.degraded);
    reg(r, "backup_interval", "spec.backup.interval, while backups are on", Some(Unit::Seconds), &m.status.backup_interval);
    reg(r, "last_restore_check", "1 for the result of the last restore check", None, &m.status.restore_check);
    reg(r, "tls_not_after_timestamp", "When the cluster's CA (ca) and its earliest member certificate (member) end, Unix time", Some(Unit::Seconds), &m.status.tls_not_after);
    reg(r, "backup_chain_behind", "With continuous backups: 1 while condition BackupChainBehind is true (the store lags the cluster's changes, or the chain ended), else 0", None, &m.status.chain_behind);
    reg(r, "backup_chain_synced_timestamp", "With continuous backups: when the store last held every change of the cluster, Unix time", Some(Unit::Seconds), &m.status.chain_synced);
    reg(r, "standby_behind", "A standby: 1 while condition StandbyBehind is true (stopped, diverged, or lagging its source), else 0", None, &m.status.standby_behind);
    reg(r, "standby_lag_revisions", "A standby: source revisions known and not applied yet", None, &m.status.standby_lag_revisions);
    reg(r, "standby_lag", "A standby: how long ago the source wrote the first revision not applied yet", Some(Unit::Seconds), &m.status.standby_lag);
}

/// Registers one family under `name` (a Family is a handle: the clone
/// registered shares its series with the one kept).
fn reg<T: prometheus_client::registry::Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    family: &T,
) {
    match unit {
        Some(unit) => registry.register_with_unit(name, help, unit, family.clone()),
        None => registry.register(name, help, family.clone()),
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric, none with a series yet.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("etcd_operator");
        let m = Metrics {
            reconciles: Family::default(),
            reconcile_seconds: Family::new_with_constructor(duration_histogram),
            steps: Family::default(),
            errors: Family::default(),
            ready: Family::default(),
            voting: Family::default(),
            learners: Family::default(),
            leader_changes: Family::default(),
            backups: Family::default(),
            backup_age: Family::default(),
            backup_size: Family::default(),
            recovery: Family::default(),
            backup_times: Mutex::default(),
            zeroed: Mutex::default(),
            status: status::StatusFamilies::default(),
            registry: Registry::default(),
        };
        register_all(&m, &mut registry);
        Metrics { registry, ..m }
    }

    /// The metrics of one cluster.
    pub fn cluster(self: &Arc<Self>, namespace: &str, cluster: &str) -> ClusterMetrics {
        ClusterMetrics {
            metrics: self.clone(),
            labels: ClusterLabels {
                namespace: namespace.to_string(),
                cluster: cluster.to_string(),
            },
        }
    }

    /// Everything, in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let now = SystemTime::now();
        let times = self.backup_times.lock().unwrap_or_else(|e| e.into_inner());
        for (labels, at) in times.iter() {
            let age = now.duration_since(*at).unwrap_or_default();
            self.backup_age.get_or_create(labels).set(age.as_secs_f64());
        }
        drop(times);
        let zeroed = self.zeroed.lock().unwrap_or_else(|e| e.into_inner());
        for labels in zeroed.iter() {
            if self.status.backup_interval.get(labels).is_some() {
                for result in BACKUP_RESULTS {
                    drop(self.backups.get_or_create(&result_labels(labels, result)));
                }
            }
        }
        drop(zeroed);
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

fn result_labels(l: &ClusterLabels, result: &'static str) -> ResultLabels {
    ResultLabels {
        namespace: l.namespace.clone(),
        cluster: l.cluster.clone(),
        result,
    }
}

/// One cluster's handle on the [`Metrics`]. A cluster without a registry
/// of its own ([`ClusterMetrics::detached`], in tests) records into one
/// nobody reads.
#[derive(Clone, Debug)]
pub struct ClusterMetrics {
    metrics: Arc<Metrics>,
    labels: ClusterLabels,
}

impl ClusterMetrics {
    /// Metrics that go nowhere.
    pub fn detached(cluster: &str) -> Self {
        Arc::new(Metrics::new()).cluster("", cluster)
    }

    /// A reconcile pass ended with `outcome` after `took`.
    pub fn reconciled(&self, outcome: &'static str, took: Duration) {
        self.zero_counters();
        let l = OutcomeLabels {
            namespace: self.labels.namespace.clone(),
            cluster: self.labels.cluster.clone(),
            outcome,
        };
        self.metrics.reconciles.get_or_create(&l).inc();
        let h = self.metrics.reconcile_seconds.get_or_create(&l);
        h.observe(took.as_secs_f64());
    }

    /// A step of `kind` was carried out (or tried).
    pub fn step(&self, kind: &'static str) {
        let l = KindLabels {
            namespace: self.labels.namespace.clone(),
            cluster: self.labels.cluster.clone(),
            kind,
        };
        self.metrics.steps.get_or_create(&l).inc();
    }

    /// The first time: the counters of every outcome, and of leader
    /// changes, exported at zero.
    fn zero_counters(&self) {
        let m = &self.metrics;
        let mut zeroed = m.zeroed.lock().unwrap_or_else(|e| e.into_inner());
        if !zeroed.insert(self.labels.clone()) {
            return;
        }
        for outcome in OUTCOMES {
            drop(m.reconciles.get_or_create(&OutcomeLabels {
                namespace: self.labels.namespace.clone(),
                cluster: self.labels.cluster.clone(),
                outcome,
            }));
        }
        drop(m.leader_changes.get_or_create(&self.labels));
    }

    /// Something failed.
    pub fn error(&self, category: &'static str) {
        let l = CategoryLabels {
            namespace: self.labels.namespace.clone(),
            cluster: self.labels.cluster.clone(),
            category,
        };
        self.metrics.errors.get_or_create(&l).inc();
    }

    /// Members now: ready, voting, learners.
    pub fn members(&self, ready: usize, voting: usize, learners: usize) {
        let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        let m = &self.metrics;
        m.ready.get_or_create(&self.labels).set(n(ready));
        m.voting.get_or_create(&self.labels).set(n(voting));
        m.learners.get_or_create(&self.labels).set(n(learners));
    }

    /// A new leader was seen.
    pub fn leader_changed(&self) {
        self.metrics
            .leader_changes
            .get_or_create(&self.labels)
            .inc();
    }

    /// A backup of `bytes` was taken and verified at `at`.
    pub fn backup_taken(&self, bytes: u64, at: SystemTime) {
        self.backup_result("taken");
        let size = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.metrics
            .backup_size
            .get_or_create(&self.labels)
            .set(size);
        let times = &self.metrics.backup_times;
        let mut times = times.lock().unwrap_or_else(|e| e.into_inner());
        times.insert(self.labels.clone(), at);
    }

    /// A backup failed.
    pub fn backup_failed(&self) {
        self.backup_result("failed");
    }

    fn backup_result(&self, result: &'static str) {
        let l = result_labels(&self.labels, result);
        self.metrics.backups.get_or_create(&l).inc();
    }

    /// Members were all ready again `took` after one was not.
    pub fn recovered(&self, took: Duration) {
        let g = self.metrics.recovery.get_or_create(&self.labels);
        g.set(took.as_secs_f64());
    }

    /// The cluster is gone: its gauges go (its counters stay until the
    /// operator restarts, as counters do).
    pub fn forget(&self) {
        let m = &self.metrics;
        for f in [&m.ready, &m.voting, &m.learners, &m.backup_size] {
            f.remove(&self.labels);
        }
        for f in [&m.backup_age, &m.recovery] {
            f.remove(&self.labels);
        }
        m.leader_changes.remove(&self.labels);
        m.status.forget(&self.labels);
        let mut zeroed = m.zeroed.lock().unwrap_or_else(|e| e.into_inner());
        zeroed.remove(&self.labels);
        drop(zeroed);
        let mut times = m.backup_times.lock().unwrap_or_else(|e| e.into_inner());
        times.remove(&self.labels);
    }
}
