//! Kept records and database handles: symlinks refused, names checked,
//! records kept until written or deleted, stamps that follow the file.

use std::sync::Arc;

use super::*;
use crate::platform::local::binaries::Binaries;

fn platform() -> (tempfile::TempDir, LocalPlatform) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (events, _rx) = tokio::sync::mpsc::unbounded_channel();
    let binaries = Arc::new(Binaries::new(vec![]));
    let p = LocalPlatform::open(dir.path().join("state"), binaries, events).expect("open");
    (dir, p)
}

fn member(name: &str) -> MemberRecord {
    serde_json::from_value(serde_json::json!({
        "addr": {
            "name": name,
            "peerUrl": "http://127.31.4.7:2380",
            "clientUrl": "http://127.31.4.7:2379"
        },
        "ip": "127.31.4.7",
        "version": "3.4.23",
        "bootstrap": true,
        "initialCluster": format!("{name}=http://127.31.4.7:2380"),
        "initialState": "new",
        "token": "t"
    }))
    .expect("a record")
}

/// A walk is kept only while what it walked stands: after the platform
/// deleted a member, a symlink planted in its place is refused.
#[test]
fn a_symlink_planted_after_a_delete_is_refused() {
    let (dir, p) = platform();
    p.save_member("demo", &member("demo-0")).expect("saved");
    let parts = ["members", "demo-0"];
    let path = p.path("demo", &parts).expect("a plain folder");
    assert!(p.kept.walked(&path), "walked whole, kept");
    p.remove_dir("demo", &parts).expect("deleted");
    assert!(!p.kept.walked(&path), "forgotten with the folder");
    let outside = dir.path().join("precious");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::os::unix::fs::symlink(&outside, &path).expect("symlink");
    let e = p.path("demo", &parts).expect_err("through a symlink");
    assert!(e.to_string().contains("symlink"), "{e}");
    assert!(p.path("demo", &["members", "demo-0", "data"]).is_err());
    assert!(outside.is_dir());
}

/// A symlink there before the first use is refused, and never kept.
#[test]
fn a_symlink_there_before_the_first_use_is_refused() {
    let (dir, p) = platform();
    let members = p.layout.cluster_dir("demo").join("members");
    std::fs::create_dir_all(&members).expect("mkdir");
    std::os::unix::fs::symlink(dir.path(), members.join("demo-0")).expect("symlink");
    for _ in 0..2 {
        assert!(p.path("demo", &["members", "demo-0"]).is_err());
        assert!(p.record("demo", "demo-0").is_err());
    }
    assert!(!p.kept.walked(&members.join("demo-0")));
}

/// A kept walk never stands in for the name checks: a name that
/// reaches into another cluster's folder is refused even when that
/// folder was walked.
#[test]
fn names_are_checked_even_for_a_walked_path() {
    let (_dir, p) = platform();
    p.save_member("victim", &member("victim-0")).expect("saved");
    p.path("victim", &["members", "victim-0"]).expect("walked");
    assert!(p.path("victim/members/victim-0", &[]).is_err());
    assert!(p.path("victim", &["members/victim-0"]).is_err());
    assert!(p.record("victim/members", "victim-0").is_err());
    assert!(p.record("victim", "../victim").is_err());
}

/// Records are read once and kept; what the platform writes is what
/// it hands out after; a failed write makes it read the file again.
#[test]
fn records_are_kept_until_written_or_deleted() {
    let (_dir, p) = platform();
    assert!(p.record("demo", "demo-0").is_err(), "no member yet");
    let mut r = member("demo-0");
    p.save_member("demo", &r).expect("saved");
    // Read once from the file by a new platform on the same folder
    // would see the same; this one does not read it again.
    let file = p.layout.member_record("demo", "demo-0");
    std::fs::write(&file, "not json").expect("overwrite");
    assert_eq!(p.record("demo", "demo-0").expect("kept"), r);
    r.started_at = Some("2026-12-04T10:00:00.000Z".into());
    p.save_member("demo", &r).expect("saved");
    assert_eq!(p.record("demo", "demo-0").expect("kept"), r);
    // A write that fails (a file where the folder should be) forgets
    // the record: the file decides again.
    let dir = p.layout.member_dir("demo", "demo-0");
    std::fs::remove_dir_all(&dir).expect("rm");
    std::fs::write(&dir, "a file").expect("a file in the way");
    assert!(p.save_member("demo", &r).is_err());
    assert!(
        p.record("demo", "demo-0").is_err(),
        "read again, and unreadable"
    );
    std::fs::remove_file(&dir).expect("rm");
    // Cluster records: absent, written, kept; gone with the cluster.
    assert_eq!(p.cluster_record("demo").expect("readable"), None);
    let record = ClusterRecord {
        generation: 3,
        ..ClusterRecord::default()
    };
    p.write_cluster_record("demo", &record).expect("saved");
    std::fs::write(p.layout.record_path("demo"), "not json").expect("overwrite");
    assert_eq!(p.cluster_record("demo").expect("kept"), Some(record));
    p.remove_dir("demo", &[]).expect("deleted");
    p.kept.forget_cluster("demo", &p.layout.cluster_dir("demo"));
    assert_eq!(p.cluster_record("demo").expect("read again"), None);
}

/// The database file's stamp follows appends, a file renamed over it
/// (etcd's defragmentation) and a wipe; the handle goes when the
/// platform deletes the folder.
#[test]
fn db_stamps_follow_the_file_behind_the_name() {
    let (_dir, p) = platform();
    let snap = p.layout.data_dir("demo", "demo-0").join("member/snap");
    let db = snap.join("db");
    let stamp = || p.db_stamp("demo", "demo-0");
    assert_eq!(stamp(), None, "no file yet");
    std::fs::create_dir_all(&snap).expect("mkdir");
    std::fs::write(&db, vec![0u8; 100]).expect("write");
    assert_eq!(stamp().map(|s| s.0), Some(100));
    std::fs::write(&db, vec![0u8; 300]).expect("grow in place");
    assert_eq!(stamp().map(|s| s.0), Some(300));
    let tmp = snap.join("db.tmp");
    std::fs::write(&tmp, vec![0u8; 50]).expect("write");
    std::fs::rename(&tmp, &db).expect("rename over");
    assert_eq!(
        stamp().map(|s| s.0),
        Some(50),
        "the new file, not the old handle"
    );
    std::fs::remove_file(&db).expect("wipe");
    assert_eq!(stamp(), None);
    std::fs::write(&db, vec![0u8; 70]).expect("write");
    assert_eq!(stamp().map(|s| s.0), Some(70));
    // The folder moved aside by hand (the file keeps a name): the
    // path is followed within RECHECK_EVERY looks.
    let aside = snap.with_file_name("snap-aside");
    std::fs::rename(&snap, &aside).expect("move aside");
    std::fs::create_dir_all(&snap).expect("mkdir");
    std::fs::write(&db, vec![0u8; 90]).expect("write");
    let looks: Vec<Option<u64>> = (0..RECHECK_EVERY).map(|_| stamp().map(|s| s.0)).collect();
    assert_eq!(looks.first(), Some(&Some(70)), "the old file at first");
    assert_eq!(looks.last(), Some(&Some(90)), "{looks:?}");
    std::fs::remove_dir_all(&aside).expect("rm");
    let count = |p: &LocalPlatform| {
        p.kept
            .lock()
            .db_files
            .values()
            .map(HashMap::len)
            .sum::<usize>()
    };
    assert_eq!(count(&p), 1);
    p.remove_dir("demo", &["members", "demo-0"])
        .expect("deleted");
    assert_eq!(count(&p), 0, "no handle keeps a deleted file");
    // A symlink as the database file is not followed.
    std::fs::create_dir_all(&snap).expect("mkdir");
    let elsewhere = snap.join("elsewhere");
    std::fs::write(&elsewhere, vec![0u8; 10]).expect("write");
    std::os::unix::fs::symlink(&elsewhere, &db).expect("symlink");
    assert_eq!(stamp(), None);
}
