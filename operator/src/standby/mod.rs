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
pub mod source;
pub mod stream;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::backup::{BackupStore, Candidate, Location, task};
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
    task: JoinHandle<()>,
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
        let span =
            tracing::info_span!("standby", cluster = %source.cluster, source = %source.owner());
        let task = tokio::spawn(tracing::Instrument::instrument(
            run(
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
fn held(auth: &Mutex<Option<Credentials>>) -> Option<Credentials> {
    auth.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Waits [`POLL`], or less when a promotion is asked.
async fn pause(promoting: &mut watch::Receiver<bool>) {
    tokio::select! {
        () = tokio::time::sleep(POLL) => {}
        _ = promoting.changed() => {}
    }
}

/// Changes the shared status.
fn update(status: &Mutex<StandbyStatus>, f: impl FnOnce(&mut StandbyStatus)) {
    f(&mut status.lock().unwrap_or_else(|e| e.into_inner()));
}

/// The applier's loop, until promoted (or aborted).
async fn run<S: BackupStore>(
    store: Arc<S>,
    (source, stream): (Location, Option<Stream>),
    (offered, mut promoting): (watch::Receiver<Vec<Candidate>>, watch::Receiver<bool>),
    status: Arc<Mutex<StandbyStatus>>,
    (secrets, auth): (Option<auth::Secrets>, Arc<Mutex<Option<Credentials>>>),
) {
    let mut sources = task::Sources::new(offered);
    // Set once the standby's revision was checked against the source's
    // through the member in use (again after each failure).
    let mut checked = false;
    // The end of the chain read last (only what follows is read next).
    let mut cache = None;
    let pinned_id = status
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .source_cluster_id
        .clone();
    let mut live = stream.map(|s| stream::Live::new(s, pinned_id.as_deref()));
    // Why the watch is not followed now, and when to try it again.
    let mut live_failed: Option<(String, tokio::time::Instant)> = None;
    let mut failures = 0u32;
    // Where the last pass left the standby (`None` after a failure: a pass
    // may have applied part of its revisions before it failed).
    // The store's passes' client of a member (dropped after a failure).
    let mut conn: apply::Conn = None;
    let mut left_at: Option<i64> = None;
    // Whether etcd's auth was found on or off (asked once when promoting
    // before it was ever turned on here).
    let mut auth_known = false;
    loop {
        let promote = *promoting.borrow_and_update();
        if promote {
            update(&status, |s| s.state = state::PROMOTING.into());
        }
        // Asked to promote before it ever turned auth on (an operator
        // restarted with `promote: true`): whether auth is on is asked of
        // etcd, and while it is, every call carries root's credentials.
        if let Some(s) = secrets
            .as_ref()
            .filter(|_| promote && held(&auth).is_none() && !auth_known)
        {
            let Some(member) = sources.pick().await else {
                continue;
            };
            match auth::is_on(&member).await {
                Ok(on) => {
                    auth_known = true;
                    if on {
                        *auth.lock().unwrap_or_else(|e| e.into_inner()) = Some(s.root.clone());
                        conn = None;
                        if let Some(l) = live.as_mut() {
                            l.set_auth(Some(s.root.clone()));
                        }
                    }
                }
                // The pass says why the member does not answer.
                Err(e) => tracing::debug!("promoting: whether auth is on is not known yet: {e}"),
            }
        }
        // Clients may only read a standby: etcd's auth on first.
        if let Some(s) = secrets
            .as_ref()
            .filter(|_| !promote && held(&auth).is_none())
        {
            let Some(member) = sources.pick().await else {
                continue;
            };
            match auth::enable(&member, s).await {
                Ok(turned) => {
                    if turned {
                        tracing::info!("etcd's auth is on: clients read as {}", auth::READER);
                    }
                    *auth.lock().unwrap_or_else(|e| e.into_inner()) = Some(s.root.clone());
                    conn = None;
                    if let Some(l) = live.as_mut() {
                        l.set_auth(Some(s.root.clone()));
                    }
                    update(&status, |st| {
                        st.read_only = Some(true);
                        st.read_user = Some(auth::READER.into());
                        s.reader_place.show(st);
                    });
                }
                Err(e) => {
                    sources.failed();
                    tracing::warn!("cannot make the standby read-only (will retry): {e}");
                    let e = format!("clients' writes are not refused yet: {e}");
                    update(&status, |st| st.message = Some(e));
                    pause(&mut promoting).await;
                    continue;
                }
            }
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
            let now = tokio::time::Instant::now();
            let live_now = live_failed.as_ref().is_none_or(|(_, retry)| now >= *retry);
            let mut streamed = None;
            if let Some(l) = live.as_mut().filter(|_| live_now) {
                match l.pass(&member, &mut checked, left_at).await {
                    Ok(p) => {
                        live_failed = None;
                        let id = l.cluster_id();
                        update(&status, |s| s.source_cluster_id = id);
                        streamed = Some(Ok(p));
                    }
                    Err(stream::Error::Member { member, message }) => {
                        streamed = Some(Err((true, format!("{member}: {message}"))));
                    }
                    Err(stream::Error::Source(why)) => {
                        tracing::warn!("{why}; following the store's chain meanwhile");
                        live_failed = Some((why, now + LIVE_RETRY));
                        checked = false;
                        // It may have applied part of what it read.
                        left_at = None;
                    }
                }
            }
            let pass = match streamed {
                Some(p) => p,
                None => {
                    let state = (&mut checked, &mut cache, left_at);
                    let root = held(&auth);
                    let member = (&member, root.as_ref(), &mut conn);
                    apply::pass(&*store, &source, pinned.as_deref(), member, state)
                        .await
                        .map_err(|e| (matches!(e, apply::Error::Member { .. }), e.to_string()))
                }
            };
            Some(pass)
        };
        let stopped = match pass {
            None => true,
            Some(pass) => match pass {
                Ok(p) => {
                    failures = 0;
                    left_at = Some(p.applied);
                    update(&status, |s| {
                        p.report(s);
                        if let Some((why, _)) = live_failed.as_ref().filter(|_| s.message.is_none())
                        {
                            s.message = Some(why.clone());
                        }
                    });
                    p.stop.is_some()
                }
                Err((member_down, e)) => {
                    failures += 1;
                    left_at = None;
                    conn = None;
                    sources.failed();
                    checked = false;
                    if let Some(l) = live.as_mut() {
                        l.reset();
                    }
                    tracing::warn!("following the source failed (will retry): {e}");
                    update(&status, |s| s.message = Some(e.clone()));
                    if member_down {
                        // The standby does not answer; the source goes on:
                        // the lag says so.
                        apply::lag_from_store(
                            &*store,
                            &source,
                            pinned.as_deref(),
                            &status,
                            &mut cache,
                        )
                        .await;
                    }
                    false
                }
            },
        };
        let behind = status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .lag_revisions
            > 0;
        let unreachable = failures >= PROMOTE_AFTER_FAILURES;
        if promote && (stopped || !behind || unreachable) {
            // Everyone's writes from now on: etcd's auth off.
            if let Some(s) = &secrets {
                let opened = match sources.pick().await {
                    Some(m) => {
                        // What it holds, in its own word, before anyone
                        // else may write.
                        let held = auth::revision(&m, &s.root).await.ok();
                        auth::disable(&m, &s.root)
                            .await
                            .map(|_| held)
                            .map_err(|e| e.to_string())
                    }
                    None => Err("no member of the standby is ready".into()),
                };
                if let Ok(Some(held)) = opened {
                    update(&status, |st| {
                        if held != st.applied_revision {
                            tracing::info!(
                                said = st.applied_revision,
                                held,
                                "promoting: the standby's own revision is taken"
                            );
                            st.applied_revision = held;
                            // When the source wrote it is not known.
                            st.applied_time = None;
                        }
                    });
                }
                if let Err(e) = opened {
                    sources.failed();
                    tracing::warn!("promoting: cannot turn etcd's auth off (will retry): {e}");
                    let e = format!("promoting: etcd's auth is still on: {e} (will retry)");
                    update(&status, |st| st.message = Some(e));
                    pause(&mut promoting).await;
                    continue;
                }
                *auth.lock().unwrap_or_else(|e| e.into_inner()) = None;
                update(&status, |st| {
                    st.read_only = Some(false);
                    st.read_user = None;
                    st.read_password_file = None;
                    st.read_password_secret = None;
                });
            }
            update(&status, |s| {
                s.state = state::PROMOTED.into();
                s.promoted_at = Some(crate::units::rfc3339_ms(crate::backup::follow::now_ms()));
                if unreachable {
                    s.message = Some(format!(
                        "promoted without the source's last changes: {} ({failures} tries \
                         failed); this cluster holds the source's revisions up to {}",
                        s.message.clone().unwrap_or_default(),
                        s.applied_revision
                    ));
                }
            });
            let s = status.lock().unwrap_or_else(|e| e.into_inner()).clone();
            tracing::info!(
                revision = s.applied_revision, written = ?s.applied_time,
                "promoted: the standby takes writes from now on"
            );
            return;
        }
        // The watch waits within its pass; the store is polled.
        let streaming = live.is_some() && live_failed.is_none() && failures == 0;
        if (behind && !stopped) || streaming {
            continue;
        }
        pause(&mut promoting).await;
    }
}
