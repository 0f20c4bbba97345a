//! Where the standby's next revision is: the chain, among the source's
//! backups in the store, that holds revision R + 1. The follower of
//! continuous backups keeps a chain going until it holds the next full
//! backup's revision, so chains overlap and every revision is in one; a
//! revision in none (a chain cut, a follower that lost the history, the
//! standby's chain deleted by the source's retention) stops the standby
//! there, said with the revisions it cannot apply.

use std::time::Duration;

use crate::backup::chain::Chain;
use crate::backup::{BackupMeta, BackupStore, Location, Result};

/// How long a newer full backup may go without a chain reaching it before
/// the revisions between are taken as lost (a chain only reaches it after
/// its next segment, a few seconds later).
pub const GAP_GRACE: Duration = Duration::from_secs(60);

/// How often the chain being followed is read whole again (checked from
/// its first segment on); between, only its new segments are read.
pub const FULL_READ: Duration = Duration::from_secs(30);

/// How often the source's backups are listed while the chain being
/// followed is read on by name between listings ([`find`]): a newer full
/// backup, a gap or a re-created source are found within this.
pub const LIST_EVERY: Duration = Duration::from_secs(2);

/// The end of the chain read last, so that the next pass reads only what
/// came after it.
#[derive(Clone, Debug)]
pub struct Cached {
    tail: Chain,
    read_whole_at: std::time::Instant,
    /// The backup the chain follows, and when the backups were listed.
    base: BackupMeta,
    listed_at: std::time::Instant,
    /// The newest source revision the listing knew, and when it was written.
    newest: (i64, Option<u64>),
    /// Whether that listing found the standby cannot go on (then every
    /// pass lists, until it can).
    stopped: bool,
}

impl Cached {
    /// The first revision its tail can read on from.
    fn from(&self) -> i64 {
        self.tail
            .segments
            .first()
            .map_or(self.tail.base_revision, |s| s.first_revision() - 1)
    }
}

/// Between listings: the chain followed, read on by name from the tail
/// read last, when that tail holds `after` (`None`: list).
async fn read_on<S: BackupStore>(
    store: &S,
    source: &Location,
    after: i64,
    cache: &mut Option<Cached>,
) -> Result<Option<Found>> {
    let Some(c) = cache.take_if(|c| {
        !c.stopped
            && c.listed_at.elapsed() < LIST_EVERY
            && c.read_whole_at.elapsed() < FULL_READ
            && c.from() <= after
            && after <= c.tail.last_revision()
    }) else {
        return Ok(None);
    };
    let chain = store.chain_next(source, &c.base, c.tail.clone()).await?;
    let mut found = Found {
        newest_revision: c.newest.0.max(chain.last_revision()),
        newest_ms: c.newest.1,
        ..Found::default()
    };
    if chain.last_revision() >= c.newest.0 {
        found.newest_ms = chain.last_unix_ms().or(c.newest.1);
    }
    *cache = Some(Cached {
        tail: chain.tail(),
        newest: (found.newest_revision, found.newest_ms),
        ..c
    });
    if chain.last_revision() > after {
        found.chain = Some(chain);
    }
    Ok(Some(found))
}

/// What the store holds past revision `after`.
#[derive(Clone, Debug, Default)]
pub struct Found {
    /// The chain holding `after + 1`, when one does.
    pub chain: Option<Chain>,
    /// The newest source revision known.
    pub newest_revision: i64,
    /// When the source wrote it (ms since the epoch).
    pub newest_ms: Option<u64>,
    /// Why the standby cannot go on, when it cannot.
    pub stop: Option<String>,
    /// The revisions in no chain, when that is why (a newer full backup
    /// is past them).
    pub missing: Option<(i64, i64)>,
}

impl Found {
    /// When the source wrote the first revision past `after` the chain
    /// holds (ms since the epoch).
    pub fn pending_ms(&self, after: i64) -> Option<u64> {
        let chain = self.chain.as_ref()?;
        let s = chain.segments.iter().find(|s| s.last_revision() > after)?;
        Some(s.unix_ms)
    }
}

/// The source's backups that `pinned` (the uid the standby follows) owns,
/// newest first, and a word about a source re-created under the name.
fn ours(metas: Vec<BackupMeta>, pinned: Option<&str>) -> (Vec<BackupMeta>, Option<String>) {
    let other = metas
        .first()
        .filter(|m| m.uid.as_deref() != pinned)
        .map(|m| {
            format!(
                "the source cluster {} was re-created (its newest backup {} carries uid {}, this \
                 standby follows uid {}): another cluster, not followed",
                m.cluster,
                m.name,
                m.uid.as_deref().unwrap_or("none"),
                pinned.unwrap_or("none")
            )
        });
    let ours = metas
        .into_iter()
        .filter(|m| m.uid.as_deref() == pinned)
        .collect();
    (ours, other)
}

/// The chain of the source (`source`, whose backups `pinned` owns) that
/// holds revision `after + 1`, at `now_ms`. The backups are listed at most
/// every [`LIST_EVERY`]; between, the chain followed is read on by name.
pub async fn find<S: BackupStore>(
    store: &S,
    source: &Location,
    pinned: Option<&str>,
    (after, now_ms): (i64, u64),
    cache: &mut Option<Cached>,
) -> Result<Found> {
    if let Some(found) = read_on(store, source, after, cache).await? {
        return Ok(found);
    }
    let listed_at = std::time::Instant::now();
    let (ours, other) = ours(store.list(source).await?, pinned);
    let mut found = Found::default();
    let mut newer: Option<&BackupMeta> = None;
    for meta in &ours {
        if meta.revision > after {
            newer = Some(meta);
            found.newest_revision = found.newest_revision.max(meta.revision);
            found.newest_ms = found.newest_ms.max(Some(meta.unix_ms));
            continue;
        }
        // Read on only from a tail that holds the next revision to apply
        // (a standby set back, e.g. re-created, reads the chain whole).
        let reuse = cache.take().filter(|c| {
            c.tail.base == meta.name && c.from() <= after && c.read_whole_at.elapsed() < FULL_READ
        });
        let (chain, read_whole_at) = match reuse {
            Some(c) => (store.chain_on(source, meta, c.tail).await?, c.read_whole_at),
            None => (store.chain(source, meta).await?, std::time::Instant::now()),
        };
        *cache = Some(Cached {
            tail: chain.tail(),
            read_whole_at,
            base: meta.clone(),
            listed_at,
            newest: (0, None),
            stopped: false,
        });
        if chain.last_revision() > found.newest_revision {
            found.newest_revision = chain.last_revision();
            found.newest_ms = chain.last_unix_ms().or(Some(meta.unix_ms));
        }
        if chain.last_revision() > after {
            found.chain = Some(chain);
        } else if let Some(n) = newer {
            let waited = Duration::from_millis(now_ms.saturating_sub(n.unix_ms));
            if waited >= GAP_GRACE {
                let why = chain
                    .cut
                    .clone()
                    .unwrap_or_else(|| "it ends there".to_string());
                found.missing = Some((after + 1, n.revision));
                found.stop = Some(format!(
                    "revisions {} to {} of {} are in no chain in the store (the chain of {} \
                     holds up to {}: {why}; the next full backup, {}, holds {}): the standby \
                     stops at revision {after}; promote it, or create it again from the newest \
                     backup",
                    after + 1,
                    n.revision,
                    meta.cluster,
                    meta.name,
                    chain.last_revision(),
                    n.name,
                    n.revision
                ));
            }
        }
        break;
    }
    // Following an older chain (catching up): the newest one says how far
    // the source is.
    if let (Some(n), Some(c)) = (ours.first(), &found.chain)
        && n.name != c.base
        && let Ok(newest) = store.chain(source, n).await
        && newest.last_revision() > found.newest_revision
    {
        found.newest_revision = newest.last_revision();
        found.newest_ms = newest.last_unix_ms().or(Some(n.unix_ms));
    }
    if found.chain.is_none() && found.stop.is_none() {
        if let Some(why) = other {
            found.stop = Some(why);
        } else if let Some(oldest) = ours.last().filter(|m| m.revision > after) {
            found.missing = Some((after + 1, oldest.revision));
            found.stop = Some(format!(
                "the source's backups no longer reach back to revision {after} (the oldest \
                 kept, {}, holds {}): the standby stops there",
                oldest.name, oldest.revision
            ));
        }
    }
    if found.newest_revision < after {
        found.newest_revision = after;
    }
    if let Some(c) = cache.as_mut() {
        c.newest = (found.newest_revision, found.newest_ms);
        c.stopped = found.stop.is_some();
    }
    Ok(found)
}

#[cfg(test)]
#[path = "source_tests.rs"]
mod tests;
