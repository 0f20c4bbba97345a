//! Two clusters naming one backup folder keep apart, and a backup folder
//! is never one of the operator's own (issue 26, items 1 and 3), against
//! real etcd.

use std::path::Path;

use etcd_operator::backup::{self, BackupMeta};
use etcd_operator::testing::{Env, client_urls, manifest};

/// A 3-member cluster backing up into `STATE/shared` every `interval`,
/// rebuilt from its backups only (never from a survivor).
fn in_shared(name: &str, interval: &str) -> String {
    let mut m = manifest(name, 3, "3.4.23");
    m.push_str(&format!(
        "  backup:\n    interval: {interval}\n    maxBackups: 2\n    location:\n      path: shared\n"
    ));
    m.push_str("  recovery:\n    restoreFromBackup: true\n    fromSurvivor: false\n");
    m
}

/// Every backup in the shared folder, whoever took it.
fn all(env: &Env) -> Vec<BackupMeta> {
    backup::list(&env.state.join("shared")).expect("list")
}

fn of<'a>(list: &'a [BackupMeta], cluster: &str) -> Vec<&'a BackupMeta> {
    list.iter().filter(|m| m.cluster == cluster).collect()
}

fn put(env: &Env, urls: &[String], key: &str) {
    let out = env.etcdctl(urls, &["put", key, "v"]);
    assert!(out.status.success(), "put: {out:?}");
}

fn keys(env: &Env, urls: &[String]) -> Vec<String> {
    let out = env.etcdctl(urls, &["get", "", "--prefix", "--keys-only"]);
    assert!(out.status.success(), "get: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

fn now_ms() -> u64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after epoch");
    u64::try_from(d.as_millis()).expect("ms")
}

fn rfc3339_ms(t: &str) -> u64 {
    let at = humantime::parse_rfc3339(t).expect("an RFC 3339 time");
    let d = at
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after epoch");
    u64::try_from(d.as_millis()).expect("ms")
}

#[test]
fn two_clusters_in_one_folder_keep_list_and_rebuild_from_their_own() {
    let mut env = Env::new();
    env.write_manifest("good.yaml", &in_shared("good", "1s"));
    env.write_manifest("rb.yaml", &in_shared("rb", "2s"));
    env.start_operator();
    let good = env.wait_running("good", 3);
    let rb = env.wait_running("rb", 3);
    let (good_urls, rb_urls) = (client_urls(&good), client_urls(&rb));
    put(&env, &rb_urls, "rb-own-key");
    put(&env, &good_urls, "good-key");
    let written = now_ms();
    // rb takes its own backups (good's do not count as rb's), and its
    // status names them.
    let rb_backup = env.wait_for("a backup of rb after its key", || {
        let list = all(&env);
        let mine = of(&list, "rb").first().map(|m| (*m).clone())?;
        let last = env.status("rb")?.status?.backup?.last_backup?;
        (last == mine.name && mine.unix_ms > written).then_some(mine)
    });
    assert!(rb_backup.name.starts_with("rb."), "{rb_backup:?}");
    assert!(rb_backup.uid.is_some(), "{rb_backup:?}");
    // Its status says the folder is shared, and with whom.
    env.wait_for("rb's status names good as sharing its folder", || {
        let shared = env.status("rb")?.status?.backup?.shared_with;
        (shared == ["good"]).then_some(())
    });
    // Stop rb's schedule (an hour between backups) so that its backups
    // stay as they are: none of them may go by good's retention.
    env.write_manifest("rb.yaml", &in_shared("rb", "1h"));
    env.wait_for("rb backs up hourly now", || {
        let next = env.status("rb")?.status?.backup?.next_backup_time?;
        (rfc3339_ms(&next) > now_ms() + 30 * 60 * 1000).then_some(())
    });
    let rb_kept: Vec<String> = of(&all(&env), "rb")
        .iter()
        .map(|m| m.name.clone())
        .collect();
    assert!(rb_kept.contains(&rb_backup.name), "{rb_kept:?}");
    // good backs up every second and keeps 2: its retention runs; rb's
    // backups stay.
    let first_good = env.wait_for("a new backup of good", || {
        of(&all(&env), "good").first().map(|m| m.name.clone())
    });
    env.wait_for("good's retention deleted that one too", || {
        (!all(&env).iter().any(|m| m.name == first_good)).then_some(())
    });
    let rb_now: Vec<String> = of(&all(&env), "rb")
        .iter()
        .map(|m| m.name.clone())
        .collect();
    assert_eq!(rb_now, rb_kept, "good's retention deleted rb's backups");
    // The backups command lists rb's own only.
    let (_, listed) = etcd_operator::cli::backup::list(&env.state, "rb").expect("listed");
    let names: Vec<String> = listed.iter().map(|(m, _)| m.name.clone()).collect();
    assert_eq!(names, rb_kept);

    // rb loses its majority for good: rebuilt from its own backup, never
    // from good's newer ones.
    for m in &rb.status.as_ref().expect("status").members[..2] {
        env.destroy("rb", &m.name);
    }
    let (c, recovery) = env.wait_rebuilt("rb rebuilt from a backup", "rb", 3);
    assert_eq!(recovery.backup, rb_kept[0], "{recovery:?}");
    let after = keys(&env, &client_urls(&c));
    assert!(after.contains(&"rb-own-key".to_string()), "{after:?}");
    assert!(!after.iter().any(|k| k.starts_with("good")), "{after:?}");
    let good_keys = keys(&env, &good_urls);
    assert!(good_keys.contains(&"good-key".to_string()), "{good_keys:?}");
}

#[test]
fn a_backup_folder_inside_the_operators_own_is_refused() {
    let mut env = Env::new();
    env.write_manifest("good.yaml", &in_shared("good", "1h"));
    env.start_operator();
    env.wait_running("good", 3);
    let member = env.layout().member_names("good").expect("members")[0].clone();
    let forbidden = [
        ("state", ".".to_string()),
        ("parent", "..".to_string()),
        ("clusters", "clusters".to_string()),
        ("member", format!("clusters/good/{member}")),
        ("defaults", "backups/good".to_string()),
    ];
    for (name, path) in &forbidden {
        let mut m = manifest(name, 1, "3.4.23");
        m.push_str(&format!(
            "  backup:\n    interval: 1s\n    maxBackups: 1\n    location:\n      path: {path}\n"
        ));
        env.write_manifest(&format!("{name}.yaml"), &m);
    }
    for (name, path) in &forbidden {
        let message = env.wait_for(&format!("{name} refused"), || {
            let s = env.status(name)?.status?;
            let m = s.condition("Degraded")?.message.clone();
            (s.phase.as_str() == "Invalid").then_some(m)
        });
        assert!(
            message.contains("spec.backup.location.path")
                && message.contains("a folder of its own"),
            "{name} ({path}): {message}"
        );
        assert!(
            env.layout().member_names(name).expect("members").is_empty(),
            "{name}: nothing created"
        );
    }
    // Nothing was written where it was refused.
    let stray = |dir: &Path| {
        std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().ends_with(".db"))
            })
            .unwrap_or(false)
    };
    assert!(!stray(&env.state), "a backup in the state folder");
    assert!(!stray(&env.state.join("clusters")));
    assert!(!stray(&env.layout().member_dir("good", &member)));
}
