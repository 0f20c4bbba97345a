//! `check-backup`: a backup restored into a scratch member is compared with
//! the live cluster at its revision (etcd HashKV), against real etcd: a good
//! backup is verified, a snapshot whose content differs is a mismatch, and
//! a revision the cluster compacted away is unverifiable.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use etcd_operator::backup::proof::Verdict;
use etcd_operator::backup::{self, BackupMeta};
use etcd_operator::testing::{
    Env, client_urls, etcd_binary, etcdctl, free_loopback, manifest, single_member_args,
};

fn backups(env: &Env) -> (PathBuf, Vec<BackupMeta>) {
    let dir = env.state.join("backups").join("rc");
    let list = backup::list(&dir).expect("list backups");
    (dir, list)
}

fn meta(env: &Env, name: &str) -> BackupMeta {
    let (_, list) = backups(env);
    list.into_iter()
        .find(|m| m.name == name)
        .expect("the backup is listed")
}

/// Puts `key=value` and returns the revision etcd answered with.
fn put(endpoint: &str, key: &str, value: &str) -> i64 {
    let out = Command::new(etcdctl())
        .env("ETCDCTL_API", "3")
        .args([
            "--endpoints",
            endpoint,
            "--command-timeout=5s",
            "-w",
            "json",
        ])
        .args(["put", key, value])
        .output()
        .expect("etcdctl put");
    assert!(out.status.success(), "put: {out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    v["header"]["revision"].as_i64().expect("a revision")
}

/// A standalone etcd, killed when dropped (also when the test fails).
struct Standalone(Child);

impl Drop for Standalone {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A snapshot of another cluster at `revision`: the same revision as the
/// backup, other content; a good etcd snapshot with a correct trailer.
fn foreign_snapshot(env: &Env, revision: i64, to: &std::path::Path) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ip = free_loopback("restore-check-foreign", &HashSet::new());
    let client = format!("http://{ip}:2379");
    let child = Command::new(etcd_binary("3.4.23"))
        .args(single_member_args("foreign", ip, &dir.path().join("data")))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start etcd");
    let _guard = Standalone(child);
    let mut rev = env.wait_for("the foreign etcd serves", || {
        let out = Command::new(etcdctl())
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &client, "--command-timeout=1s", "-w", "json"])
            .args(["put", "other-0", "x"])
            .output()
            .ok()?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        v["header"]["revision"].as_i64()
    });
    let mut i = 1;
    while rev < revision {
        rev = put(&client, &format!("other-{i}"), "not the cluster's");
        i += 1;
    }
    assert_eq!(rev, revision, "the foreign cluster overshot");
    let out = Command::new(etcdctl())
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &client, "snapshot", "save"])
        .arg(to)
        .output()
        .expect("snapshot save");
    assert!(out.status.success(), "snapshot save: {out:?}");
}

#[test]
fn a_backup_is_verified_a_foreign_snapshot_mismatches_a_compacted_one_is_unverifiable() {
    let mut env = Env::new();
    env.write_manifest("rc.yaml", &manifest("rc", 1, "3.4.23"));
    env.start_operator();
    let c = env.wait_running("rc", 1);
    let url = client_urls(&c).remove(0);
    for i in 0..20 {
        put(&url, &format!("k{i:02}"), "v");
    }
    let out = env.operator_cli(&["backup", "rc"]);
    assert!(out.status.success(), "backup: {out:?}");
    let b1 = backups(&env).1.remove(0);

    // Never checked yet: the listing says so.
    let listing = env.operator_cli(&["backups", "rc"]);
    assert!(String::from_utf8_lossy(&listing.stdout).contains("never"));

    // The newest backup restores to what the cluster held.
    let out = env.operator_cli(&["check-backup", "rc"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "check-backup: {out:?}");
    assert!(text.contains("verified"), "{text}");
    let check = meta(&env, &b1.name).restore_check.expect("recorded");
    assert_eq!(check.result, Verdict::Verified);
    assert!(check.live_hash.is_some(), "{check:?}");
    assert_eq!(check.backup_hash, check.live_hash);
    assert!(!env.state.join("clusters/rc/restore-check").exists());
    let listing = env.operator_cli(&["backups", "rc"]);
    assert!(String::from_utf8_lossy(&listing.stdout).contains("verified at"));

    // A second backup, replaced by another cluster's snapshot at the same
    // revision: it checks out as a file (trailer, hash in its meta), but it
    // is not what the cluster held.
    for i in 0..5 {
        put(&url, &format!("later{i}"), "w");
    }
    let out = env.operator_cli(&["backup", "rc"]);
    assert!(out.status.success(), "backup: {out:?}");
    let (dir, list) = backups(&env);
    let mut b2 = list.into_iter().find(|m| m.name != b1.name).expect("b2");
    foreign_snapshot(&env, b2.revision, &b2.path(&dir));
    b2.sha256 = backup::check_file(&b2.path(&dir), None).expect("a good file");
    backup::write_meta(&dir, &b2).expect("meta");
    let out = env.operator_cli(&["check-backup", "rc", &b2.name]);
    assert_eq!(out.status.code(), Some(3), "check-backup: {out:?}");
    let check = meta(&env, &b2.name).restore_check.expect("recorded");
    assert_eq!(check.result, Verdict::Mismatch, "{check:?}");
    assert!(check.backup_hash.is_some() && check.live_hash.is_some());
    assert_ne!(check.backup_hash, check.live_hash);
    let listing = env.operator_cli(&["backups", "rc"]);
    assert!(String::from_utf8_lossy(&listing.stdout).contains("MISMATCH"));

    // The live cluster compacts past the first backup's revision: nothing
    // to compare it with, and the check says so rather than guess.
    let now = put(&url, "after", "x");
    let out = env.etcdctl(std::slice::from_ref(&url), &["compact", &now.to_string()]);
    assert!(out.status.success(), "compact: {out:?}");
    let out = env.operator_cli(&["check-backup", "rc", &b1.name]);
    assert_eq!(out.status.code(), Some(4), "check-backup: {out:?}");
    let check = meta(&env, &b1.name).restore_check.expect("recorded");
    assert_eq!(check.result, Verdict::Unverifiable);
    assert!(check.message.contains("compacted"), "{check:?}");

    // Bad input names what is wrong.
    let out = env.operator_cli(&["check-backup", "rc", "no-such-backup"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains(&b1.name));
    assert!(!env.state.join("clusters/rc/restore-check").exists());
}

/// `spec.backup.restoreCheck`: the operator proves the newest backup on its
/// own, records it in the backup's meta and shows it in the status.
#[test]
fn a_scheduled_restore_check_verifies_the_newest_backup() {
    let mut env = Env::new();
    let mut m = manifest("rc", 1, "3.4.23");
    m.push_str(
        "  backup:\n    interval: 1h\n    maxBackups: 2\n    restoreCheck:\n      interval: 1h\n",
    );
    env.write_manifest("rc.yaml", &m);
    env.start_operator();
    let c = env.wait_running("rc", 1);
    let url = client_urls(&c).remove(0);
    for i in 0..5 {
        put(&url, &format!("k{i}"), "v");
    }
    let shown = env.wait_for("a restore check in the status", || {
        env.status("rc")?.status?.backup?.last_restore_check
    });
    assert_eq!(shown.result, "verified", "{shown:?}");
    let check = meta(&env, &shown.backup).restore_check.expect("recorded");
    assert_eq!(check.result, Verdict::Verified);
    assert!(check.live_hash.is_some() && check.backup_hash == check.live_hash);
    assert!(!env.state.join("clusters/rc/restore-check").exists());
}
