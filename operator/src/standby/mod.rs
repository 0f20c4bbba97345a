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
//! While it is a standby, clients may read it and not write it: etcd's auth
//! is on, the applier writes as root and clients read as a user that may
//! only read ([`auth`]).
//!
//! Promoting applies what the store still holds, stops following, turns
//! etcd's auth off (the cluster takes everyone's writes) and says the last
//! revision applied and when the source wrote it.

pub mod apply;
pub mod auth;
pub mod pipeline;
mod run;
pub mod source;
pub mod stream;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::backup::{BackupStore, Candidate, Location};
use crate::crd::StandbyStatus;
use crate::etcd::Credentials;
use crate::validate::standby::Stream;

/// How often the store is looked at while the standby is up to date: a
/// read of the next segment by its name, and a listing of the source's
/// backups every [`source::LIST_EVERY`].
pub const POLL: Duration = Duration::from_millis(200);

/// How long the store's chain is followed after the watch failed before
/// the watch is tried again (`spec.standby.stream`).
pub const LIVE_RETRY: Duration = Duration::from_secs(5);
/// Failed passes in a row after which a promotion goes on without the
/// source (neither the store nor its members answer).
pub const PROMOTE_AFTER_FAILURES: u32 = 3;

/// [`StandbyStatus::via`]: the source's changes come from its backups.
pub const VIA_STORE: &str = "store";
/// [`StandbyStatus::via`]: from a live watch of its members.
pub const VIA_STREAM: &str = "stream";

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
    stream: Option<Stream>,
    candidates: watch::Sender<Vec<Candidate>>,
    promote: watch::Sender<bool>,
    status: Arc<Mutex<StandbyStatus>>,
    /// The root credentials while etcd's auth is on.
    auth: Arc<Mutex<Option<Credentials>>>,
    /// The store it reads through (its address: which one, not what).
    store: usize,
    task: JoinHandle<()>,
}

/// Which store `store` is.
fn address<S>(store: &Arc<S>) -> usize {
    Arc::as_ptr(store).cast::<()>() as usize
}

impl Applier {
    /// Starts following `source` (the source cluster's backups, and its
    /// members live when `stream` names them) into the members offered,
    /// from `status` (the source's uid pinned in it); with `secrets`, the
    /// standby refuses clients' writes until promoted ([`auth`]).
    pub fn start<S: BackupStore>(
        store: Arc<S>,
        (source, stream): (Location, Option<Stream>),
        status: StandbyStatus,
        secrets: Option<auth::Secrets>,
    ) -> Self {
        let (candidates, offered) = watch::channel(Vec::new());
        let (promote, promoting) = watch::channel(false);
        let status = Arc::new(Mutex::new(status));
        let auth = Arc::new(Mutex::new(None));
        let reads = address(&store);
        let span =
            tracing::info_span!("standby", cluster = %source.cluster, source = %source.owner());
        let task = tokio::spawn(tracing::Instrument::instrument(
            run::run(
                store,
                (source.clone(), stream.clone()),
                (offered, promoting),
                Arc::clone(&status),
                (secrets, Arc::clone(&auth)),
            ),
            span,
        ));
        Applier {
            source,
            stream,
            candidates,
            promote,
            status,
            auth,
            store: reads,
            task,
        }
    }

    /// The credentials every call to the standby's members carries: root's
    /// while etcd's auth is on there (`None` before it was seen on, and
    /// once promoted).
    pub fn credentials(&self) -> Option<Credentials> {
        held(&self.auth)
    }

    /// Whether this applier follows `source` the way `stream` says (a
    /// promoted one is done).
    pub fn follows(&self, source: &Location, stream: Option<&Stream>) -> bool {
        self.source == *source && self.stream.as_ref() == stream
    }

    /// Whether it reads through `store` (a store opened again, with new
    /// credentials, is another).
    pub fn reads_through<S>(&self, store: &Arc<S>) -> bool {
        self.store == address(store)
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

/// The credentials held in `auth`.
pub(crate) fn held(auth: &Mutex<Option<Credentials>>) -> Option<Credentials> {
    auth.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Changes the shared status.
pub(crate) fn update(status: &Mutex<StandbyStatus>, f: impl FnOnce(&mut StandbyStatus)) {
    f(&mut status.lock().unwrap_or_else(|e| e.into_inner()));
}
