//! [`super`]'s tests: chains found across overlapping backups, read on
//! by name between listings, a gap and a re-created source said.

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
async fn the_chain_holding_the_next_revision_is_found_across_overlapping_chains_and_a_gap_stops() {
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
