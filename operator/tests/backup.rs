//! Backups on a policy, restore into a new cluster, and recovery from
//! quorum loss, against real etcd.

use sha2::Digest as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use etcd_operator::backup::{self, BackupMeta};
use etcd_operator::crd::{EtcdCluster, MemberStatus};
use etcd_operator::testing::{Env, binaries, client_urls, kill9, manifest};

fn with_backup(name: &str, interval: &str, keep: u32, restore_flag: bool) -> String {
    let mut m = manifest(name, 3, "3.4.23");
    m.push_str(&format!(
        "  backup:\n    interval: {interval}\n    maxBackups: {keep}\n"
    ));
    if restore_flag {
        // The backup path itself: a kept member would otherwise seed the
        // rebuild (fromSurvivor follows restoreFromBackup; tests/survivor.rs).
        m.push_str("  recovery:\n    restoreFromBackup: true\n    fromSurvivor: false\n");
    }
    m
}

fn put_keys(env: &Env, urls: &[String], prefix: &str, n: usize) {
    for i in 0..n {
        let out = env.etcdctl(
            urls,
            &["put", &format!("{prefix}{i:03}"), &format!("value-{i}")],
        );
        assert!(out.status.success(), "put: {out:?}");
    }
}

/// `key=value` lines of every key (at `rev` when given).
fn dump(env: &Env, urls: &[String], rev: Option<i64>) -> Vec<String> {
    let mut args = vec!["get", "", "--prefix"];
    let rev_arg = rev.map(|r| format!("--rev={r}"));
    if let Some(r) = &rev_arg {
        args.push(r);
    }
    let out = env.etcdctl(urls, &args);
    assert!(out.status.success(), "get: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<&str> = text.lines().collect();
    lines.chunks(2).map(|kv| kv.join("=")).collect()
}

fn backups(env: &Env, cluster: &str) -> (PathBuf, Vec<BackupMeta>) {
    let dir = env.state.join("backups").join(cluster);
    let list = backup::list(&dir).expect("list backups");
    (dir, list)
}

/// Both official tools open the snapshot and agree with its meta.
fn check_with_tools(path: &Path, meta: &BackupMeta) {
    let tools = [
        (binaries().join("3.5.1/etcdutl"), "etcdutl"),
        (binaries().join("3.4.23/etcdctl"), "etcdctl"),
    ];
    for (tool, label) in tools {
        let out = Command::new(&tool)
            .env("ETCDCTL_API", "3")
            .args(["snapshot", "status", "-w", "json"])
            .arg(path)
            .output()
            .expect("run tool");
        assert!(out.status.success(), "{label} snapshot status: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let json = text
            .lines()
            .find(|l| l.starts_with('{'))
            .expect("json line");
        let v: serde_json::Value = serde_json::from_str(json).expect("json");
        assert_eq!(
            v["revision"].as_i64(),
            Some(meta.revision),
            "{label}: {text}"
        );
        assert_eq!(
            v["totalKey"].as_i64(),
            Some(meta.total_keys),
            "{label}: {text}"
        );
    }
}

fn now_ms() -> u64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock");
    u64::try_from(d.as_millis()).expect("ms")
}

#[test]
fn scheduled_backups_retention_and_restore_into_a_new_cluster() {
    let mut env = Env::new();
    env.write_manifest("src.yaml", &with_backup("src", "1s", 2, false));
    env.start_operator();
    let c = env.wait_running("src", 3);
    let urls = client_urls(&c);
    put_keys(&env, &urls, "k", 30);

    // Backups appear on schedule; retention keeps two. They are copied
    // aside to be checked: retention deletes one each second.
    let mut seen = std::collections::BTreeSet::new();
    let aside = tempfile::tempdir().expect("tempdir");
    let kept = env.wait_for("four backups taken, two kept", || {
        let (dir, list) = backups(&env, "src");
        seen.extend(list.iter().map(|m| m.name.clone()));
        (seen.len() >= 4 && list.len() == 2).then_some(())?;
        for m in &list {
            std::fs::copy(m.path(&dir), m.path(aside.path())).ok()?;
        }
        Some(list)
    });
    for m in &kept {
        check_with_tools(&m.path(aside.path()), m);
    }
    let status = env.wait_for("backup status", || {
        let b = env.status("src")?.status?.backup?;
        (b.kept == 2 && b.last_backup.is_some()).then_some(b)
    });
    assert!(status.last_error.is_none(), "{status:?}");

    // `backup` takes one now; `backups` lists it as good.
    let out = env.operator_cli(&["backup", "src"]);
    assert!(out.status.success(), "backup: {out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("verified by"));
    let out = env.operator_cli(&["backups", "src"]);
    assert!(out.status.success(), "backups: {out:?}");
    let listing = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        listing.contains("ok") && !listing.contains("DAMAGED"),
        "{listing}"
    );

    // More writes after the backup we restore from: they must not appear.
    let (_, list) = backups(&env, "src");
    let chosen = list[0].clone();
    put_keys(&env, &urls, "late", 5);
    env.write_manifest(
        "copy.yaml",
        &format!(
            "{}  restore:\n    backup: {}\n",
            manifest("copy", 3, "3.4.23"),
            chosen.name
        ),
    );
    let copy = env.wait_running("copy", 3);
    let restored = dump(&env, &client_urls(&copy), None);
    let original = dump(&env, &urls, Some(chosen.revision));
    assert_eq!(
        restored, original,
        "the restored keys are those at the backup's revision"
    );
    assert!(restored.iter().any(|kv| kv.starts_with("k029=")));
    assert!(!restored.iter().any(|kv| kv.starts_with("late")));
}

#[test]
fn bad_backup_settings_and_restore_sources_are_rejected() {
    let mut env = Env::new();
    env.write_manifest("fast.yaml", &with_backup("fast", "500ms", 3, false));
    env.write_manifest("none.yaml", &with_backup("none", "10s", 0, false));
    let junk = env.dir.path().join("junk.db");
    std::fs::write(&junk, b"this is not an etcd snapshot, not even close").expect("junk");
    let restore = |name: &str, source: &str| {
        format!(
            "{}  restore:\n    backup: {source}\n",
            manifest(name, 3, "3.4.23")
        )
    };
    // A valid SHA-256 trailer with no database inside: only etcd's own
    // tools can tell (its members would crash-loop forever).
    let hollow = env.dir.path().join("hollow.db");
    let content = vec![7u8; 4096];
    let mut bytes = content.clone();
    bytes.extend_from_slice(&sha2::Sha256::digest(&content));
    std::fs::write(&hollow, bytes).expect("hollow");
    env.write_manifest(
        "hollow.yaml",
        &restore("hollow", &hollow.display().to_string()),
    );
    env.write_manifest("missing.yaml", &restore("missing", "no-such-backup"));
    env.write_manifest(
        "junk.yaml",
        &restore("junkrestore", &junk.display().to_string()),
    );
    env.start_operator();
    for (cluster, needles) in [
        ("fast", vec!["spec.backup.interval", "at least 1s"]),
        ("none", vec!["spec.backup.maxBackups", "at least 1"]),
        (
            "missing",
            vec!["spec.restore.backup", "no backup \"no-such-backup\""],
        ),
        (
            "junkrestore",
            vec!["spec.restore.backup", "not an etcd snapshot"],
        ),
        (
            "hollow",
            vec!["spec.restore.backup", "snapshot status failed"],
        ),
    ] {
        // First "checking the snapshot ...", then the verdict.
        let message = env.wait_for(&format!("{cluster} rejected"), || {
            let s = env.status(cluster)?.status?;
            let m = s.condition("Degraded")?.message.clone();
            (s.phase.as_str() == "Invalid" && needles.iter().all(|n| m.contains(n))).then_some(m)
        });
        for n in needles {
            assert!(message.contains(n), "{cluster}: {message}");
        }
        assert!(
            env.layout()
                .member_names(cluster)
                .expect("members")
                .is_empty()
        );
    }
}

/// A 3-member cluster `name` with backups every second and
/// `restoreFromBackup` on, ten keys written and a backup taken.
fn ten_keys_and_a_backup(name: &str) -> (Env, Vec<String>, Vec<MemberStatus>) {
    let mut env = Env::new();
    env.write_manifest(&format!("{name}.yaml"), &with_backup(name, "1s", 2, true));
    env.start_operator();
    let c = env.wait_running(name, 3);
    let urls = client_urls(&c);
    put_keys(&env, &urls, "k", 10);
    env.wait_for("a backup", || {
        (!backups(&env, name).1.is_empty()).then_some(())
    });
    (env, urls, c.status.expect("status").members)
}

/// Waits until `cluster` runs again with exactly `members` (same ids).
fn back_with_the_same_members(env: &Env, cluster: &str, members: &[MemberStatus]) -> EtcdCluster {
    let before: Vec<Option<&str>> = members.iter().map(|m| m.id.as_deref()).collect();
    env.wait_for("back with the same members", || {
        let c = env.wait_running(cluster, 3);
        let ids: Vec<Option<&str>> = c
            .status
            .as_ref()?
            .members
            .iter()
            .map(|m| m.id.as_deref())
            .collect();
        (ids == before).then_some(())?;
        Some(c)
    })
}

#[test]
fn quorum_loss_with_data_intact_comes_back_without_restore() {
    let (env, urls, members) = ten_keys_and_a_backup("q");
    for m in &members[..2] {
        kill9(env.pid("q", &m.name).expect("runs"));
    }
    let c = back_with_the_same_members(&env, "q", &members);
    assert!(
        c.status.expect("status").last_recovery.is_none(),
        "no restore happened"
    );
    assert_eq!(dump(&env, &urls, None).len(), 10, "nothing lost");
}

/// The newest revision any of `urls` is at.
fn revision(env: &Env, urls: &[String]) -> i64 {
    let out = env.etcdctl(urls, &["endpoint", "status", "-w", "json"]);
    assert!(out.status.success(), "endpoint status: {out:?}");
    let v: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("json");
    v.iter()
        .filter_map(|e| e["Status"]["header"]["revision"].as_i64())
        .max()
        .expect("a revision")
}

fn rfc3339_ms(t: &str) -> u64 {
    let t = humantime::parse_rfc3339(t).expect("rfc3339");
    let d = t
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after epoch");
    u64::try_from(d.as_millis()).expect("ms")
}

#[test]
fn destroyed_majority_is_rebuilt_from_backup_or_waits_when_the_flag_is_off() {
    let mut env = Env::new();
    env.write_manifest("on.yaml", &with_backup("on", "1s", 3, true));
    env.write_manifest("off.yaml", &with_backup("off", "1s", 3, false));
    env.start_operator();
    let on = env.wait_running("on", 3);
    let off = env.wait_running("off", 3);
    let on_urls = client_urls(&on);
    put_keys(&env, &on_urls, "k", 10);
    let written = now_ms();
    env.wait_for("two backups of `on` after the writes, one of `off`", || {
        let after = backups(&env, "on")
            .1
            .iter()
            .filter(|m| m.unix_ms > written)
            .count();
        (after >= 2 && !backups(&env, "off").1.is_empty()).then_some(())
    });
    // Stop the schedule first (an hour between backups), so that no newer
    // backup hides the damaged one.
    env.write_manifest("on.yaml", &with_backup("on", "1h", 3, true));
    env.wait_for("`on` backs up hourly now", || {
        let next = env.status("on")?.status?.backup?.next_backup_time?;
        (rfc3339_ms(&next) > now_ms() + 30 * 60 * 1000).then_some(())
    });
    // Damage the newest backup of `on`: it must be detected and not used.
    let (dir, list) = backups(&env, "on");
    let (damaged, good) = (list[0].clone(), list[1].clone());
    let mut bytes = std::fs::read(damaged.path(&dir)).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(damaged.path(&dir), bytes).expect("damage");
    // Writes after every backup: these are what the rebuild loses.
    put_keys(&env, &on_urls, "late", 5);
    let last = revision(&env, &on_urls);
    env.wait_for("the operator saw the last revision", || {
        (env.status("on")?.status?.revision? >= last).then_some(())
    });

    for (cluster, c) in [("on", &on), ("off", &off)] {
        for m in &c.status.as_ref().expect("status").members[..2] {
            env.destroy(cluster, &m.name);
        }
    }
    // Flag on: rebuilt from the newest *good* backup, and the loss reported
    // exactly: the late writes' revisions.
    let (c, recovery) = env.wait_rebuilt("on rebuilt from a backup", "on", 3);
    assert_eq!(
        recovery.backup, good.name,
        "the damaged newest backup was skipped for the one before: {recovery:?}"
    );
    assert_eq!(recovery.backup_revision, good.revision, "{recovery:?}");
    assert_eq!(recovery.last_seen_revision, last, "{recovery:?}");
    assert_eq!(
        recovery.lost_revisions,
        last - good.revision,
        "{recovery:?}"
    );
    assert!(recovery.lost_revisions >= 5, "{recovery:?}");
    assert!(
        Path::new(&recovery.old_data).is_dir(),
        "old data kept: {recovery:?}"
    );
    let keys = dump(&env, &client_urls(&c), None);
    assert_eq!(
        keys.len(),
        10,
        "the backup's keys, not the late ones: {keys:?}"
    );
    assert!(keys.iter().all(|kv| kv.starts_with('k')), "{keys:?}");
    let log = std::fs::read_to_string(env.operator_log()).expect("operator log");
    assert!(
        log.contains("skipping a damaged backup") && log.contains(&damaged.name),
        "the damaged backup is logged"
    );
    assert!(
        log.contains(&format!(
            "so {} revisions written after",
            last - good.revision
        )),
        "the loss is logged"
    );

    // Flag off: Degraded with the reason, and it waits: nothing is rebuilt
    // or moved while later statuses come out.
    let (message, seen_at) = env.wait_for("off degraded", || {
        let s = env.status("off")?.status?;
        let d = s.condition("Degraded")?;
        (s.phase.as_str() == "Degraded" && d.reason == "QuorumLost")
            .then(|| (d.message.clone(), s.observed_at.clone()))
    });
    assert!(message.contains("restoreFromBackup"), "{message}");
    let status = env.wait_for("a later status of off", || {
        let s = env.status("off")?.status?;
        (s.observed_at != seen_at).then_some(s)
    });
    assert_eq!(status.phase.as_str(), "Degraded", "{status:?}");
    assert!(status.last_recovery.is_none());
    let moved = std::fs::read_dir(env.layout().cluster_dir("off"))
        .expect("cluster dir")
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("lost-"));
    assert!(!moved, "no data moved aside with the flag off");
}

#[test]
fn a_failing_backup_is_reported_retried_and_recovers() {
    let mut env = Env::new();
    // The backup folder is a file at first: every backup fails.
    let blocked = env.dir.path().join("blocked");
    std::fs::write(&blocked, "not a folder").expect("write");
    let mut m = with_backup("fails", "1s", 2, false);
    m.push_str(&format!(
        "    location:\n      path: {}\n",
        blocked.display()
    ));
    env.write_manifest("fails.yaml", &m);
    env.start_operator();
    env.wait_running("fails", 3);
    let error = env.wait_for("a second failed attempt reported", || {
        let e = env.status("fails")?.status?.backup?.last_error?;
        let attempt: u32 = e
            .split("attempt ")
            .nth(1)?
            .split(',')
            .next()?
            .parse()
            .ok()?;
        (attempt >= 2).then_some(e)
    });
    assert!(error.contains("will retry"), "{error}");
    // Fixed: the next retry succeeds and the error clears.
    std::fs::remove_file(&blocked).expect("unblock");
    let status = env.wait_for("a backup after the fix", || {
        let b = env.status("fails")?.status?.backup?;
        (b.last_error.is_none() && b.kept >= 1).then_some(b)
    });
    assert!(status.last_backup.is_some(), "{status:?}");
    assert!(!backup::list(&blocked).expect("list").is_empty());
}

#[test]
fn members_that_fail_for_a_passing_cause_without_quorum_are_not_given_up_for_a_backup() {
    use etcd_operator::platform::local::process;
    use rustix::process::Signal;
    let (env, urls, members) = ten_keys_and_a_backup("loop");
    let operator = env.operator_process().expect("operator runs");
    // With the operator held, kill two members and take their peer ports:
    // every restart fails at once ("address already in use"), data intact.
    process::signal(&operator, Signal::STOP).expect("SIGSTOP the operator");
    let mut taken = Vec::new();
    for m in &members[..2] {
        kill9(env.pid("loop", &m.name).expect("runs"));
        let addr = m.peer_url.trim_start_matches("http://").to_string();
        taken.push(env.wait_for(&format!("{addr} free to take"), || {
            std::net::TcpListener::bind(&addr).ok()
        }));
    }
    process::signal(&operator, Signal::CONT).expect("SIGCONT the operator");
    // More fast failures than make a crash loop with quorum (3): without
    // quorum the operator keeps trying instead of rebuilding from a backup.
    let crashes = |name: &str| {
        std::fs::read_to_string(env.operator_log())
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(&format!("member={name} crashed=true")))
            .count()
    };
    env.wait_for("both members failed at least 4 times", || {
        members[..2]
            .iter()
            .all(|m| crashes(&m.name) >= 4)
            .then_some(())
    });
    let status = env.status("loop").and_then(|c| c.status).expect("status");
    assert!(status.last_recovery.is_none(), "no rebuild: {status:?}");
    // The cause passes: the members come back with all their data. The
    // one whose restart comes second may find quorum back and be replaced
    // as crash-looping (the rule with quorum), but the cluster is the same
    // one: no rebuild, and at least a quorum of the original members.
    drop(taken);
    let before: Vec<Option<&str>> = members.iter().map(|m| m.id.as_deref()).collect();
    let c = env.wait_for("back with a quorum of the same members", || {
        let c = env.wait_running("loop", 3);
        let kept = c
            .status
            .as_ref()?
            .members
            .iter()
            .filter(|m| before.contains(&m.id.as_deref()))
            .count();
        (kept >= 2).then_some(c)
    });
    assert!(c.status.expect("status").last_recovery.is_none());
    assert_eq!(dump(&env, &urls, None).len(), 10, "nothing lost");
}
