//! The local controller: a manifests folder in, one task per cluster out.
//!
//! The folder is watched (inotify) and also rescanned every few seconds as a
//! backstop. A cluster is deleted only when no manifest mentions it for
//! `--delete-grace` ([`pending`]: an editor that saves by delete-then-write,
//! a tool that rewrites the folder, must not delete a cluster), and never
//! because the folder could not be read.

mod desired;
pub mod folder;
pub mod pending;
mod restore_check;
mod worker;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Cluster, SpecState};
use crate::etcd::Clients;
use crate::manifest::{self, ParseCache};
use crate::metrics::Metrics;
use crate::metrics::server::Health;
use crate::names::check_cluster_name;
use crate::platform::local::binaries::Binaries;
use crate::platform::local::layout::write_json;
use crate::platform::local::{LocalPlatform, deleted};
use crate::platform::{self, Event, Platform};

use self::worker::{Msg, Worker, fingerprint, work};

pub use self::restore_check::{RestoreChecks, Verdict};

/// Rescan interval when no file event comes.
pub const RESCAN: Duration = Duration::from_secs(3);
/// How often kept deleted clusters are looked at for purging.
const SWEEP_EVERY: Duration = Duration::from_secs(60);
/// Timeout of a member's status call.
pub const STATUS_TIMEOUT: Duration = Duration::from_millis(500);

/// Why the local controller could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The manifests folder does not exist.
    #[error(
        "the manifests folder {0} does not exist: create it (mkdir) and put EtcdCluster YAML files in it"
    )]
    NoManifests(PathBuf),
    /// The folder cannot be watched.
    #[error("cannot watch {path}: {source}")]
    Watch {
        /// The folder.
        path: PathBuf,
        /// The cause.
        source: notify::Error,
    },
    /// The platform failed to open.
    #[error(transparent)]
    Platform(#[from] platform::Error),
}

/// Settings of the local controller.
#[derive(Debug, Clone)]
pub struct Options {
    /// Folder of `EtcdCluster` manifests.
    pub manifests: PathBuf,
    /// State folder (members' data and logs, records, status).
    pub state_dir: PathBuf,
    /// Where etcd binaries are found.
    pub binaries: Arc<Binaries>,
    /// Hand a leader's leadership over before restarting or removing it.
    pub handover: bool,
    /// Where every cluster's metrics go.
    pub metrics: Arc<Metrics>,
    /// What `/readyz` says: ready once the manifests folder was read.
    pub health: Arc<Health>,
    /// The address `/metrics` is served on, if it is: written to
    /// [`metrics_addr_path`] for tools and tests that asked for port 0.
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// How long a deleted cluster's folder is kept aside before it is
    /// purged ([`deleted`]).
    pub keep_deleted: Duration,
    /// How long a cluster's manifest must be gone before the cluster is
    /// deleted ([`pending`]).
    pub delete_grace: Duration,
}

/// Where the local controller writes the address it serves `/metrics` on
/// (removed when it serves none).
pub fn metrics_addr_path(state_dir: &Path) -> PathBuf {
    state_dir.join("metrics-addr")
}

pub use super::live::FileProblem;

/// Where the local controller lists manifest problems for `status`.
pub fn problems_path(state_dir: &Path) -> PathBuf {
    state_dir.join("manifest-problems.json")
}

/// Runs until `shutdown` resolves. Members keep running after it returns.
pub async fn run(
    opts: Options,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), Error> {
    if !opts.manifests.is_dir() {
        return Err(Error::NoManifests(opts.manifests));
    }
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let platform = Arc::new(
        LocalPlatform::open(&opts.state_dir, opts.binaries.clone(), events_tx)?
            .with_keep_deleted(opts.keep_deleted),
    );
    let clients = Arc::new(Clients::new(STATUS_TIMEOUT));
    crate::metrics::server::record_addr(&metrics_addr_path(&opts.state_dir), opts.metrics_addr);
    let problems = Arc::new(std::sync::Mutex::new(Vec::new()));
    let deletions = pending::Deletions::new(opts.delete_grace);
    let server = super::live::serve(
        &opts.state_dir,
        platform.clone(),
        problems.clone(),
        deletions.shown(),
    );
    let (fs_tx, mut fs_events) = mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        // Reading the manifests ourselves raises access events: only
        // changes count.
        if res.is_ok_and(|e| !e.kind.is_access() && !e.kind.is_other()) {
            let _ = fs_tx.send(());
        }
    })
    .map_err(|source| Error::Watch {
        path: opts.manifests.clone(),
        source,
    })?;
    watcher
        .watch(&opts.manifests, RecursiveMode::NonRecursive)
        .map_err(|source| Error::Watch {
            path: opts.manifests.clone(),
            source,
        })?;
    tracing::info!(
        manifests = %opts.manifests.display(),
        state = %opts.state_dir.display(),
        "etcd-operator running on the local platform"
    );
    let (checked_tx, mut checked) = mpsc::unbounded_channel();
    let restores = RestoreChecks::new(opts.binaries.clone(), checked_tx);
    let mut ctl = Local {
        restores,
        opts,
        platform,
        clients,
        workers: HashMap::new(),
        deletions,
        problems_written: None,
        logged: HashSet::new(),
        problems,
        parsed: ParseCache::default(),
        guard: folder::Guard::default(),
        swept: None,
    };
    ctl.rescan().await;
    tokio::pin!(shutdown);
    let mut tick = tokio::time::interval(RESCAN);
    loop {
        // A pending deletion is carried out when its grace is over.
        let due = ctl.deletions.next().map(tokio::time::Instant::from_std);
        tokio::select! {
            () = &mut shutdown => break,
            () = until(due) => ctl.rescan().await,
            Some(()) = fs_events.recv() => {
                // Let a burst of file events (an editor's save) settle.
                tokio::time::sleep(Duration::from_millis(20)).await;
                while fs_events.try_recv().is_ok() {}
                ctl.rescan().await;
            }
            Some(Event::Exited { cluster, member, crashed }) = events.recv() => {
                if let Some(w) = ctl.workers.get(&cluster) {
                    let _ = w.tx.send(Msg::Exited { member, crashed });
                }
            }
            // A restore source's check ended: its cluster may go ahead.
            Some(()) = checked.recv() => {
                while checked.try_recv().is_ok() {}
                ctl.rescan().await;
            }
            _ = tick.tick() => ctl.rescan().await,
        }
    }
    tracing::info!("shutting down; etcd members keep running and are adopted on the next start");
    if let Some(server) = server {
        server.abort();
        let _ = std::fs::remove_file(super::live::socket_path(&ctl.opts.state_dir));
    }
    let tasks: Vec<JoinHandle<()>> = ctl.workers.into_values().map(|w| w.task).collect();
    for t in tasks {
        t.abort();
        let _ = t.await;
    }
    Ok(())
}

/// Completes at `at`, never without one.
async fn until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

struct Local {
    /// Checks of restore sources, off this loop.
    restores: RestoreChecks,
    opts: Options,
    platform: Arc<LocalPlatform>,
    clients: Arc<Clients>,
    workers: HashMap<String, Worker>,
    /// Clusters whose manifest is gone, waiting out `--delete-grace`.
    deletions: pending::Deletions,
    /// What the problems file holds, to rewrite it only on change.
    problems_written: Option<String>,
    /// The manifest problems logged, to log each once while it lasts.
    logged: HashSet<String>,
    /// The problems that name no cluster, for `status` to ask the running
    /// operator ([`super::live`]).
    problems: Arc<std::sync::Mutex<Vec<FileProblem>>>,
    /// Each manifest's parse, kept while its file stands still.
    parsed: ParseCache,
    /// Tells a deletion from a folder problem ([`folder`]).
    guard: folder::Guard,
    /// When kept deleted clusters were last looked at.
    swept: Option<Instant>,
}

impl Local {
    async fn rescan(&mut self) {
        let loaded = match manifest::load_dir_cached(&self.opts.manifests, &mut self.parsed) {
            Ok(l) => l,
            Err(e) => {
                let why = format!(
                    "cannot read {}: {e}; clusters are left as they are",
                    self.opts.manifests.display()
                );
                tracing::error!("{why}");
                self.opts.health.not_ready(why);
                return;
            }
        };
        self.opts.health.ready();
        let (wanted, mut orphan_problems) = self.desired(loaded).await;
        let on_disk: HashSet<String> = self.clusters_on_disk().into_iter().collect();
        let known: HashSet<String> = on_disk.iter().chain(self.workers.keys()).cloned().collect();
        let missing: HashSet<String> = known
            .iter()
            .filter(|n| !wanted.contains_key(*n))
            .cloned()
            .collect();
        let requested = folder::delete_requests(&self.opts.state_dir, &missing);
        let verdict = self
            .guard
            .judge(&self.opts.manifests, &known, &missing, &requested);
        if let Some(problem) = verdict.problem {
            if !self.logged.contains(&problem) {
                tracing::error!("{problem}");
                self.logged.insert(problem.clone());
            }
            orphan_problems.push(FileProblem {
                file: self.opts.manifests.clone(),
                message: problem,
            });
        }
        let problems_file = problems_path(&self.opts.state_dir);
        let print = serde_json::to_string(&orphan_problems).unwrap_or_default();
        *self.problems.lock().unwrap_or_else(|e| e.into_inner()) = orphan_problems.clone();
        if self.problems_written.as_deref() != Some(print.as_str()) {
            match write_json(&problems_file, &orphan_problems) {
                Ok(()) => self.problems_written = Some(print),
                Err(e) => tracing::warn!("cannot write {}: {e}", problems_file.display()),
            }
        }
        self.restores.retain(|c| wanted.contains_key(c));
        for (name, spec) in wanted.iter() {
            self.send(name, spec.clone()).await;
        }
        // A held cluster's grace starts again when it is let go.
        let step = self.deletions.step(
            &verdict.delete,
            &requested,
            Instant::now(),
            std::time::SystemTime::now(),
        );
        for (name, at) in &step.started {
            tracing::info!(
                cluster = %name,
                "no manifest names the cluster: it is deleted at {} (--delete-grace {}) unless a \
                 manifest names it again before; it keeps running meanwhile",
                humantime::format_rfc3339_seconds(*at),
                humantime::format_duration(self.opts.delete_grace)
            );
        }
        for name in step.cancelled.iter().filter(|n| wanted.contains_key(*n)) {
            tracing::info!(
                cluster = %name,
                "a manifest names the cluster again: its deletion is cancelled (it never stopped)"
            );
        }
        for name in step.due {
            self.delete(&name).await;
            let _ = std::fs::remove_file(folder::requests_dir(&self.opts.state_dir).join(&name));
        }
        self.sweep_deleted();
    }

    /// Purges deleted clusters kept past `--keep-deleted` (looked at once
    /// a minute).
    fn sweep_deleted(&mut self) {
        if self.swept.is_some_and(|t| t.elapsed() < SWEEP_EVERY) {
            return;
        }
        self.swept = Some(Instant::now());
        for path in deleted::sweep(self.platform.layout(), std::time::SystemTime::now()) {
            tracing::info!(kept = %path.display(), "a deleted cluster's kept folder ran out: purged");
        }
    }

    /// The clusters that have a folder in the state folder. A folder whose
    /// name is no valid cluster name is not one of ours: it is never
    /// touched (nor deleted).
    fn clusters_on_disk(&self) -> Vec<String> {
        let mut names = self.platform.layout().cluster_names().unwrap_or_default();
        names.retain(|n| check_cluster_name(n).is_ok());
        names
    }

    /// Clusters whose record says they came from `file`.
    async fn clusters_from(&self, file: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for name in self.clusters_on_disk() {
            if let Ok(Some(r)) = self.platform.load_record(&name).await
                && r.source.as_deref() == Some(file)
            {
                out.push(name);
            }
        }
        out
    }

    async fn send(&mut self, name: &str, spec: SpecState) {
        if let Err(e) = check_cluster_name(name) {
            tracing::error!("not managing a cluster: {e}");
            return;
        }
        let print = fingerprint(&spec);
        if let Some(w) = self.workers.get_mut(name)
            && !w.task.is_finished()
        {
            if w.sent != print {
                w.sent = print;
                let _ = w.tx.send(Msg::Spec(Box::new(spec)));
            }
            return;
        }
        let cluster = Cluster::new(name, self.platform.clone(), self.clients.clone(), spec);
        let mut cluster = match cluster.await {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(cluster = %name, "cannot take over the cluster: {e}");
                return;
            }
        };
        cluster.set_handover(self.opts.handover);
        cluster.set_metrics(self.opts.metrics.cluster("", name));
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(work(cluster, rx));
        self.workers.insert(
            name.to_string(),
            Worker {
                tx,
                task,
                sent: print,
            },
        );
    }

    async fn delete(&mut self, name: &str) {
        if let Some(w) = self.workers.remove(name) {
            let _ = w.tx.send(Msg::Delete);
            let _ = w.task.await;
            return;
        }
        tracing::info!(cluster = %name, "no manifest names this cluster: deleting it");
        if let Err(e) = self.platform.delete_cluster(name).await {
            tracing::error!(cluster = %name, "cannot delete the cluster: {e}");
        }
    }
}
