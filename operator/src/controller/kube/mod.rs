//! The Kubernetes controller: a kube-runtime [`Controller`] on EtcdCluster
//! resources (all namespaces, or one), owning their pods and volume claims
//! so a deleted pod triggers a reconcile at once.
//!
//! Each resource gets one [`Cluster`] (kept between reconciles, keyed by
//! namespace and name, replaced when the uid changes), on the namespace's
//! [`KubePlatform`]. A reconcile sets the spec from the resource, runs one
//! [`Cluster::reconcile`] pass and requeues when it asks.
//!
//! The same watches of pods and claims tell each platform when the lists
//! its last pass read may have changed ([`Watched`]): an idle cluster's
//! passes ask the API server nothing, so passes may come as often as the
//! plan asks (no sooner than [`MIN_POLL`]).
//!
//! No finalizer: every object a cluster has carries an ownerReference to
//! its resource, so the garbage collector deletes them with it, and there
//! is nothing outside Kubernetes to clean up (backups on Kubernetes do not
//! exist yet). A deleted resource's `Cluster` is dropped when the
//! controller reports it gone (its next requeue finds no object), or at
//! once when it is seen with a deletion timestamp (foreground deletion).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Resource, ResourceExt};

mod checks;
pub mod elected;
pub mod lease;
pub mod watch;

pub use self::checks::{kube_checks, spec_state};
use super::{Cluster, SpecState};
use crate::crd::{EtcdCluster, LABEL_MANAGED_BY, MANAGED_BY};
use crate::etcd::Clients;
use crate::metrics::Metrics;
use crate::metrics::server::Health;
use crate::names::check_cluster_name;
use crate::platform::kube::KubePlatform;
use crate::platform::kube::watched::{Watch, Watched};
use crate::platform::{self, Platform};

/// Timeout of a member's status call (to the pod's IP, in-cluster).
pub const STATUS_TIMEOUT: Duration = Duration::from_secs(1);
/// Right after a step, the cluster is looked at again this soon.
pub const AFTER_STEP: Duration = Duration::from_millis(10);
/// Otherwise no sooner than this. A pass that nothing changed for reads
/// its pods and claims from the lists before ([`Watched`]), so this only
/// bounds how often etcd is asked while a member starts or a refused
/// change is retried (the local platform: every 20 ms); pod and claim
/// changes wake a pass at once anyway. (It was 500 ms while every pass
/// listed pods and claims.)
pub const MIN_POLL: Duration = Duration::from_millis(100);
/// Field manager and reporter of the operator.
pub const MANAGER: &str = "etcd-operator";

/// Why a reconcile or the controller failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The platform failed (taking the resource, its shared objects,
    /// loading the record).
    #[error(transparent)]
    Platform(#[from] platform::Error),
    /// The resource lacks a namespace or a uid.
    #[error("EtcdCluster {0}: the resource has no {1}")]
    Incomplete(String, &'static str),
}

impl Error {
    /// A short label for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Platform(e) => e.category(),
            Error::Incomplete(..) => "incomplete",
        }
    }
}

/// Settings of the Kubernetes controller.
#[derive(Debug, Clone)]
pub struct Options {
    /// Watch only this namespace (`None`: all namespaces).
    pub namespace: Option<String>,
    /// etcd image repository; members run `IMAGE:vVERSION`.
    pub image: String,
    /// The operator's own image, which backup Jobs run (`None`: no
    /// backups; a spec asking for them is told how to set it).
    pub backup_image: Option<String>,
    /// Hand a leader's leadership over before restarting or removing it.
    pub handover: bool,
    /// A writable folder of the operator's (`--state-dir`), where
    /// standbys stage what they read of their sources' buckets (`None`:
    /// standbys cannot follow, and say so).
    pub scratch: Option<std::path::PathBuf>,
    /// Where every cluster's metrics go.
    pub metrics: Arc<Metrics>,
    /// What `/readyz` says: ready once EtcdCluster resources can be
    /// listed, not ready while the watches fail.
    pub health: Arc<Health>,
}

/// When to come back after a pass that asked for `next`.
pub fn requeue_after(next: Duration) -> Duration {
    if next.is_zero() {
        AFTER_STEP
    } else {
        next.max(MIN_POLL)
    }
}

/// Backoff after failed reconciles in a row: 500 ms doubling to 30 s.
pub fn backoff(failures: u32) -> Duration {
    let n = failures.clamp(1, 7) - 1;
    Duration::from_millis(500 << n).min(Duration::from_secs(30))
}

type Key = (String, String);
/// A resource's uid and its entry.
type Entry = (String, Arc<tokio::sync::Mutex<Managed>>);

/// One resource under management.
struct Managed {
    cluster: Option<Cluster<KubePlatform>>,
    /// The invalid-spec message last published as an Event.
    reported: Option<String>,
}

/// What every reconcile shares.
struct Context {
    client: Client,
    image: String,
    backup_image: Option<String>,
    handover: bool,
    scratch: Option<std::path::PathBuf>,
    metrics: Arc<Metrics>,
    clients: Arc<Clients>,
    recorder: Recorder,
    platforms: Mutex<HashMap<String, Arc<KubePlatform>>>,
    clusters: Mutex<HashMap<Key, Entry>>,
    failures: Mutex<HashMap<Key, u32>>,
    /// What the watches of pods and claims said, for every platform.
    watched: Arc<Watched>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Context {
    fn platform(&self, namespace: &str) -> Arc<KubePlatform> {
        let mut platforms = lock(&self.platforms);
        let p = platforms.entry(namespace.to_string()).or_insert_with(|| {
            let p = KubePlatform::new(self.client.clone(), namespace, &self.image)
                .with_watched(self.watched.clone());
            Arc::new(
                p.with_backup_image(self.backup_image.clone())
                    .with_scratch(self.scratch.clone()),
            )
        });
        p.clone()
    }

    /// The entry of `key`, new when there is none or it is of another uid.
    fn managed(&self, key: &Key, uid: &str) -> Arc<tokio::sync::Mutex<Managed>> {
        let mut clusters = lock(&self.clusters);
        if let Some((known, m)) = clusters.get(key) {
            if known == uid {
                return m.clone();
            }
            tracing::info!(namespace = %key.0, cluster = %key.1, "a new resource of the same name");
        }
        let m = Arc::new(tokio::sync::Mutex::new(Managed {
            cluster: None,
            reported: None,
        }));
        clusters.insert(key.clone(), (uid.to_string(), m.clone()));
        m
    }

    fn forget(&self, key: &Key) {
        if lock(&self.clusters).remove(key).is_some() {
            tracing::info!(namespace = %key.0, cluster = %key.1, "resource deleted; its objects go with it");
        }
        lock(&self.failures).remove(key);
        self.metrics.cluster(&key.0, &key.1).forget();
        if let Some(p) = lock(&self.platforms).get(&key.0) {
            p.forget(&key.1);
        }
    }
}

#[tracing::instrument(name = "resource", skip_all, fields(namespace = %obj.namespace().unwrap_or_default()))]
async fn reconcile(obj: Arc<EtcdCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let name = obj.name_any();
    let namespace = obj
        .namespace()
        .ok_or_else(|| Error::Incomplete(name.clone(), "namespace"))?;
    let uid = obj
        .uid()
        .ok_or_else(|| Error::Incomplete(name.clone(), "uid"))?;
    let key = (namespace.clone(), name.clone());
    if obj.metadata.deletion_timestamp.is_some() {
        ctx.forget(&key);
        return Ok(Action::await_change());
    }
    let platform = ctx.platform(&namespace);
    let managed = ctx.managed(&key, &uid);
    let mut m = managed.lock().await;
    // A name that is no valid cluster name gets nothing named after it (no
    // record, no pods, no Services): only its own status and an Event.
    if let Err(e) = check_cluster_name(&name) {
        let message = format!("metadata.name: {e}");
        if m.reported.as_ref() != Some(&message) {
            report_invalid(&ctx.recorder, &obj, &message).await;
            platform
                .save_status(&name, &super::status::refused(&obj, &message))
                .await?;
            m.reported = Some(message);
        }
        return Ok(Action::await_change());
    }
    let spec = spec_state(&obj);
    match &spec {
        SpecState::Invalid { message, .. } if m.reported.as_ref() != Some(message) => {
            report_invalid(&ctx.recorder, &obj, message).await;
            m.reported = Some(message.clone());
        }
        SpecState::Invalid { .. } => {}
        SpecState::Valid { .. } => m.reported = None,
    }
    // Either way the platform takes the resource first (Platform::prepare).
    if let Some(cluster) = m.cluster.as_mut() {
        cluster.set_spec(spec).await?;
    } else {
        let clients = ctx.clients.clone();
        let mut cluster = Cluster::new(&name, platform.clone(), clients, spec).await?;
        cluster.set_handover(ctx.handover);
        cluster.set_metrics(ctx.metrics.cluster(&namespace, &name));
        m.cluster = Some(cluster);
    }
    let Some(cluster) = m.cluster.as_mut() else {
        return Ok(Action::requeue(MIN_POLL));
    };
    let out = cluster.reconcile().await;
    lock(&ctx.failures).remove(&key);
    Ok(Action::requeue(requeue_after(out.next)))
}

pub use crate::kube_names::{NOTE_MAX_BYTES, event_note};

async fn report_invalid(recorder: &Recorder, obj: &EtcdCluster, message: &str) {
    let event = Event {
        type_: EventType::Warning,
        reason: "InvalidSpec".into(),
        note: Some(event_note(message)),
        action: "Validate".into(),
        secondary: None,
    };
    if crate::fence::check().is_err() {
        return;
    }
    if let Err(e) = recorder.publish(&event, &obj.object_ref(&())).await {
        tracing::warn!(cluster = %obj.name_any(), "cannot publish an event: {e}");
    }
}

fn error_policy(obj: Arc<EtcdCluster>, err: &Error, ctx: Arc<Context>) -> Action {
    let key = (obj.namespace().unwrap_or_default(), obj.name_any());
    let mut failures = lock(&ctx.failures);
    let n = failures.entry(key).or_default();
    *n = n.saturating_add(1);
    let wait = backoff(*n);
    tracing::warn!(cluster = %obj.name_any(), category = err.category(), retry = ?wait, "reconcile failed: {err}");
    Action::requeue(wait)
}

/// What to say when the operator does not run in a pod (no
/// `KUBERNETES_SERVICE_HOST`, which the kubelet sets in every container):
/// it reaches members at their pod IPs, which only some networks route to
/// machines outside the cluster, so say how to tell and what to do.
pub fn outside_cluster_warning(service_host: Option<&str>) -> Option<String> {
    if service_host.is_some_and(|h| !h.trim().is_empty()) {
        return None;
    }
    Some(
        "not running in a pod: etcd members are called at their pod IPs. That works where pod \
         IPs are routed to this machine (a flat or VPC-native pod network); where they are not \
         (a kind cluster seen from its host, most overlay networks) members look down and \
         clusters show as Degraded with no member ready. To check, call a member's pod IP \
         from here (`kubectl get pods -o wide`, then `curl http://POD_IP:2379/health`); if it \
         does not answer, run the operator in the cluster (deploy/base/operator.yaml)"
            .to_string(),
    )
}

/// Runs until `shutdown` resolves (then lets running reconciles finish).
/// Members keep running after it returns.
pub async fn run(
    client: Client,
    opts: Options,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    // Owned objects are watched for their metadata only.
    type Meta<K> = PartialObjectMeta<K>;
    let (api, pods, claims) = match &opts.namespace {
        Some(ns) => (
            Api::<EtcdCluster>::namespaced(client.clone(), ns),
            Api::<Meta<Pod>>::namespaced(client.clone(), ns),
            Api::<Meta<PersistentVolumeClaim>>::namespaced(client.clone(), ns),
        ),
        None => (
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client.clone()),
        ),
    };
    let ctx = Arc::new(Context {
        client: client.clone(),
        image: opts.image.clone(),
        backup_image: opts.backup_image.clone(),
        handover: opts.handover,
        scratch: opts.scratch.clone(),
        metrics: opts.metrics.clone(),
        clients: Arc::new(Clients::new(STATUS_TIMEOUT)),
        recorder: Recorder::new(client, Reporter::from(MANAGER)),
        platforms: Mutex::default(),
        clusters: Mutex::default(),
        failures: Mutex::default(),
        watched: Arc::default(),
    });
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(());
    });
    let owned = || watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGED_BY}"));
    let service_host = std::env::var("KUBERNETES_SERVICE_HOST").ok();
    if let Some(warning) = outside_cluster_warning(service_host.as_deref()) {
        tracing::warn!("{warning}");
    }
    tracing::info!(
        namespace = opts.namespace.as_deref().unwrap_or("(all)"),
        image = %opts.image,
        "etcd-operator running on the Kubernetes platform"
    );
    let health = opts.health.clone();
    match api.list(&kube::api::ListParams::default().limit(1)).await {
        Ok(_) => health.ready(),
        Err(e) => {
            let why = format!(
                "cannot list EtcdCluster resources (is deploy/base/crd.yaml applied?): {e}"
            );
            tracing::warn!("{why}");
            health.not_ready(why);
        }
    }
    let for_each_ctx = ctx.clone();
    // Each watch backs off on its own and lists again at once when it
    // expires (watch.rs); the controller adds no pause of its own.
    let (reader, writer) = reflector::store();
    let resources = watch::with_backoff(watcher(api, watcher::Config::default()))
        .reflect(writer)
        .applied_objects();
    // Each event is told to the platforms before it wakes a reconcile.
    let seen = ctx.watched.clone();
    let pods = watcher(pods, owned()).inspect(move |e| seen.saw(Watch::Pods, e));
    let pods = watch::with_backoff(pods).touched_objects();
    let seen = ctx.watched.clone();
    let claims = watcher(claims, owned()).inspect(move |e| seen.saw(Watch::Claims, e));
    let claims = watch::with_backoff(claims).touched_objects();
    Controller::for_stream(resources, reader)
        .owns_stream(pods)
        .owns_stream(claims)
        .trigger_backoff(watch::Immediate)
        .graceful_shutdown_on(async move {
            let _ = stop_rx.await;
        })
        .run(reconcile, error_policy, ctx)
        .for_each(|res| {
            let ctx = for_each_ctx.clone();
            let health = health.clone();
            async move {
                match res {
                    Ok(_) => health.ready(),
                    Err(controller::Error::ObjectNotFound(r)) => {
                        ctx.forget(&(r.namespace.unwrap_or_default(), r.name));
                    }
                    // Logged by error_policy already.
                    Err(e @ controller::Error::ReconcilerFailed(..)) => {
                        tracing::debug!("controller: {e}")
                    }
                    // Watches failing: RBAC, a missing CRD, the API away.
                    Err(e) => {
                        tracing::warn!("controller: {e}");
                        health.not_ready(format!("the watches fail: {e}"));
                    }
                }
            }
        })
        .await;
    tracing::info!("shutting down; etcd members keep running");
    Ok(())
}

#[cfg(test)]
mod tests;
