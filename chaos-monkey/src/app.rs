//! From a [`Config`] to a run on the platform it names.

use std::future::Future;
use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::config::{Config, PlatformConfig};
use crate::faultlog::FaultLog;
use crate::monkey::{self, Error, Summary};
use crate::target::kube::Kube;
use crate::target::local::Local;

/// Runs the monkey on the configured platform until `shutdown`, the
/// duration or the fault budget ends it.
pub async fn execute(
    cfg: &Config,
    log: &mut FaultLog,
    shutdown: impl Future<Output = ()>,
) -> Result<Summary, Error> {
    match &cfg.platform {
        PlatformConfig::Local { state_dir } => {
            monkey::run(&Local::new(state_dir), cfg, log, shutdown).await
        }
        PlatformConfig::Kube {
            kubeconfig,
            namespace,
            selector,
        } => {
            let client = kube_client(kubeconfig.as_deref()).await?;
            let kube = Kube::new(client, namespace.clone(), selector.clone());
            monkey::run(&kube, cfg, log, shutdown).await
        }
    }
}

/// `--cleanup`: removes what monkeys that are gone left behind (local:
/// members and the operator left paused, resumed unless another monkey
/// runs on the state folder; the object stores they paused, from their
/// records in STATE/chaos-monkey/; the
/// kernel rules and cgroups recorded under /run/chaos-monkey and
/// chains named after a gone pid, the clocks they shifted (original vDSO
/// code written back), their slow-disk blkio cgroups; kube: every NetworkPolicy the monkey made
/// in the namespace). Returns a line per thing removed.
pub async fn cleanup(args: &crate::cli::Args) -> Result<Vec<String>, Error> {
    match args.platform {
        crate::cli::Platform::Local => {
            let mut done = crate::clock::cleanup()
                .map_err(|e| Error::Platform(crate::target::Error::Unsupported(e.to_string())))?;
            if std::path::Path::new(crate::disk::slow::BLKIO_ROOT).is_dir() {
                done.extend(crate::disk::slow::cleanup().map_err(|e| {
                    Error::Platform(crate::target::Error::Unsupported(e.to_string()))
                })?);
            }
            crate::net::sys::preflight().map_err(|e| Error::BadInput(e.to_string()))?;
            done.extend(crate::net::cleanup().map_err(|e| Error::Platform(e.into()))?);
            let others = crate::target::local::paused::other_monkeys(&args.state_dir);
            let layout = etcd_operator::platform::local::layout::Layout::new(&args.state_dir);
            done.extend(crate::target::local::paused::resume(&layout, &others));
            done.extend(crate::target::local::store::cleanup(&args.state_dir));
            Ok(done)
        }
        crate::cli::Platform::Kube => {
            let client = kube_client(args.kubeconfig.as_deref()).await?;
            let kube = Kube::new(client, args.namespace.clone(), args.selector.clone());
            let names = kube.cleanup().await?;
            Ok(names
                .into_iter()
                .map(|n| format!("deleted NetworkPolicy {}/{n}", kube.namespace()))
                .collect())
        }
    }
}

/// A client from `path`, or from the usual places (`$KUBECONFIG`,
/// `~/.kube/config`, the in-cluster service account).
pub async fn kube_client(path: Option<&Path>) -> Result<kube::Client, Error> {
    let config = match path {
        Some(p) => {
            let kc = Kubeconfig::read_from(p)
                .map_err(|e| Error::Connect(format!("--kubeconfig {}: {e}", p.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| Error::Connect(format!("--kubeconfig {}: {e}", p.display())))?
        }
        None => kube::Config::infer().await.map_err(|e| {
            Error::Connect(format!(
                "no Kubernetes configuration found (pass --kubeconfig): {e}"
            ))
        })?,
    };
    etcd_operator::tls::install_crypto_provider();
    kube::Client::try_from(config)
        .map_err(|e| Error::Connect(format!("cannot build a Kubernetes client: {e}")))
}
