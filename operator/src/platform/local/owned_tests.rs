//! Tests that the local store sees and deletes only a cluster's own
//! backups when clusters share a backup folder, and never a file it did
//! not write (issue 26, items 1 and 3), with real files.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::backups::LocalBackups;
use super::binaries::Binaries;
use crate::backup::tests::{fake_snapshot, meta};
use crate::backup::{BackupMeta, BackupStore, Location, check_file, name_prefix, write_meta};

const GOOD: &str = "3f2a9c1e-0000-4000-8000-000000000001";
const RB: &str = "9b7c0d11-0000-4000-8000-000000000002";
const BIG: &str = "c0ffee00-0000-4000-8000-000000000003";

/// The store of a state folder, and the location `shared` of `cluster`.
fn shared(state: &Path, cluster: &str, uid: &str) -> (LocalBackups, Location) {
    let store = LocalBackups::new(state, Arc::new(Binaries::new(vec![])));
    let policy = crate::validate::BackupPolicy {
        interval: Duration::from_secs(60),
        max_backups: 1,
        path: Some(PathBuf::from("shared")),
        persistent_volume_claim: None,
        claim_size: None,
        storage_class: None,
        object: None,
        restore_check: None,
        continuous: None,
    };
    let loc = Location::of(cluster, Some(&policy)).with_uid(Some(uid));
    (store, loc)
}

/// Writes a good backup of `cluster` (`uid`; none: the old form) taken at
/// `ms`, as a save does.
fn backup(dir: &Path, cluster: &str, uid: Option<&str>, ms: u64) -> BackupMeta {
    std::fs::create_dir_all(dir).expect("mkdir");
    let name = format!("{}-20261205-000000-{ms:03}", name_prefix(cluster, uid));
    let path = dir.join(format!("{name}.db"));
    fake_snapshot(&path, name.as_bytes());
    let m = BackupMeta {
        cluster: cluster.into(),
        uid: uid.map(str::to_string),
        ..meta(&name, ms, check_file(&path, None).expect("good"))
    };
    write_meta(dir, &m).expect("meta");
    m
}

fn names(list: &[BackupMeta]) -> Vec<&str> {
    list.iter().map(|m| m.name.as_str()).collect()
}

/// Sets `path`'s modification time an hour back.
fn age(path: &Path) {
    let f = std::fs::File::options()
        .write(true)
        .open(path)
        .expect("open");
    f.set_modified(SystemTime::now() - Duration::from_secs(3600))
        .expect("mtime");
}

#[tokio::test]
async fn clusters_sharing_a_folder_list_keep_and_rebuild_from_their_own_only() {
    let state = tempfile::tempdir().expect("tempdir");
    let (store, good) = shared(state.path(), "good", GOOD);
    let (_, rb) = shared(state.path(), "rb", RB);
    let (_, big) = shared(state.path(), "big", BIG);
    let dir = store.dir(&good);
    assert_eq!(dir, store.dir(&rb), "one folder");
    let rb_own = backup(&dir, "rb", Some(RB), 1);
    let good_all: Vec<BackupMeta> = (2..6)
        .map(|ms| backup(&dir, "good", Some(GOOD), ms))
        .collect();
    // A backup of `big` in flight: its temporary file, just written.
    let in_flight = dir.join(format!(
        ".tmp-{}-20261205-000000-999.db",
        name_prefix("big", Some(BIG))
    ));
    std::fs::write(&in_flight, b"streaming").expect("tmp");
    age(&in_flight);
    let big_own = backup(&dir, "big", Some(BIG), 6);

    // Each lists its own only; the newest good one of rb is rb's, although
    // good's are newer.
    assert_eq!(names(&store.list(&rb).await.expect("list")), [&rb_own.name]);
    let (newest, _) = store.newest_good(&rb).await.expect("newest");
    assert_eq!(newest.map(|m| m.name), Some(rb_own.name.clone()));
    assert_eq!(store.list(&good).await.expect("list").len(), 4);
    assert!(store.any_good(&rb).await);
    assert_eq!(store.shared_with(&rb).await, ["big", "good"]);

    // Each one's retention deletes its own only.
    let kept = store.retain(&rb, 1).await.expect("retain");
    assert!(kept.deleted.is_empty(), "{kept:?}");
    let kept = store.retain(&good, 1).await.expect("retain");
    assert_eq!(kept.good, std::slice::from_ref(&good_all[3].name));
    assert_eq!(kept.deleted.len(), 3);
    assert!(
        rb_own.path(&dir).is_file(),
        "rb's backup survives good's retention"
    );
    assert!(big_own.path(&dir).is_file());
    assert!(
        in_flight.is_file(),
        "another cluster's temporary file stays"
    );
    let deleting = store.delete(&rb, &good_all[3]).await;
    assert!(deleting.is_err(), "rb cannot delete good's backup");
    assert!(good_all[3].path(&dir).is_file());

    // A cluster re-created under the name good (a new uid) is another
    // cluster: none of the first one's backups are its.
    let (_, again) = shared(state.path(), "good", "77777777-0000");
    assert!(store.list(&again).await.expect("list").is_empty());
    assert_eq!(
        store.shared_with(&again).await,
        [
            "big".to_string(),
            format!("good (an earlier cluster, uid {GOOD})"),
            "rb".to_string()
        ]
    );
    let (newest, _) = store.newest_good(&again).await.expect("newest");
    assert_eq!(newest, None, "never rebuilt from another cluster's backup");
    store.sweep(&again).await;
    assert!(good_all[3].path(&dir).is_file());
    let _ = big;
}

#[tokio::test]
async fn a_backup_from_before_uids_stays_its_clusters_only() {
    let state = tempfile::tempdir().expect("tempdir");
    let (store, good) = shared(state.path(), "good", GOOD);
    let (_, rb) = shared(state.path(), "rb", RB);
    let dir = store.dir(&good);
    let old_good = backup(&dir, "good", None, 1);
    let old_rb = backup(&dir, "rb", None, 2);
    assert_eq!(
        names(&store.list(&good).await.expect("list")),
        [&old_good.name]
    );
    assert_eq!(names(&store.list(&rb).await.expect("list")), [&old_rb.name]);
    let new_rb = backup(&dir, "rb", Some(RB), 3);
    let kept = store.retain(&rb, 1).await.expect("retain");
    assert_eq!(kept.deleted, std::slice::from_ref(&old_rb.name));
    assert_eq!(kept.good, std::slice::from_ref(&new_rb.name));
    assert!(old_good.path(&dir).is_file(), "good's old backup stays");
}

#[tokio::test]
async fn a_sweep_deletes_only_what_its_cluster_left_behind() {
    let state = tempfile::tempdir().expect("tempdir");
    let (store, good) = shared(state.path(), "good", GOOD);
    let dir = store.dir(&good);
    let kept = backup(&dir, "good", Some(GOOD), 1);
    let foreign = [
        ".tmp-user-notes.txt",
        "other.delta-00000001.seg",
        "config.json",
        ".seg-tmp-other.delta-00000001.seg",
        "rb.9b7c0d11-20261205-000000-001.db",
        "good.77777777-20261205-000000-001.db",
        ".tmp-rb.9b7c0d11-20261205-000000-002.db",
    ];
    for f in foreign {
        std::fs::write(dir.join(f), b"not good's").expect("write");
        age(&dir.join(f));
    }
    // What a cut-off save of good left: an old temporary file, an old
    // snapshot without its meta (killed between the rename and the meta),
    // and a segment whose base is gone; a snapshot without its meta that
    // is new is a save still verifying: it stays.
    let p = name_prefix("good", Some(GOOD));
    let left = [
        format!(".tmp-{p}-20261205-000000-002.db"),
        format!("{p}-20261205-000000-003.db"),
        format!("{p}-20261205-000000-004.delta-00000001.seg"),
        format!(".seg-tmp-{p}-20261205-000000-001.delta-00000002.seg"),
    ];
    for f in &left {
        std::fs::write(dir.join(f), b"cut off").expect("write");
        age(&dir.join(f));
    }
    let fresh = dir.join(format!("{p}-20261205-000000-005.db"));
    std::fs::write(&fresh, b"verifying").expect("write");

    for _ in 0..2 {
        store.retain(&good, 1).await.expect("retain");
    }
    for f in foreign {
        assert!(dir.join(f).is_file(), "{f} was deleted");
    }
    for f in &left {
        assert!(!dir.join(f).exists(), "{f} was left");
    }
    assert!(fresh.is_file(), "a save in progress is not swept");
    assert!(kept.path(&dir).is_file());
}
