//! The runner: sets up the cluster, runs load, probes and the chaos monkey
//! for the scenario's duration, settles, runs the final checks and tears
//! everything down, also on failure and Ctrl-C.

pub mod chaos;
mod checks;
mod drive;
mod finals;
pub mod forward;
pub mod kube;
pub mod local;
mod monkeys;
mod notes;
mod observers;
mod platform;
mod preflight;
pub mod procs;
mod standby;
mod steps;
pub mod store;
mod store_check;

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::watch;

use self::kube::Kube;
use self::local::Local;
use self::platform::Platform;
pub use self::preflight::{check_binaries, platform_problems};
pub use crate::data::{PlatformKind, RunData};
use crate::history::now_ms;
use crate::scenario::{Scenario, StoreServer};

/// Longest wait for the cluster to be Running at the start.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// Grace of the chaos monkey on SIGTERM (it resumes paused members).
const CHAOS_GRACE: Duration = Duration::from_secs(30);

/// Why a run could not be done.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input, found before anything started.
    #[error("{0}")]
    Setup(String),
    /// The cluster could not be brought up.
    #[error("{0}")]
    Start(String),
    /// A file or folder.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A process could not be started.
    #[error(transparent)]
    Proc(#[from] procs::Error),
    /// A Kubernetes API call failed during the run (after preparation).
    #[error("{0}")]
    Kube(String),
}

/// A run that ended in an error, with what it had recorded until then.
#[derive(Debug)]
pub struct Failure {
    /// What went wrong.
    pub error: Error,
    /// The data recorded before it (the error is among its `errors`), when
    /// the output folder existed: a partial report can be written from it.
    pub partial: Option<Box<RunData>>,
}

impl Failure {
    fn bare(error: Error) -> Self {
        Failure {
            error,
            partial: None,
        }
    }
}

impl Error {
    /// An I/O error.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// The scenario (validated), its duration already overridden.
    pub scenario: Scenario,
    /// Its file.
    pub scenario_file: PathBuf,
    /// Platform.
    pub platform: PlatformKind,
    /// Output folder.
    pub out: PathBuf,
    /// Seed override for chaos and load.
    pub seed: Option<u64>,
    /// The etcd-operator binary (local).
    pub operator_bin: PathBuf,
    /// The chaos-monkey binary.
    pub chaos_bin: PathBuf,
    /// Folder of etcd binaries as VERSION/etcd (local).
    pub etcd_binaries: PathBuf,
    /// Work folder (local); a temporary one when `None`.
    pub work_dir: Option<PathBuf>,
    /// Kubeconfig (kube).
    pub kubeconfig: Option<PathBuf>,
    /// Namespace (kube).
    pub namespace: String,
    /// Live display on a terminal.
    pub tty: bool,
    /// A deliberately broken client (to show the soak catches it).
    pub sabotage: Option<crate::load::Sabotage>,
}

/// Runs a scenario. `interrupted` turns true on Ctrl-C or SIGTERM: the run
/// stops early, tears down and still reports. On an error the run is torn
/// down too, and what it recorded until then comes with the error.
pub async fn run(o: &Options, interrupted: watch::Receiver<bool>) -> Result<RunData, Failure> {
    check_binaries(o).map_err(Failure::bare)?;
    std::fs::create_dir_all(&o.out)
        .map_err(|e| Failure::bare(Error::io(format!("cannot create {}", o.out.display()), e)))?;
    let logs = o.out.join("logs");
    let _ = std::fs::remove_dir_all(&logs);
    monkeys::clear_fault_logs(&o.out);
    let s = &o.scenario;
    let mut data = RunData::new(s.clone(), o.platform, o.seed);
    let fail = |mut data: RunData, error: Error| {
        data.ended = now_ms();
        data.errors.push(format!("the run failed: {error}"));
        Failure {
            error,
            partial: Some(Box::new(data)),
        }
    };
    let kube_only = kube_only_store(&s.cluster);
    let prepared = match o.platform {
        PlatformKind::Local if kube_only.is_some() => Err(Error::Setup(format!(
            "cluster.backup.location.objectStore.{} is for Kubernetes; on the local platform \
             the operator reads its own environment: drop it, or set store: s3 for an S3 \
             server the soak runs",
            kube_only.unwrap_or_default()
        ))),
        PlatformKind::Local => Local::prepare(
            &s.cluster,
            &o.operator_bin,
            &o.etcd_binaries,
            o.work_dir.as_deref(),
            &logs,
        )
        .and_then(|l| match s.store {
            Some(StoreServer::S3) => l.with_store(store::Store::start(&logs)?),
            None => Ok(l),
        })
        .map(|l| Platform::Local(Box::new(l))),
        PlatformKind::Kube if s.store.is_some() => Err(Error::Setup(
            "store: s3 (an S3 server the soak runs) is for the local platform; on Kubernetes \
             name your store in cluster.backup.location.objectStore and drop store"
                .into(),
        )),
        PlatformKind::Kube => {
            Kube::prepare(&s.cluster, o.kubeconfig.as_deref(), &o.namespace, &logs)
                .await
                .map(|k| Platform::Kube(Box::new(k)))
        }
    };
    let mut platform = match prepared {
        Ok(p) => p,
        Err(e) => return Err(fail(data, e)),
    };
    let result = drive::drive(o, &mut platform, &mut data, interrupted).await;
    data.operator_metrics = platform.operator_metrics().await;
    platform.teardown().await;
    data.ended = now_ms();
    match result {
        Ok(()) => Ok(data),
        Err(e) => Err(fail(data, e)),
    }
}

/// The field of the cluster's object store that only Kubernetes takes
/// (a Secret, a service account), if one is set.
fn kube_only_store(cluster: &crate::scenario::ClusterSpec) -> Option<&'static str> {
    let store = cluster
        .spec
        .backup
        .as_ref()?
        .location
        .as_ref()?
        .object_store
        .as_ref()?;
    if store.credentials_secret.is_some() {
        Some("credentialsSecret")
    } else if store.service_account_name.is_some() {
        Some("serviceAccountName")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::kube_only_store;

    #[test]
    fn a_secret_or_a_service_account_is_kubernetes_only() {
        let scenario = |store: &str| {
            let yaml = format!(
                "name: soak\nsize: 3\nversion: \"3.4.23\"\nbackup: {{interval: 1m, maxBackups: 3, \
                 location: {{objectStore: {{url: \"s3://b\"{store}}}}}}}\n"
            );
            etcd_operator::yaml::from_str::<crate::scenario::ClusterSpec>(&yaml).expect("a cluster")
        };
        assert_eq!(kube_only_store(&scenario("")), None);
        assert_eq!(
            kube_only_store(&scenario(", credentialsSecret: k")),
            Some("credentialsSecret")
        );
        assert_eq!(
            kube_only_store(&scenario(", serviceAccountName: a")),
            Some("serviceAccountName")
        );
    }
}
