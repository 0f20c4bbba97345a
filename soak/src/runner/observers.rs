//! What watches the cluster while it runs: probes and KV hash
//! checkpoints (one task set, one stop token) and the watchers (another,
//! stopped after they caught up with the final read-back).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::Options;
use super::platform::Platform;
use crate::client::Pool;
use crate::ops::Clock;
use crate::probe::{self, Prober, Recorder, SharedRecorder};

/// Watchers on the key space during a run (half from revision 1, half
/// from the revision current when they start).
pub(super) const WATCHERS: u32 = 2;
/// Longest the watchers get to catch up with the final read-back.
const CATCH_UP: Duration = Duration::from_secs(30);

/// What watches the cluster while it runs.
pub(super) struct Observers {
    pub pool: Arc<Pool>,
    pub prober: Arc<Prober>,
    pub rec: SharedRecorder,
    pub endpoints: watch::Receiver<Vec<String>>,
    probes: (CancellationToken, JoinSet<()>),
    watchers: (CancellationToken, JoinSet<()>, Vec<crate::watch::Shared>),
}

impl Observers {
    pub fn start(o: &Options, platform: &Platform, clock: Clock) -> Observers {
        let s = &o.scenario;
        let status = platform.status();
        let pool = Arc::new(Pool::new());
        pool.set_tls(platform.tls_for());
        let prober = Arc::new(Prober::new(
            pool.clone(),
            s.probe.timeout.get(),
            status.clone(),
            platform.url_map(),
            s.cluster.members(),
        ));
        let rec = Arc::new(std::sync::Mutex::new(Recorder::default()));
        let initial: Vec<String> = status()
            .and_then(|c| c.status)
            .map(|st| {
                st.members
                    .iter()
                    .map(|m| (platform.url_map())(&m.client_url))
                    .collect()
            })
            .unwrap_or_default();
        let (eps_tx, endpoints) = watch::channel(initial);
        let stop = CancellationToken::new();
        let mut tasks = JoinSet::new();
        tasks.spawn(probe::run(
            prober.clone(),
            rec.clone(),
            s.probe.interval.get(),
            eps_tx,
            stop.clone(),
        ));
        tasks.spawn(probe::checkpoints(
            prober.clone(),
            rec.clone(),
            s.probe.checkpoint_interval.get(),
            stop.clone(),
        ));
        let wstop = CancellationToken::new();
        let mut wtasks = JoinSet::new();
        let traces = crate::watch::start(
            WATCHERS,
            endpoints.clone(),
            clock,
            wstop.clone(),
            &mut wtasks,
            platform.tls_for(),
        );
        Observers {
            pool,
            prober,
            rec,
            endpoints,
            probes: (stop, tasks),
            watchers: (wstop, wtasks, traces),
        }
    }

    /// Waits (bounded) until every watcher got events up to `rev`.
    pub async fn catch_up(&self, rev: i64) {
        let deadline = Instant::now() + CATCH_UP;
        while Instant::now() < deadline
            && !self
                .watchers
                .2
                .iter()
                .all(|t| crate::watch::lock(t).last >= rev)
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops the watchers and then the probes; returns the traces.
    pub async fn stop(&mut self) -> Vec<crate::watch::Trace> {
        self.watchers.0.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), async {
            while self.watchers.1.join_next().await.is_some() {}
        })
        .await;
        self.probes.0.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(30), async {
            while self.probes.1.join_next().await.is_some() {}
        })
        .await;
        self.watchers
            .2
            .iter()
            .map(|t| crate::watch::lock(t).clone())
            .collect()
    }
}
