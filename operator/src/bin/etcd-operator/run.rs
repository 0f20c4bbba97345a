//! `run`: the operator itself, on the local platform (etcd processes on
//! loopback addresses, driven by a folder of manifests) or on Kubernetes
//! (pods, driven by EtcdCluster resources, behind leader election).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::ValueEnum;
use etcd_operator::controller::kube::{elected, lease};
use etcd_operator::controller::local;
use etcd_operator::kube_names::check_object_name;
use etcd_operator::metrics::Metrics;
use etcd_operator::metrics::server::{self, Health};
use etcd_operator::platform::local::binaries::Binaries;

use crate::deleted;

#[derive(clap::Args, Debug)]
pub(crate) struct RunArgs {
    /// Where members run. `local`: etcd processes on loopback addresses.
    /// `kube`: pods, driven by EtcdCluster resources (in-cluster config or
    /// kubeconfig).
    #[arg(
        long,
        value_enum,
        default_value = "local",
        env = "ETCD_OPERATOR_PLATFORM"
    )]
    platform: PlatformKind,
    /// Folder of EtcdCluster YAML files (local platform). Adding a file
    /// creates a cluster, editing it changes the cluster, deleting it
    /// deletes the cluster (after --delete-grace).
    #[arg(long, env = "ETCD_OPERATOR_MANIFESTS")]
    manifests: Option<PathBuf>,
    /// Folder for members' data and logs, and the operator's records
    /// (local platform); on Kubernetes, a writable folder where standbys
    /// stage what they read of their sources' buckets
    /// (deploy/base/operator.yaml mounts an emptyDir there).
    #[arg(long, default_value = ".state", env = "ETCD_OPERATOR_STATE_DIR")]
    state_dir: PathBuf,
    /// Folders holding etcd binaries as VERSION/etcd (repeatable); `etcd`
    /// on PATH is used too when its version matches.
    #[arg(
        long = "etcd-binaries",
        env = "ETCD_OPERATOR_BINARIES",
        value_delimiter = ':',
        default_value = ".etcd"
    )]
    etcd_binaries: Vec<PathBuf>,
    /// Namespace whose EtcdCluster resources are managed (kube platform);
    /// all namespaces when not set.
    #[arg(long, env = "ETCD_OPERATOR_NAMESPACE")]
    namespace: Option<String>,
    /// etcd image repository (kube platform); members run IMAGE:vVERSION.
    #[arg(
        long,
        default_value = etcd_operator::platform::kube::pod::DEFAULT_IMAGE,
        env = "ETCD_OPERATOR_ETCD_IMAGE"
    )]
    etcd_image: String,
    /// The operator's own image (kube platform), which backup Jobs run:
    /// it carries `etcd-operator backup-job` and the etcd tools that check
    /// snapshots. Backups on Kubernetes need it; deploy/base/operator.yaml sets
    /// it to the image it runs.
    #[arg(long, env = "ETCD_OPERATOR_BACKUP_IMAGE")]
    backup_image: Option<String>,
    /// Restart or remove a leader without handing its leadership over to
    /// another voter first, so each such step costs an election (about an
    /// election timeout without a leader). Only for benchmarks that
    /// measure what the handover saves.
    #[arg(long, env = "ETCD_OPERATOR_NO_LEADER_HANDOVER")]
    no_leader_handover: bool,
    /// Local platform: how long the folder of a deleted cluster (its
    /// manifest removed) is kept aside in STATE/deleted/, data included,
    /// before it is purged (`etcd-operator deleted` lists them,
    /// `undelete` puts one back). At most ten years.
    #[arg(long, default_value = "7d", value_parser = deleted::keep_deleted, env = "ETCD_OPERATOR_KEEP_DELETED")]
    keep_deleted: std::time::Duration,
    /// Local platform: how long a cluster's manifest must be gone before
    /// the cluster is deleted. Meanwhile it keeps running as its last
    /// manifest said, `status` shows the condition DeletionPending with
    /// the time the deletion takes effect, and a manifest naming it again
    /// (an editor's save that deletes and writes the file, a tool that
    /// rewrites the folder) cancels the deletion. `etcd-operator delete
    /// NAME` waits for no grace. 0s to 24h.
    #[arg(long, default_value = "10s", value_parser = deleted::delete_grace, env = "ETCD_OPERATOR_DELETE_GRACE")]
    delete_grace: std::time::Duration,
    /// Leader election between operator replicas (kube platform): only
    /// the replica holding the coordination.k8s.io Lease reconciles; the
    /// others wait, not ready. `false` only for a single replica.
    #[arg(
        long,
        env = "ETCD_OPERATOR_LEADER_ELECTION",
        default_value_t = true,
        action = clap::ArgAction::Set,
        value_name = "BOOL"
    )]
    leader_election: bool,
    /// The Lease's name (kube platform, with --leader-election).
    #[arg(long, env = "ETCD_OPERATOR_LEASE_NAME", default_value = etcd_operator::controller::kube::lease::DEFAULT_NAME)]
    lease_name: String,
    /// The Lease's namespace (kube platform): default --namespace, else the
    /// operator's own (in-cluster) or the kubeconfig context's.
    #[arg(long, env = "ETCD_OPERATOR_LEASE_NAMESPACE")]
    lease_namespace: Option<String>,
    /// Serve /metrics (Prometheus, OpenMetrics text), /healthz and /readyz
    /// on this address, e.g. `0.0.0.0:8080` in a pod or `127.0.0.1:9090`
    /// locally (port 0: any free port; the local platform writes the one
    /// bound to STATE/metrics-addr). Not served when unset.
    #[arg(long, env = "ETCD_OPERATOR_METRICS_ADDR", value_name = "HOST:PORT")]
    metrics_addr: Option<std::net::SocketAddr>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum PlatformKind {
    Local,
    Kube,
}

pub(crate) fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    if args.platform == PlatformKind::Kube {
        return run_kube(args);
    }
    let Some(manifests) = args.manifests else {
        eprintln!(
            "error: --manifests DIR is required with --platform local (a folder of EtcdCluster YAML files)"
        );
        return Ok(ExitCode::from(2));
    };
    let rt = etcd_operator::cli::runtime().context("cannot start the async runtime")?;
    rt.block_on(async {
        let (metrics, health) = (Arc::<Metrics>::default(), Arc::<Health>::default());
        let metrics_addr = match serve_metrics(args.metrics_addr, &metrics, &health).await {
            Ok(a) => a,
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(ExitCode::from(2));
            }
        };
        let opts = local::Options {
            manifests,
            state_dir: args.state_dir,
            binaries: Arc::new(Binaries::new(args.etcd_binaries)),
            handover: !args.no_leader_handover,
            metrics,
            health,
            metrics_addr,
            keep_deleted: args.keep_deleted,
            delete_grace: args.delete_grace,
        };
        match local::run(opts, shutdown_signal()).await {
            Ok(()) => Ok(ExitCode::SUCCESS),
            Err(e @ local::Error::NoManifests(_)) => {
                eprintln!("error: {e}");
                Ok(ExitCode::from(2))
            }
            Err(e) => Err(anyhow::Error::new(e)),
        }
    })
}

/// Serves /metrics, /healthz and /readyz when asked; the address bound.
async fn serve_metrics(
    addr: Option<std::net::SocketAddr>,
    metrics: &Arc<Metrics>,
    health: &Arc<Health>,
) -> Result<Option<std::net::SocketAddr>, server::Error> {
    match addr {
        Some(a) => Ok(Some(
            server::serve(a, metrics.clone(), health.clone()).await?,
        )),
        None => Ok(None),
    }
}

fn run_kube(args: RunArgs) -> anyhow::Result<ExitCode> {
    let rt = etcd_operator::cli::runtime().context("cannot start the async runtime")?;
    rt.block_on(async {
        let (metrics, health) = (Arc::<Metrics>::default(), Arc::<Health>::default());
        if let Err(e) = serve_metrics(args.metrics_addr, &metrics, &health).await {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
        let lease_flags = [
            ("--lease-name", Some(&args.lease_name)),
            ("--lease-namespace", args.lease_namespace.as_ref()),
        ];
        for (flag, value) in lease_flags {
            if let Some(Err(e)) = value.map(|v| check_object_name(v)) {
                eprintln!("error: {flag}: {e}");
                return Ok(ExitCode::from(2));
            }
        }
        let lease_namespace = args.lease_namespace.clone().or(args.namespace.clone());
        let opts = etcd_operator::controller::kube::Options {
            namespace: args.namespace,
            image: args.etcd_image,
            backup_image: args.backup_image,
            handover: !args.no_leader_handover,
            scratch: Some(args.state_dir.clone()),
            metrics,
            health,
        };
        let client = kube::Client::try_default()
            .await
            .context("cannot reach Kubernetes (no in-cluster config and no usable kubeconfig)")?;
        if !args.leader_election {
            etcd_operator::controller::kube::run(client, opts, shutdown_signal()).await?;
            return Ok(ExitCode::SUCCESS);
        }
        let namespace = lease_namespace.unwrap_or_else(|| client.default_namespace().to_string());
        let (name, me) = (&args.lease_name, lease::identity());
        let elector =
            lease::Elector::new(client.clone(), &namespace, name, &me, Default::default());
        match elected::run(client, opts, elector, shutdown_signal()).await? {
            elected::Ended::Shutdown => Ok(ExitCode::SUCCESS),
            // The Deployment restarts it; it then waits as a standby.
            elected::Ended::Lost(lost) => {
                eprintln!("error: leader election: {lost}; exiting to restart as a standby");
                Ok(ExitCode::from(3))
            }
        }
    })
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("cannot listen for SIGTERM: {e}");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
