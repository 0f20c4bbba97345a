//! The applier's loop ([`run`]): each pass asks a ready member for the
//! standby's revision and applies what the source holds past it (live
//! from its members, else from its store); etcd's auth is turned on first
//! (clients may only read) and off when promoted, once what is left is
//! applied and the standby's own revision is read.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::{LIVE_RETRY, POLL, PROMOTE_AFTER_FAILURES, apply, auth, held, state, stream, update};
use crate::backup::{BackupStore, Candidate, Location, task};
use crate::crd::StandbyStatus;
use crate::etcd::Credentials;
use crate::validate::standby::Stream;

/// Waits [`POLL`], or less when a promotion is asked.
async fn pause(promoting: &mut watch::Receiver<bool>) {
    tokio::select! {
        () = tokio::time::sleep(POLL) => {}
        _ = promoting.changed() => {}
    }
}

/// The applier's loop, until promoted (or aborted).
pub(super) async fn run<S: BackupStore>(
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
                if !unreachable && s.missing.is_none() {
                    // Whatever a pass last said is past (a gap stays said).
                    s.message = None;
                } else if unreachable {
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
