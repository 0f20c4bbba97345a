//! Retention and chains of delta segments on the local platform: a full
//! backup and its segments are kept or deleted together, the last good
//! chain is never deleted, and nothing outside the backup folder goes.

use std::sync::Arc;

use super::backups::LocalBackups;
use super::binaries::Binaries;
use crate::backup::chain::{self, segment_file};
use crate::backup::delta::{Event, Revision, Segment};
use crate::backup::tests::{fake_snapshot, meta};
use crate::backup::{BackupMeta, BackupStore, Location, check_file, write_meta};

fn segment(base: &BackupMeta, chain: &chain::Chain, rev: i64) -> Segment {
    Segment {
        base: base.name.clone(),
        seq: chain.next_seq(),
        unix_ms: 5,
        revisions: vec![Revision {
            revision: rev,
            events: vec![Event::Delete { key: b"k".to_vec() }],
        }],
        prev: chain.next_prev,
    }
}

#[tokio::test]
async fn retention_keeps_chains_whole() {
    let state = tempfile::tempdir().expect("tempdir");
    let store = LocalBackups::new(state.path(), Arc::new(Binaries::new(vec![])));
    let loc = Location::of("demo", None);
    let dir = store.dir(&loc);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut metas = Vec::new();
    for (i, name) in [
        "demo-20260101-000000-001",
        "demo-20260101-000000-002",
        "demo-20260101-000000-003",
    ]
    .iter()
    .enumerate()
    {
        let p = dir.join(format!("{name}.db"));
        fake_snapshot(&p, name.as_bytes());
        let sha = check_file(&p, None).expect("good");
        let m = meta(name, i as u64, sha);
        write_meta(&dir, &m).expect("meta");
        for rev in 2..5 {
            let c = store.chain(&loc, &m).await.expect("chain");
            store
                .append(&loc, &segment(&m, &c, rev))
                .await
                .expect("append");
        }
        metas.push(m);
    }
    // Something outside the folder named like a segment stays.
    let outside = state
        .path()
        .join(segment_file("demo-20260101-000000-001", 1));
    std::fs::write(&outside, b"not ours").expect("outside");
    // The newest base damaged: the last good chain (b2) is kept whole,
    // b3 too (damaged, newer), b1 goes with all its segments.
    std::fs::write(
        dir.join("demo-20260101-000000-003.db"),
        b"garbage garbage garbage garbage garbage",
    )
    .expect("damage");
    let r = store.retain(&loc, 1).await.expect("retain");
    assert_eq!(r.deleted, ["demo-20260101-000000-001"]);
    assert_eq!(r.good, ["demo-20260101-000000-002"]);
    let left: Vec<(String, u64)> = chain::segment_files(&dir)
        .into_iter()
        .map(|(b, n, _)| (b, n))
        .collect();
    let want: Vec<(String, u64)> = ["demo-20260101-000000-002", "demo-20260101-000000-003"]
        .iter()
        .flat_map(|b| (1..=3).map(move |n| (b.to_string(), n)))
        .collect();
    assert_eq!(left, want);
    let c = store.chain(&loc, &metas[1]).await.expect("chain");
    assert_eq!((c.segments.len(), c.cut), (3, None));
    assert!(outside.is_file());
}

/// Kubernetes keeps no segments: its store says so instead of guessing.
#[tokio::test]
async fn a_store_without_chains_says_so() {
    struct Bare;
    impl BackupStore for Bare {
        fn describe(&self, _: &Location) -> String {
            String::new()
        }
        async fn save(
            &self,
            _: &Location,
            _: crate::backup::Source<'_>,
        ) -> crate::backup::Result<BackupMeta> {
            Err(crate::backup::Error::NoMember)
        }
        async fn list(&self, _: &Location) -> crate::backup::Result<Vec<BackupMeta>> {
            Ok(vec![])
        }
        async fn verify(&self, _: &Location, _: &BackupMeta) -> crate::backup::Result<()> {
            Ok(())
        }
        async fn delete(&self, _: &Location, _: &BackupMeta) -> crate::backup::Result<()> {
            Ok(())
        }
        async fn check_restorable(&self, _: &Location, _: &str) -> crate::backup::Result<()> {
            Ok(())
        }
        async fn open_for_restore(
            &self,
            _: &Location,
            b: &str,
        ) -> crate::backup::Result<crate::backup::RestoreSource> {
            Ok(crate::backup::RestoreSource::new(b))
        }
        async fn close_restore(&self, _: &crate::backup::RestoreSource) {}
    }
    let m = meta("demo-20260101-000000-001", 1, "aa".into());
    let loc = Location::of("demo", None);
    let e = Bare.chain(&loc, &m).await.expect_err("unsupported");
    assert!(e.to_string().contains("local platform only"), "{e}");
    let r = Bare.open_chain_for_restore(&loc, &m).await.expect("plain");
    assert_eq!((r.replayed.segments, r.replayed.revision), (0, m.revision));
}
