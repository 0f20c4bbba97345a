//! Following the source live (`spec.standby.stream`): a watch of the
//! source's members from the standby's revision on, each source revision
//! applied as one transaction as it arrives, under the same rules as the
//! store's chain ([`super::apply`]): it must land at the source's revision,
//! and the standby's revision is checked against the source's first.
//!
//! The watch is kept between passes; each pass reads what arrived for at
//! most [`PASS`] and asks the source how far it is (a progress request:
//! its answer carries the source's revision), so status says the lag and a
//! promotion knows when everything the source has is applied. A source
//! that compacted past the standby's revision, or that no member of which
//! answers, is an [`Error::Source`]: the applier follows the store's chain
//! meanwhile and tries the watch again later.

use std::time::Duration;

use etcd_client::{Client, ConnectOptions, WatchOptions, WatchStream};

use super::apply::{self, Pass};
use super::state;
use crate::backup::delta::{self, Revision};
use crate::backup::{Candidate, replay};
use crate::etcd::Credentials;
use crate::tls::ClientTls;
use crate::validate::standby::Stream;

/// How long one pass reads what arrives before status is said.
pub const PASS: Duration = Duration::from_millis(250);
/// Longest wait for the source to answer (connecting, the first reply).
const TIMEOUT: Duration = Duration::from_secs(5);
/// How often the source is asked how far it is.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// Why a pass of the watch failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The standby's member did not answer (another one is tried).
    #[error("{member}: {message}")]
    Member {
        /// The member.
        member: String,
        /// What failed.
        message: String,
    },
    /// The source cannot be followed live now (the store's chain takes
    /// over for a while).
    #[error("{0}")]
    Source(String),
}

/// The live follower, kept by the applier between passes.
pub struct Live {
    spec: Stream,
    conn: Option<Conn>,
    /// The source cluster's etcd id, as first seen: another id is another
    /// cluster.
    cluster_id: Option<u64>,
    /// The standby's root credentials while etcd's auth is on there.
    auth: Option<Credentials>,
}

/// An open watch of the source and a client of the standby's member.
struct Conn {
    member: String,
    standby: Client,
    stream: WatchStream,
    /// The standby's revision.
    at: i64,
    /// The newest source revision known.
    newest: i64,
    /// When a source revision not yet applied was first known (ms).
    pending_since: Option<u64>,
    /// When the source was last asked how far it is.
    asked: tokio::time::Instant,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("endpoints", &self.spec.endpoints)
            .field("connected", &self.conn.as_ref().map(|c| &c.member))
            .finish()
    }
}

impl Live {
    /// A follower of the members `spec` names (not connected yet), of the
    /// etcd cluster `pinned` (hex, as [`Live::cluster_id`] said before)
    /// when known.
    pub fn new(spec: Stream, pinned: Option<&str>) -> Self {
        Live {
            spec,
            conn: None,
            cluster_id: pinned.and_then(|p| u64::from_str_radix(p, 16).ok()),
            auth: None,
        }
    }

    /// The credentials the standby's members are reached with from now on
    /// (a change drops the watch).
    pub fn set_auth(&mut self, auth: Option<Credentials>) {
        if self.auth != auth {
            self.auth = auth;
            self.conn = None;
        }
    }

    /// The source's etcd cluster id (hex), once a member answered.
    pub fn cluster_id(&self) -> Option<String> {
        self.cluster_id.map(|id| format!("{id:x}"))
    }

    /// Drops the watch (after a failure; the next pass opens a new one).
    pub fn reset(&mut self) {
        self.conn = None;
    }

    /// One pass through the standby's `member`: what the watch delivers
    /// within [`PASS`], applied. `checked` says whether the standby's
    /// revision was checked against the source's since the last failure.
    /// A watch that breaks (the source's member it went to stopped) is
    /// opened again at once through the others before the pass fails.
    /// `left_at`: where the applier's last pass left the standby
    /// ([`apply::moved`]).
    pub async fn pass(
        &mut self,
        member: &Candidate,
        checked: &mut bool,
        left_at: Option<i64>,
    ) -> Result<Pass, Error> {
        let mut opened = false;
        if self.conn.as_ref().is_none_or(|c| c.member != member.0) {
            self.conn = None;
            *checked = false;
            let conn = self.connect(member).await?;
            if let Some(why) = apply::moved(conn.at, left_at, checked) {
                return Ok(Pass {
                    applied: conn.at,
                    via: super::VIA_STREAM,
                    stop: Some((state::DIVERGED, why)),
                    ..Pass::default()
                });
            }
            self.conn = Some(conn);
            opened = true;
        }
        loop {
            let Some(conn) = self.conn.as_mut() else {
                return Err(Error::Source("no watch".into()));
            };
            match conn.pass(checked).await {
                Ok(p) => return Ok(p),
                Err(Error::Source(why)) if !opened => {
                    tracing::info!("{why}: opening the watch again");
                    self.conn = None;
                    *checked = false;
                    self.conn = Some(self.connect(member).await?);
                    opened = true;
                }
                Err(e) => {
                    self.conn = None;
                    return Err(e);
                }
            }
        }
    }

    /// Opens a client of the standby's member and a watch of the source
    /// from the standby's revision (to check it, then apply what follows).
    async fn connect(&mut self, (member, url, tls): &Candidate) -> Result<Conn, Error> {
        let fail = |message: String| Error::Member {
            member: member.clone(),
            message,
        };
        let here = crate::backup::Source {
            member,
            url,
            tls: tls.as_ref(),
        };
        let mut standby = replay::connect(here, self.auth.as_ref())
            .await
            .map_err(fail)?;
        let at = replay::head(&mut standby).await.map_err(fail)?.0;
        let source = self.source_client().await?;
        let mut probe = source.clone();
        let (theirs, id) = replay::head(&mut probe)
            .await
            .map_err(|e| Error::Source(self.said(&e)))?;
        if self.cluster_id.is_some_and(|known| known != id) {
            return Err(Error::Source(self.said(&format!(
                "another etcd cluster answers (id {id:x}, not {:x}): the source was created \
                 again; the store's chain, which is pinned to the source's identity, is followed",
                self.cluster_id.unwrap_or_default()
            ))));
        }
        if theirs < at {
            return Err(Error::Source(self.said(&format!(
                "the source is at revision {theirs}, behind this standby's {at}: it is not the \
                 cluster this standby follows (created again?)"
            ))));
        }
        self.cluster_id = Some(id);
        let options = WatchOptions::new()
            .with_all_keys()
            .with_start_revision(at.max(1))
            .with_progress_notify();
        let mut client = source
            .watch_client()
            .max_decoding_message_size(crate::backup::follow::MAX_WATCH_MESSAGE);
        let stream = tokio::time::timeout(TIMEOUT, client.watch("", Some(options)))
            .await
            .map_err(|_| Error::Source(self.said("no answer to the watch")))?
            .map_err(|e| Error::Source(self.said(&format!("watch: {e}"))))?;
        tracing::info!(from = at, endpoints = ?self.spec.endpoints, "following the source live");
        Ok(Conn {
            member: member.clone(),
            standby,
            stream,
            at,
            newest: theirs,
            pending_since: None,
            asked: tokio::time::Instant::now(),
        })
    }

    /// A client of the source's members.
    async fn source_client(&self) -> Result<Client, Error> {
        let mut opts = ConnectOptions::new()
            .with_connect_timeout(TIMEOUT)
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2));
        if let Some(folder) = &self.spec.tls_path {
            // Files the spec names: read (checked, capped) off the async
            // workers.
            let folder = folder.clone();
            let read = tokio::task::spawn_blocking(move || {
                ClientTls::from_files(
                    &folder.join("ca.crt"),
                    &folder.join("tls.crt"),
                    &folder.join("tls.key"),
                )
                .map_err(|e| e.to_string())
            })
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r);
            let tls = read.map_err(|e| {
                Error::Source(self.said(&format!("spec.standby.stream.tlsPath: {e}")))
            })?;
            opts = opts.with_tls(tls.options());
        }
        tokio::time::timeout(
            TIMEOUT,
            Client::connect(self.spec.endpoints.as_slice(), Some(opts)),
        )
        .await
        .map_err(|_| Error::Source(self.said("no member answers")))?
        .map_err(|e| Error::Source(self.said(&e.to_string())))
    }

    /// `what` said of the source's members.
    fn said(&self, what: &str) -> String {
        format!(
            "following the source live from {}: {what}",
            self.spec.endpoints.join(", ")
        )
    }
}

impl Conn {
    /// Reads and applies what arrives for [`PASS`].
    async fn pass(&mut self, checked: &mut bool) -> Result<Pass, Error> {
        let now = crate::backup::follow::now_ms;
        let mut pass = Pass {
            applied: self.at,
            via: super::VIA_STREAM,
            ..Pass::default()
        };
        if self.asked.elapsed() >= PROGRESS_EVERY {
            self.asked = tokio::time::Instant::now();
            self.stream
                .request_progress()
                .await
                .map_err(|e| Error::Source(format!("the source's watch: {e}")))?;
        }
        let end = tokio::time::Instant::now() + PASS;
        let mut applied = 0usize;
        while applied < apply::PER_PASS {
            let msg = tokio::select! {
                m = self.stream.message() => m,
                () = tokio::time::sleep_until(end) => break,
            };
            let mut revisions: Vec<Revision> = Vec::new();
            self.take(msg, &mut revisions)?;
            // What else already arrived goes with it: applied together, the
            // transactions are sent ahead ([`super::pipeline`]).
            while revisions.len() < super::pipeline::WINDOW * 4 {
                let Some(more) = futures::FutureExt::now_or_never(self.stream.message()) else {
                    break;
                };
                self.take(more, &mut revisions)?;
            }
            let mut run: Vec<&Revision> = Vec::new();
            let mut skipped: Option<String> = None;
            for rev in &revisions {
                self.newest = self.newest.max(rev.revision);
                if rev.revision <= self.at {
                    if rev.revision == self.at && !*checked {
                        if let Some(why) = apply::differs(&mut self.standby, rev)
                            .await
                            .map_err(|m| self.member_failed(m))?
                        {
                            pass.stop = Some((state::DIVERGED, why));
                            return Ok(pass);
                        }
                        *checked = true;
                    }
                    continue;
                }
                let expect = run.last().map_or(self.at, |r| r.revision) + 1;
                if rev.revision != expect {
                    let at = expect - 1;
                    skipped = Some(format!(
                        "the source's watch skips from revision {at} to {}: the standby stops \
                         at {at}",
                        rev.revision
                    ));
                    break;
                }
                run.push(rev);
            }
            // Sent ahead, in order ([`super::pipeline`]).
            let mut last = None;
            let done = super::pipeline::apply(&self.standby, &run, |i| last = Some(i)).await;
            if let Some(i) = last {
                self.at = run[i].revision;
                applied += i + 1;
                pass.applied = self.at;
                pass.applied_ms = Some(now());
            }
            match done.map_err(|m| self.member_failed(m))? {
                super::pipeline::Applied::All => {}
                super::pipeline::Applied::Diverged(_, why) => {
                    pass.stop = Some((state::DIVERGED, why));
                    return Ok(pass);
                }
            }
            if let Some(why) = skipped.take() {
                pass.stop = Some((state::STOPPED, why));
                return Ok(pass);
            }
            // Past the first answer with changes (the watch starts at the
            // standby's revision), its revision is checked.
            if !revisions.is_empty() {
                *checked = true;
            }
        }
        self.pending_since = if self.newest > self.at {
            self.pending_since.or(Some(now()))
        } else {
            None
        };
        pass.newest = (self.newest, Some(now()));
        pass.pending_ms = self.pending_since;
        Ok(pass)
    }

    /// Adds the revisions of one answer of the watch to `revisions` (a
    /// revision's events joined, should they come in two answers); an
    /// error when the watch cannot go on (ended, canceled, past a
    /// compaction).
    fn take(
        &mut self,
        msg: Result<Option<etcd_client::WatchResponse>, etcd_client::Error>,
        revisions: &mut Vec<Revision>,
    ) -> Result<(), Error> {
        let msg = match msg {
            Ok(Some(m)) => m,
            Ok(None) => return Err(Error::Source("the source's watch ended".into())),
            Err(e) => return Err(Error::Source(format!("the source's watch: {e}"))),
        };
        if msg.compact_revision() > 0 {
            return Err(Error::Source(format!(
                "the source compacted its history up to revision {}, past this standby's \
                 {}: the store's chain carries what is missing",
                msg.compact_revision(),
                self.at
            )));
        }
        if msg.canceled() {
            return Err(Error::Source(format!(
                "the source ended the watch: {}",
                msg.cancel_reason()
            )));
        }
        if let Some(h) = msg.header() {
            self.newest = self.newest.max(h.revision());
        }
        for ev in msg.events() {
            delta::push_watched(revisions, ev);
        }
        Ok(())
    }

    fn member_failed(&self, message: String) -> Error {
        Error::Member {
            member: self.member.clone(),
            message,
        }
    }
}
