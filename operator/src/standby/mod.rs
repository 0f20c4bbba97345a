//! A standby cluster (`spec.standby`): created from its source's newest
//! good full backup (with the chain replayed, as a restore is) and kept up
//! from the source's chain of delta segments as they appear in the
//! source's backup location, revision for revision: each source revision
//! is one transaction here ([`apply`]), so this cluster's revision is the
//! source's at the point applied, and its KV hash at revision R is the
//! source's (`HashKV`, when neither has compacted differently and the
//! source uses no leases: leases are not carried).
//!
//! The applier is a task of its own, as the backup schedule is. Each pass it
//! asks a ready member for the standby's revision R (the standby's own
//! word: a member killed, an operator restarted, nothing is applied
//! twice), finds in the store the chain that holds R + 1 ([`source`]) and
//! applies what follows. Before applying after a (re)connection it checks
//! that revision R here is the source's R; a transaction that lands at any
//! other revision than the source's means something else wrote here: it
//! says `Diverged` and applies nothing more. The source's location is only
//! read, never written.
//!
//! Promoting applies what the store still holds, stops following and
//! says the last revision applied and when the source wrote it.

pub mod apply;
pub mod source;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::backup::{BackupStore, Candidate, Location, task};
use crate::crd::StandbyStatus;

/// How often the store is looked at while the standby is up to date (a
/// listing of the source's backups each time).
pub const POLL: Duration = Duration::from_millis(500);

/// The states a standby is in ([`StandbyStatus::state`]).
pub mod state {
    /// Applying the source's changes as they appear.
    pub const FOLLOWING: &str = "Following";
    /// It cannot go on (a gap in the source's chains, another source).
    pub const STOPPED: &str = "Stopped";
    /// Something other than the applier changed it.
    pub const DIVERGED: &str = "Diverged";
    /// Applying what is left before it is promoted.
    pub const PROMOTING: &str = "Promoting";
    /// A cluster of its own.
    pub const PROMOTED: &str = "Promoted";
}

/// A running applier. Dropping it stops the task.
#[derive(Debug)]
pub struct Applier {
    source: Location,
    candidates: watch::Sender<Vec<Candidate>>,
    promote: watch::Sender<bool>,
    status: Arc<Mutex<StandbyStatus>>,
    task: JoinHandle<()>,
}

impl Applier {
    /// Starts following `source` (the source cluster's backups) into the
    /// members offered, from `status` (the source's uid pinned in it).
    pub fn start<S: BackupStore>(store: Arc<S>, source: Location, status: StandbyStatus) -> Self {
        let (candidates, offered) = watch::channel(Vec::new());
        let (promote, promoting) = watch::channel(false);
        let status = Arc::new(Mutex::new(status));
        let span =
            tracing::info_span!("standby", cluster = %source.cluster, source = %source.owner());
        let task = tokio::spawn(tracing::Instrument::instrument(
            run(
                store,
                source.clone(),
                offered,
                promoting,
                Arc::clone(&status),
            ),
            span,
        ));
        Applier {
            source,
            candidates,
            promote,
            status,
            task,
        }
    }

    /// Whether this applier follows `source` (a promoted one is done).
    pub fn follows(&self, source: &Location) -> bool {
        self.source == *source
    }

    /// Whether it is done: promoted.
    pub fn promoted(&self) -> bool {
        self.status().state == state::PROMOTED
    }

    /// Whether it was asked to promote and is not done yet.
    pub fn promoting(&self) -> bool {
        *self.promote.borrow() && !self.promoted()
    }

    /// The members it may apply through, preferred first.
    pub fn offer(&self, candidates: Vec<Candidate>) {
        self.candidates.send_if_modified(|c| {
            let changed = *c != candidates;
            *c = candidates;
            changed
        });
    }

    /// Asks it to apply what the store holds and stop: the cluster goes on
    /// alone.
    pub fn promote(&self) {
        let _ = self.promote.send(true);
    }

    /// Where it stands.
    pub fn status(&self) -> StandbyStatus {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for Applier {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Changes the shared status.
fn update(status: &Mutex<StandbyStatus>, f: impl FnOnce(&mut StandbyStatus)) {
    f(&mut status.lock().unwrap_or_else(|e| e.into_inner()));
}

/// The applier's loop, until promoted (or aborted).
async fn run<S: BackupStore>(
    store: Arc<S>,
    source: Location,
    offered: watch::Receiver<Vec<Candidate>>,
    mut promoting: watch::Receiver<bool>,
    status: Arc<Mutex<StandbyStatus>>,
) {
    let mut sources = task::Sources::new(offered);
    // Set once the standby's revision was checked against the source's
    // through the member in use (again after each failure).
    let mut checked = false;
    // The end of the chain read last (only what follows is read next).
    let mut cache = None;
    loop {
        let promote = *promoting.borrow_and_update();
        if promote {
            update(&status, |s| s.state = state::PROMOTING.into());
        }
        let (pinned, diverged) = {
            let s = status.lock().unwrap_or_else(|e| e.into_inner());
            (s.source_uid.clone(), s.state == state::DIVERGED)
        };
        // Diverged: nothing is ever applied again (only a promotion ends it).
        let pass = if diverged {
            None
        } else {
            let Some(member) = sources.pick().await else {
                continue;
            };
            let state = (&mut checked, &mut cache);
            Some(apply::pass(&*store, &source, pinned.as_deref(), &member, state).await)
        };
        let stopped = match pass {
            None => true,
            Some(pass) => match pass {
                Ok(p) => {
                    update(&status, |s| p.report(s));
                    p.stop.is_some()
                }
                Err(e) => {
                    sources.failed();
                    checked = false;
                    tracing::warn!("following the source failed (will retry): {e}");
                    update(&status, |s| s.message = Some(e.to_string()));
                    false
                }
            },
        };
        let behind = status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .lag_revisions
            > 0;
        if promote && (stopped || !behind) {
            update(&status, |s| {
                s.state = state::PROMOTED.into();
                s.promoted_at = Some(crate::units::rfc3339_ms(crate::backup::follow::now_ms()));
            });
            let s = status.lock().unwrap_or_else(|e| e.into_inner()).clone();
            tracing::info!(
                revision = s.applied_revision, written = ?s.applied_time,
                "promoted: the standby takes writes from now on"
            );
            return;
        }
        if behind && !stopped {
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            _ = promoting.changed() => {}
        }
    }
}
