//! The Kubernetes controller behind leader election: a replica waits for
//! the Lease (a standby meanwhile, `/readyz` naming the holder), runs the
//! controller only while it holds it, stops at once when it loses it, and
//! releases it on shutdown so another replica takes over without waiting
//! for it to expire.

use std::future::Future;
use std::time::Duration;

use futures::FutureExt;
use kube::Client;

use super::lease::{Elector, Lost};
use super::{Error, Options};

/// How an elected run ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Shut down as asked (the Lease released when it was ours).
    Shutdown,
    /// This replica stopped leading; its controller was stopped at once.
    Lost(Lost),
}

/// Longest wait for the release on shutdown.
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// Runs [`super::run`] while `elector` holds the Lease, until `shutdown`
/// completes or the Lease is lost.
pub async fn run(
    client: Client,
    opts: Options,
    elector: Elector,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Ended, Error> {
    let shutdown = shutdown.boxed().shared();
    let health = opts.health.clone();
    // From here every write needs a lease this replica can count on.
    crate::fence::elect();
    tracing::info!(lease = %elector.lease(), identity = %elector.identity(),
        "leader election: waiting to lead");
    tokio::select! {
        () = elector.acquire(&health) => {}
        () = shutdown.clone() => return Ok(Ended::Shutdown),
    }
    let controller = super::run(client, opts, shutdown);
    tokio::select! {
        done = controller => {
            done?;
            release(&elector).await;
            Ok(Ended::Shutdown)
        }
        lost = elector.hold() => {
            // Dropping the controller's future stops every reconcile now.
            tracing::error!(lease = %elector.lease(),
                "leader election: {lost}; this replica stopped reconciling");
            health.not_ready(format!("not the leader any more: {lost}"));
            Ok(Ended::Lost(lost))
        }
    }
}

async fn release(elector: &Elector) {
    match tokio::time::timeout(RELEASE_WAIT, elector.release()).await {
        Ok(Ok(())) => tracing::info!(lease = %elector.lease(), "leader election: lease released"),
        Ok(Err(e)) => tracing::warn!("leader election: cannot release: {e}; it expires instead"),
        Err(_) => tracing::warn!(
            "leader election: no answer releasing {} within {RELEASE_WAIT:?}; it expires instead",
            elector.lease()
        ),
    }
}
