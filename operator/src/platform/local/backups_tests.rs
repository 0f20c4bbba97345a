//! Tests of the local backup store: retention, damaged backups, and a
//! backup set aside for a restore.

use super::*;
use crate::backup::tests::{fake_snapshot, meta};
use crate::backup::{Retained, write_meta};

fn store(state: &std::path::Path) -> (LocalBackups, Location) {
    let store = LocalBackups::new(state, Arc::new(Binaries::new(vec![])));
    (store, Location::of("demo", None))
}

#[tokio::test]
async fn retention_keeps_newest_and_skips_damaged_for_restore() {
    let state = tempfile::tempdir().expect("tempdir");
    let (store, loc) = store(state.path());
    let dir = store.dir(&loc);
    std::fs::create_dir_all(&dir).expect("mkdir");
    for (i, name) in [
        "demo-20260101-000000-001",
        "demo-20260101-000000-002",
        "demo-20260101-000000-003",
        "demo-20260101-000000-004",
    ]
    .iter()
    .enumerate()
    {
        let p = dir.join(format!("{name}.db"));
        fake_snapshot(&p, name.as_bytes());
        let sha = check_file(&p, None).expect("good");
        write_meta(&dir, &meta(name, i as u64, sha)).expect("meta");
    }
    std::fs::write(dir.join(".tmp-x"), b"partial").expect("tmp");
    let r = store.retain(&loc, 2).await.expect("retain");
    assert_eq!(
        r.deleted,
        ["demo-20260101-000000-002", "demo-20260101-000000-001"]
    );
    assert_eq!(
        r.good,
        ["demo-20260101-000000-004", "demo-20260101-000000-003"]
    );
    let listed = store.list(&loc).await.expect("list");
    let names: Vec<String> = listed.into_iter().map(|m| m.name).collect();
    assert_eq!(
        names,
        ["demo-20260101-000000-004", "demo-20260101-000000-003"]
    );
    assert!(
        dir.join(".tmp-x").exists(),
        "not a file of demo's: it stays"
    );
    assert!(store.any_good(&loc).await);
    // Damage the newest: restore falls back to the older good one.
    std::fs::write(
        dir.join("demo-20260101-000000-004.db"),
        b"garbage garbage garbage garbage garbage",
    )
    .expect("write");
    let (good, problems) = store.newest_good(&loc).await.expect("newest");
    assert_eq!(
        good.map(|m| m.name).as_deref(),
        Some("demo-20260101-000000-003")
    );
    assert_eq!(problems.len(), 1);
    assert!(
        store
            .check_restorable(&loc, "demo-20260101-000000-004")
            .await
            .is_err()
    );
    assert!(
        store
            .check_restorable(&loc, "demo-20260101-000000-003")
            .await
            .is_ok()
    );
    let e = store
        .check_restorable(&loc, "nope")
        .await
        .expect_err("missing");
    assert!(e.to_string().contains("demo-20260101-000000-003"), "{e}");
    // Retention does not count the damaged one: with one to keep, the
    // good b3 stays (b4 too, newer, listed as damaged).
    let r = store.retain(&loc, 1).await.expect("retain");
    assert_eq!(
        r,
        Retained {
            deleted: vec![],
            good: vec!["demo-20260101-000000-003".into()],
            damaged: vec!["demo-20260101-000000-004".into()],
        }
    );
    assert!(dir.join("demo-20260101-000000-003.db").is_file());
    // A snapshot deleted by hand: its meta goes at the next retention;
    // the other backups and unrelated files stay.
    std::fs::remove_file(dir.join("demo-20260101-000000-003.db")).expect("rm");
    std::fs::write(dir.join("notes.json"), "{}").expect("other json");
    store.retain(&loc, 1).await.expect("retain");
    assert!(!dir.join("demo-20260101-000000-003.json").exists());
    assert!(dir.join("demo-20260101-000000-004.json").is_file());
    assert!(dir.join("notes.json").is_file());
}

#[tokio::test]
async fn a_backup_is_set_aside_for_a_restore_and_dropped_after() {
    let state = tempfile::tempdir().expect("tempdir");
    let (store, loc) = store(state.path());
    // Another cluster's backup, in its default folder.
    let other = store.dir(&Location::of("old", None));
    std::fs::create_dir_all(&other).expect("mkdir");
    fake_snapshot(&other.join("demo-20260101-000000-001.db"), b"the data");
    let sha = check_file(&other.join("demo-20260101-000000-001.db"), None).expect("good");
    write_meta(&other, &meta("demo-20260101-000000-001", 1, sha)).expect("meta");
    // Not looked for in other folders: the spec says where.
    let e = store
        .open_for_restore(&loc, "demo-20260101-000000-001")
        .await
        .expect_err("not in demo's own folder");
    assert!(
        e.to_string()
            .contains(&format!("{} (backups of demo)", store.dir(&loc).display())),
        "{e}"
    );
    let from = crate::validate::RestoreFrom {
        path: Some(other.clone()),
        ..Default::default()
    };
    let there = Location::restore("demo", "demo-20260101-000000-001", &from);
    let source = store
        .open_for_restore(&there, "demo-20260101-000000-001")
        .await
        .expect("found");
    let copy = state.path().join("clusters/demo/restore.db");
    assert_eq!(source.as_str(), copy.to_string_lossy());
    check_file(&copy, None).expect("a good copy");
    assert!(!store.any_good(&loc).await, "demo itself has no backup");
    store.close_restore(&source).await;
    assert!(!copy.exists());
    assert!(
        other.join("demo-20260101-000000-001.db").is_file(),
        "the backup itself stays"
    );
}

/// `spec.restore` names another cluster's backup: found in that cluster's
/// folder only, and only among its backups (a file of that name another
/// cluster's meta claims is never picked).
#[tokio::test]
async fn a_restore_reads_the_named_clusters_backups_only() {
    let state = tempfile::tempdir().expect("tempdir");
    let (store, _) = store(state.path());
    let name = "example-20260101-000000-001";
    let put = |dir: &std::path::Path, data: &[u8], cluster: &str| {
        std::fs::create_dir_all(dir).expect("mkdir");
        fake_snapshot(&dir.join(format!("{name}.db")), data);
        let sha = check_file(&dir.join(format!("{name}.db")), None).expect("good");
        let mut m = meta(name, 1, sha);
        m.cluster = cluster.into();
        write_meta(dir, &m).expect("meta");
    };
    let example = store.dir(&Location::of("example", None));
    put(&example, b"example's data", "example");
    let elsewhere = state.path().join("elsewhere");
    put(&elsewhere, b"an impostor", "other");
    // By default: the cluster the name says, in its default folder.
    let by_name = Location::restore("rs", name, &crate::validate::RestoreFrom::default());
    assert_eq!(by_name.owner(), "example");
    let (path, _) = store.locate(&by_name, name).expect("example's");
    assert_eq!(path, example.join(format!("{name}.db")));
    // A folder holding only another cluster's backup of that name: refused,
    // naming the folder and whose backups were looked for.
    let from = crate::validate::RestoreFrom {
        path: Some(elsewhere.clone()),
        ..Default::default()
    };
    let e = store
        .locate(&Location::restore("rs", name, &from), name)
        .expect_err("not example's");
    let e = e.to_string();
    assert!(
        e.contains(&format!("{} (backups of example)", elsewhere.display())) && e.contains("none"),
        "{e}"
    );
    // Named explicitly, in example's folder: found.
    let from = crate::validate::RestoreFrom {
        cluster: Some("example".into()),
        path: Some(example.clone()),
        ..Default::default()
    };
    let (path, _) = store
        .locate(&Location::restore("rs", name, &from), name)
        .expect("example's");
    assert_eq!(path, example.join(format!("{name}.db")));
}
