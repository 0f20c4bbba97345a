//! One pass of the standby's applier: the standby's revision R from a
//! member, the source's chain that holds R + 1, and its revisions applied
//! in order, each as one transaction that must land at the source's
//! revision.

use etcd_client::Client;

use super::source::{self, Found};
use super::state;
use crate::backup::delta::{Event, Revision};
use crate::backup::{BackupStore, Candidate, Location, replay};
use crate::crd::StandbyStatus;
use crate::etcd::Credentials;
use crate::units::rfc3339_ms;
use std::sync::Mutex;

/// Most revisions applied in one pass (status is said between passes).
pub const PER_PASS: usize = 2000;

/// Why a pass failed (it is tried again, through another member).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The member did not answer.
    #[error("{member}: {message}")]
    Member {
        /// The member.
        member: String,
        /// What failed.
        message: String,
    },
    /// The store could not be read.
    #[error("the source's backups cannot be read: {0}")]
    Store(#[from] crate::backup::Error),
}

/// What one pass found and did.
#[derive(Clone, Debug, Default)]
pub struct Pass {
    /// The standby's revision after the pass.
    pub applied: i64,
    /// When the source wrote it (ms), when known.
    pub applied_ms: Option<u64>,
    /// The newest source revision known, and when it was written.
    pub newest: (i64, Option<u64>),
    /// When the source wrote the first revision not applied (ms).
    pub pending_ms: Option<u64>,
    /// Why it cannot go on: the state to say and the reason.
    pub stop: Option<(&'static str, String)>,
    /// The source's revisions in no chain, when that is why.
    pub missing: Option<(i64, i64)>,
    /// How the source's changes arrived ([`super::VIA_STORE`],
    /// [`super::VIA_STREAM`]).
    pub via: &'static str,
}

impl Pass {
    /// Says this pass in `s`.
    pub fn report(&self, s: &mut StandbyStatus) {
        let moved = s.applied_revision != self.applied;
        s.applied_revision = self.applied;
        s.via = Some(self.via.to_string());
        match self.applied_ms {
            Some(ms) => s.applied_time = Some(rfc3339_ms(ms)),
            // The time said was another revision's (the record's, after a
            // restart): not known until a revision is applied.
            None if moved => s.applied_time = None,
            None => {}
        }
        s.source_revision = self.newest.0.max(self.applied);
        s.source_time = self.newest.1.map(rfc3339_ms).or(s.source_time.take());
        s.lag_revisions = (s.source_revision - self.applied).max(0);
        let now = crate::backup::follow::now_ms();
        s.lag_ms = match (s.lag_revisions, self.pending_ms) {
            (0, _) => 0,
            (_, Some(ms)) => i64::try_from(now.saturating_sub(ms)).unwrap_or(i64::MAX),
            (_, None) => s.lag_ms,
        };
        s.missing = self
            .missing
            .map(|(from, to)| crate::crd::RevisionRange { from, to });
        match &self.stop {
            Some((st, why)) => {
                if s.state != state::PROMOTING {
                    s.state = (*st).into();
                }
                s.message = Some(why.clone());
            }
            None => {
                if s.state != state::PROMOTING {
                    s.state = state::FOLLOWING.into();
                }
                s.message = None;
            }
        }
    }
}

/// Why the standby's revision `at`, read at the start of a pass, says that
/// something other than the applier wrote to it since the applier left it
/// at `left_at` (its last pass's end, `None` after a failure or a restart:
/// then the standby's revision is checked against the source's instead).
/// A revision below `left_at` (the standby lost revisions: rebuilt from a
/// survivor) asks for that check again.
pub fn moved(at: i64, left_at: Option<i64>, checked: &mut bool) -> Option<String> {
    match left_at {
        Some(left) if at > left => Some(format!(
            "the standby is at revision {at}, past revision {left} where its applier left it: \
             something other than the standby's applier wrote to it; nothing more is applied \
             (promote it, or create the standby again)"
        )),
        Some(left) if at < left => {
            *checked = false;
            None
        }
        _ => None,
    }
}

/// The client of a standby's member the store's passes apply through, and
/// its URL.
pub type Conn = Option<(String, Client)>;

/// One pass through `member`: applies what the store holds past the
/// standby's revision. `checked` says whether the standby's revision was
/// checked against the source's since the last failure; `left_at` where
/// the last pass left it ([`moved`]); `auth` the root credentials while
/// etcd's auth is on ([`super::auth`]); `conn` the client of the last pass,
/// kept while it goes to the same member (each new one authenticates: a
/// bcrypt check on the member).
pub async fn pass<S: BackupStore>(
    store: &S,
    source: &Location,
    pinned: Option<&str>,
    ((member, url, tls), auth, conn): (&Candidate, Option<&Credentials>, &mut Conn),
    (checked, cache, left_at): (&mut bool, &mut Option<source::Cached>, Option<i64>),
) -> Result<Pass, Error> {
    let fail = |message: String| Error::Member {
        member: member.clone(),
        message,
    };
    let source_member = crate::backup::Source {
        member,
        url,
        tls: tls.as_ref(),
    };
    let mut client = match conn.as_ref().filter(|(u, _)| u == url) {
        Some((_, c)) => c.clone(),
        None => {
            let c = replay::connect(source_member, auth).await.map_err(fail)?;
            *conn = Some((url.clone(), c.clone()));
            c
        }
    };
    let at = replay::head(&mut client).await.map_err(fail)?.0;
    if let Some(why) = moved(at, left_at, checked) {
        return Ok(Pass {
            applied: at,
            via: super::VIA_STORE,
            stop: Some((state::DIVERGED, why)),
            ..Pass::default()
        });
    }
    if !*checked {
        // The check needs the segment holding revision `at`: read whole.
        *cache = None;
    }
    let now = crate::backup::follow::now_ms();
    let found: Found = source::find(store, source, pinned, (at, now), cache).await?;
    let mut pass = Pass {
        applied: at,
        via: super::VIA_STORE,
        newest: (found.newest_revision, found.newest_ms),
        stop: found.stop.map(|why| (state::STOPPED, why)),
        missing: found.missing,
        ..Pass::default()
    };
    if found.newest_revision == at {
        // Up to date: the newest revision known is the standby's.
        pass.applied_ms = found.newest_ms;
    }
    let Some(chain) = found.chain else {
        return Ok(pass);
    };
    if !*checked {
        let here = chain
            .segments
            .iter()
            .flat_map(|s| s.revisions.iter().map(move |r| (s.unix_ms, r)))
            .find(|(_, r)| r.revision == at);
        if let Some((ms, rev)) = here {
            if let Some(why) = differs(&mut client, rev).await.map_err(fail)? {
                pass.stop = Some((state::DIVERGED, why));
                return Ok(pass);
            }
            pass.applied_ms = Some(ms);
        }
        *checked = true;
    }
    // The revisions to apply this pass, each with when its segment was
    // written: consecutive from the standby's, at most PER_PASS.
    let mut run: Vec<(u64, &Revision)> = Vec::new();
    let mut expect = at + 1;
    'segments: for segment in &chain.segments {
        for rev in segment.revisions.iter().filter(|r| r.revision > at) {
            if run.len() == PER_PASS {
                pass.pending_ms = Some(segment.unix_ms);
                break 'segments;
            }
            if rev.revision != expect {
                pass.stop = Some((
                    state::STOPPED,
                    format!(
                        "the source's chain of {} skips from revision {} to {}: the standby \
                         stops at {}",
                        chain.base,
                        expect - 1,
                        rev.revision,
                        expect - 1
                    ),
                ));
                pass.pending_ms = Some(segment.unix_ms);
                break 'segments;
            }
            run.push((segment.unix_ms, rev));
            expect += 1;
        }
    }
    let revs: Vec<&Revision> = run.iter().map(|(_, r)| *r).collect();
    let mut last = None;
    let applied = super::pipeline::apply(&client, &revs, |i| last = Some(i)).await;
    if let Some(i) = last {
        pass.applied = run[i].1.revision;
        pass.applied_ms = Some(run[i].0);
    }
    match applied.map_err(fail)? {
        super::pipeline::Applied::All => {}
        super::pipeline::Applied::Diverged(_, why) => {
            pass.stop = Some((state::DIVERGED, why));
        }
    }
    Ok(pass)
}

/// Whether the standby's data at its revision differs from what the
/// source's revision `rev` wrote (said in words), or `None` when it holds
/// it: each key `rev` put holds its value, written at that revision; each
/// key it deleted is gone.
pub async fn differs(client: &mut Client, rev: &Revision) -> Result<Option<String>, String> {
    for e in &rev.events {
        let key = match e {
            Event::Put { key, .. } | Event::Delete { key } => key,
        };
        let got = client
            .get(key.clone(), None)
            .await
            .map_err(|e| format!("reading a key back: {e}"))?;
        let kv = got.kvs().first();
        let same = match e {
            Event::Put { value, .. } => kv.is_some_and(|kv| {
                kv.value() == value.as_slice() && kv.mod_revision() == rev.revision
            }),
            Event::Delete { .. } => kv.is_none_or(|kv| kv.mod_revision() > rev.revision),
        };
        if !same {
            return Ok(Some(format!(
                "the standby is at revision {} but does not hold what the source wrote at it \
                 (key {}): something other than the standby's applier wrote to it; nothing \
                 more is applied (promote it, or create the standby again)",
                rev.revision,
                String::from_utf8_lossy(key)
            )));
        }
    }
    Ok(None)
}

/// While the standby's members do not answer: how far the source is, from
/// the store, said as the lag (the last applied revision stays).
pub(super) async fn lag_from_store<S: BackupStore>(
    store: &S,
    source: &Location,
    pinned: Option<&str>,
    status: &Mutex<StandbyStatus>,
    cache: &mut Option<source::Cached>,
) {
    let applied = status
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .applied_revision;
    let now = crate::backup::follow::now_ms();
    let Ok(found) = source::find(store, source, pinned, (applied, now), cache).await else {
        return;
    };
    let pending = found.pending_ms(applied).or(found.newest_ms);
    super::update(status, |s| {
        s.source_revision = found.newest_revision.max(s.applied_revision);
        s.lag_revisions = (s.source_revision - s.applied_revision).max(0);
        if s.lag_revisions > 0
            && let Some(ms) = pending
        {
            s.lag_ms = i64::try_from(now.saturating_sub(ms)).unwrap_or(i64::MAX);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::moved;

    #[test]
    fn a_standby_past_where_its_applier_left_it_was_written_by_something_else() {
        let mut checked = true;
        // Where it was left: nothing to say.
        assert!(moved(10, Some(10), &mut checked).is_none() && checked);
        // Past it, between two passes: a foreign write.
        let why = moved(11, Some(10), &mut checked).expect("diverged");
        assert!(why.contains("past revision 10"), "{why}");
        // Below it (revisions lost, the standby rebuilt): checked again.
        assert!(moved(8, Some(10), &mut checked).is_none());
        assert!(!checked, "checked against the source again");
        // Not known (a restart, a failed pass): the check decides.
        let mut checked = false;
        assert!(moved(99, None, &mut checked).is_none() && !checked);
    }
}
