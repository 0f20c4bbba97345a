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
mod tests {
    use super::*;
    use crate::backup::chain::{self, Chain};
    use crate::backup::delta::{Event, Revision, Segment};
    use crate::platform::local::backups::LocalBackups;
    use crate::platform::local::binaries::Binaries;

    const MINUTE: u64 = 60_000;

    /// A backup of `src` (uid `uid`) at `revision`, written at `at_ms`,
    /// with a chain of one segment per `(first, last)` range.
    fn backup(
        dir: &std::path::Path,
        uid: &str,
        stamp: &str,
        revision: i64,
        at_ms: u64,
        chain: &[(i64, i64)],
    ) {
        let name = format!("{}-{stamp}", crate::backup::name_prefix("src", Some(uid)));
        let db = dir.join(format!("{name}.db"));
        crate::backup::tests::fake_snapshot(&db, name.as_bytes());
        let meta = BackupMeta {
            cluster: "src".into(),
            uid: Some(uid.into()),
            revision,
            ..crate::backup::tests::meta(&name, at_ms, "ab".into())
        };
        crate::backup::write_meta(dir, &meta).expect("meta");
        let mut c = Chain::start(&meta);
        for (first, last) in chain {
            push(dir, &mut c, (*first, *last), at_ms);
        }
    }

    /// Writes the next segment of `c`, revisions `first..=last`.
    fn push(dir: &std::path::Path, c: &mut Chain, (first, last): (i64, i64), at_ms: u64) {
        let s = Segment {
            base: c.base.clone(),
            seq: c.next_seq(),
            unix_ms: at_ms,
            revisions: (first..=last)
                .map(|r| Revision {
                    revision: r,
                    events: vec![Event::Put {
                        key: b"k".to_vec(),
                        value: vec![],
                    }],
                })
                .collect(),
            prev: c.next_prev,
        };
        chain::write(dir, &s).expect("segment");
        let (_, hash) = crate::backup::delta::encode(&s);
        c.next_prev = hash;
        c.segments.push(s);
    }

    #[tokio::test]
    async fn between_listings_the_chain_is_read_on_and_a_stopped_standby_lists_every_time() {
        let state = tempfile::tempdir().expect("tempdir");
        let dir = state.path().join("backups/src");
        std::fs::create_dir_all(&dir).expect("dir");
        let now = 100 * MINUTE;
        let stamp = "20261206-100000-000";
        backup(&dir, "aaaaaaaa1", stamp, 10, now - 10 * MINUTE, &[(11, 15)]);
        let store = LocalBackups::new(state.path(), std::sync::Arc::new(Binaries::new(Vec::new())));
        let mut source = Location::of("dr", None);
        source.source = Some("src".into());
        let pinned = Some("aaaaaaaa1");
        let mut cache = None;
        let f = super::find(&store, &source, pinned, (12, now), &mut cache)
            .await
            .expect("found");
        assert_eq!(f.newest_revision, 15);
        let listed_at = cache.as_ref().map(|c| c.listed_at);
        // The source writes on: the next pass reads the new segment by its
        // name, from the tail, and says how far the source is.
        let meta = store.list(&source).await.expect("listed").remove(0);
        let mut c = store.chain(&source, &meta).await.expect("chain");
        push(&dir, &mut c, (16, 20), now - MINUTE);
        let f = super::find(&store, &source, pinned, (15, now), &mut cache)
            .await
            .expect("found");
        let chain = f.chain.expect("the chain read on");
        assert_eq!(
            (chain.last_revision(), f.newest_revision, f.newest_ms),
            (20, 20, Some(now - MINUTE))
        );
        assert_eq!(
            cache.as_ref().map(|c| c.listed_at),
            listed_at,
            "read on, not listed"
        );
        // A gap (a newer backup no chain reaches): stopped, and every next
        // pass lists again rather than reading on past it.
        backup(
            &dir,
            "aaaaaaaa1",
            "20261206-101000-000",
            40,
            now - 2 * MINUTE,
            &[],
        );
        let mut stale = cache.clone();
        if let Some(c) = stale.as_mut() {
            c.listed_at -= LIST_EVERY;
        }
        let mut cache = stale;
        for _ in 0..2 {
            let f = super::find(&store, &source, pinned, (20, now), &mut cache)
                .await
                .expect("found");
            assert!(f.stop.is_some_and(|s| s.contains("revisions 21 to 40")));
            assert_eq!(f.missing, Some((21, 40)));
        }
    }

    #[tokio::test]
    async fn the_chain_holding_the_next_revision_is_found_across_overlapping_chains_and_a_gap_stops()
     {
        let state = tempfile::tempdir().expect("tempdir");
        let dir = state.path().join("backups/src");
        std::fs::create_dir_all(&dir).expect("dir");
        let now = 100 * MINUTE;
        backup(
            &dir,
            "aaaaaaaa1",
            "20261206-100000-000",
            10,
            now - 10 * MINUTE,
            &[(11, 15), (16, 20)],
        );
        backup(
            &dir,
            "aaaaaaaa1",
            "20261206-100500-000",
            18,
            now - 5 * MINUTE,
            &[(19, 25)],
        );
        let store = LocalBackups::new(state.path(), std::sync::Arc::new(Binaries::new(Vec::new())));
        let mut source = Location::of("dr", None);
        source.source = Some("src".into());
        let pinned = Some("aaaaaaaa1");
        let find = |after| {
            let (store, source) = (&store, &source);
            async move {
                let mut fresh = None;
                super::find(store, source, pinned, (after, now), &mut fresh)
                    .await
                    .expect("found")
            }
        };
        let f = find(12).await;
        let first = f.chain.as_ref().map(|c| c.base_revision);
        assert_eq!(
            (first, f.newest_revision, f.stop.is_none()),
            (Some(10), 25, true)
        );
        // The first revision past 12 was written when its segment was.
        let chain = f.chain.as_ref().expect("a chain");
        let holding = chain.segments.iter().find(|s| s.last_revision() > 12);
        assert_eq!(f.pending_ms(12), holding.map(|s| s.unix_ms));
        assert!(f.pending_ms(12).is_some());
        assert_eq!(
            f.pending_ms(chain.last_revision()),
            None,
            "nothing past the chain's end"
        );
        // Past the first chain's end: the second one (it overlaps).
        assert_eq!(find(20).await.chain.map(|c| c.base_revision), Some(18));
        // Up to date: nothing to apply, nothing wrong.
        let f = find(25).await;
        assert!(f.chain.is_none() && f.stop.is_none(), "{f:?}");
        // Read on from what was read before: the same answer, reading only
        // what follows.
        let mut cache = None;
        let whole = super::find(&store, &source, pinned, (12, now), &mut cache)
            .await
            .expect("found");
        let on = super::find(&store, &source, pinned, (16, now), &mut cache)
            .await
            .expect("found");
        assert_eq!(whole.chain.map(|c| c.last_revision()), Some(20));
        let on = on.chain.expect("the same chain");
        assert_eq!(
            (on.segments.len(), on.last_revision()),
            (1, 20),
            "only the tail is kept"
        );
        // Set back below the tail: read whole again, from the first segment.
        let back = super::find(&store, &source, pinned, (12, now), &mut cache)
            .await
            .expect("found");
        let back = back.chain.expect("the chain");
        assert!(back.segments.len() > 1, "read whole: {back:?}");
        // A newer backup no chain reaches: a gap once it is old enough.
        backup(
            &dir,
            "aaaaaaaa1",
            "20261206-101000-000",
            40,
            now - 2 * MINUTE,
            &[],
        );
        let f = find(25).await;
        let stop = f.stop.expect("a gap");
        assert!(stop.contains("revisions 26 to 40"), "{stop}");
        assert_eq!(f.missing, Some((26, 40)));
        // The source re-created under its name: not followed.
        backup(
            &dir,
            "bbbbbbbb2",
            "20261206-101500-000",
            3,
            now - MINUTE,
            &[],
        );
        let f = find(40).await;
        assert_eq!(f.missing, None, "another source is no gap");
        assert!(f.stop.is_some_and(|s| s.contains("re-created")));
    }

    fn meta(name: &str, uid: Option<&str>) -> BackupMeta {
        BackupMeta {
            cluster: "src".into(),
            uid: uid.map(str::to_string),
            ..crate::backup::tests::meta(name, 1, String::new())
        }
    }

    #[test]
    fn only_the_pinned_identity_is_followed_and_a_new_one_is_said() {
        let metas = vec![
            meta("b3", Some("new")),
            meta("b2", Some("old")),
            meta("b1", Some("old")),
        ];
        let (mine, other) = ours(metas.clone(), Some("old"));
        assert_eq!(
            mine.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            ["b2", "b1"]
        );
        let said = other.expect("the new identity is said");
        assert!(
            said.contains("re-created") && said.contains("uid new"),
            "{said}"
        );
        let (mine, other) = ours(metas, Some("new"));
        assert_eq!(mine.len(), 1);
        assert!(other.is_none());
    }
}
