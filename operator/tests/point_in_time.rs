//! Point-in-time restore (`spec.restore.toRevision` / `toTime`) against real
//! etcd: someone deletes a key prefix; a new cluster restored to the
//! revision just before the delete has every key as it was, and nothing
//! written after; a time between two segments restores the last revision
//! of the segment before it, never a later one; a point past the chain is
//! refused and nothing is created.

use std::collections::BTreeMap;

use etcd_operator::backup::{self, BackupMeta, chain};
use etcd_operator::crd::EtcdCluster;
use etcd_operator::testing::acked::read_prefix;
use etcd_operator::testing::{Env, client_urls, manifest};

/// Continuous backups every second on top of one full backup an hour.
fn continuous(name: &str) -> String {
    let mut m = manifest(name, 3, "3.4.23");
    m.push_str(
        "  backup:\n    interval: 1h\n    maxBackups: 2\n    continuous:\n      segmentInterval: 1s\n",
    );
    m
}

/// etcdctl `args`, with `-w json`: the revision its answer says.
fn revision_of(env: &Env, urls: &[String], args: &[&str]) -> i64 {
    let mut all = args.to_vec();
    all.extend(["-w", "json"]);
    let out = env.etcdctl(urls, &all);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    v["header"]["revision"].as_i64().expect("a revision")
}

fn restore(name: &str, base: &BackupMeta, point: &str) -> String {
    format!(
        "{}  restore:\n    backup: {}\n    {point}\n",
        manifest(name, 1, "3.4.23"),
        base.name
    )
}

fn keys(c: &EtcdCluster, prefix: &str) -> BTreeMap<String, String> {
    read_prefix(&client_urls(c), prefix).into_iter().collect()
}

#[test]
fn a_deleted_prefix_comes_back_in_a_cluster_restored_to_just_before_the_delete() {
    let mut env = Env::new();
    env.write_manifest("pit.yaml", &continuous("pit"));
    env.start_operator();
    let c = env.wait_running("pit", 3);
    let urls = client_urls(&c);
    let dir = env.state.join("backups").join("pit");
    let base = env.wait_for("a full backup", || {
        backup::list(&dir).ok()?.first().cloned()
    });
    let mut before = 0;
    for i in 0..20 {
        before = revision_of(
            &env,
            &urls,
            &["put", &format!("a/{i:02}"), &format!("v{i}")],
        );
    }
    // The mistake, then life goes on.
    let deleted = revision_of(&env, &urls, &["del", "--prefix", "a/"]);
    assert_eq!(deleted, before + 1);
    let mut after = 0;
    for i in 0..5 {
        after = revision_of(&env, &urls, &["put", &format!("c/{i}"), "later"]);
    }
    let segments = env.wait_for("the chain holds the writes after the delete", || {
        let chain = chain::read(&dir, &base);
        (chain.last_revision() >= after && chain.cut.is_none()).then_some(chain.segments)
    });

    // `backups` shows the window a restore can reach.
    let out = env.operator_cli(&["backups", "pit"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains(&format!(
            "point-in-time restore (spec.restore.toRevision/toTime) from revision {}",
            base.revision
        )),
        "{text}"
    );

    // To the revision just before the delete: every a/ key, no c/ key.
    env.write_manifest(
        "back.yaml",
        &restore("back", &base, &format!("toRevision: {before}")),
    );
    let back = env.wait_running("back", 1);
    let a = keys(&back, "a/");
    assert_eq!(a.len(), 20, "{a:?}");
    assert_eq!(a.get("a/07").map(String::as_str), Some("v7"));
    assert!(
        keys(&back, "c/").is_empty(),
        "nothing written after the point"
    );
    let r = back.status.and_then(|s| s.restore).expect("restore status");
    assert_eq!(r.replayed_revision, before, "{r:?}");

    // To a time just before the segment that holds the delete was written:
    // the last revision of the segments written before it, never later.
    let holding = segments
        .iter()
        .position(|s| s.revisions.iter().any(|r| r.revision == deleted))
        .expect("a segment holds the delete");
    let t = segments[holding].unix_ms - 1;
    let expected = if holding == 0 {
        base.revision
    } else {
        segments[holding - 1].last_revision()
    };
    let at = etcd_operator::backup::follow::rfc3339_ms(t);
    env.write_manifest(
        "at.yaml",
        &restore("at", &base, &format!("toTime: \"{at}\"")),
    );
    let at_time = env.wait_running("at", 1);
    let r = at_time
        .status
        .clone()
        .and_then(|s| s.restore)
        .expect("restore status");
    assert_eq!(r.replayed_revision, expected, "{r:?}");
    assert!(r.replayed_revision < deleted, "never past the time: {r:?}");
    assert!(keys(&at_time, "c/").is_empty());

    // Past the chain: refused, nothing created.
    let far = after + 1_000_000;
    env.write_manifest(
        "far.yaml",
        &restore("far", &base, &format!("toRevision: {far}")),
    );
    let message = env.wait_for("the refusal in status", || {
        let s = env.status("far")?.status?;
        let d = s.condition("Degraded")?;
        d.message
            .contains("past what the chain holds")
            .then(|| d.message.clone())
    });
    assert!(message.contains(&format!("revision {far}")), "{message}");
    let far_status = env.status("far").and_then(|c| c.status).expect("status");
    assert!(
        far_status.members.is_empty(),
        "nothing created: {far_status:?}"
    );
    assert!(env.pid("far", "far-0").is_none(), "no member process");
}
