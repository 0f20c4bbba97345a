//! A standby cluster (`spec.standby`, issue 36), against real etcd: a
//! primary under a writer, a standby of it kept up from the primary's
//! backups (a folder, and an S3 bucket through moto), revision for
//! revision: at the end the standby's revision and `HashKV` equal the
//! primary's at the same revision. A standby member killed mid-apply is
//! healed and applying resumes with nothing applied twice; a write to the
//! standby by anything else is found (`Diverged`) and nothing more is
//! applied; promoting under load keeps every write the primary acknowledged
//! up to the revision status reports. Streaming (`spec.standby.stream`):
//! the same, from a live watch of the primary's members, the store's chain
//! taking over while no member answers.

#[allow(dead_code)]
#[path = "common/store.rs"]
mod store;

use std::collections::HashMap;
use std::time::Instant;

use etcd_operator::crd::{EtcdCluster, StandbyStatus};
use etcd_operator::testing::acked::{Writer, read_prefix};
use etcd_operator::testing::s3::S3Server;
use etcd_operator::testing::{Env, client_urls, kill9, manifest};
use store::{BUCKET, Place, env_with, object_store, rt};

/// The primary: backups (to `location`, a manifest block at 6 spaces, or
/// the default folder) with 1 s delta segments.
fn primary(name: &str, location: Option<String>) -> String {
    let mut m = manifest(name, 3, "3.4.23");
    m.push_str("  backup:\n    interval: 1h\n    maxBackups: 2\n");
    m.push_str("    continuous:\n      segmentInterval: 1s\n");
    if let Some(l) = location {
        m.push_str("    location:\n");
        m.push_str(&l);
    }
    m
}

/// A standby of `source` (its backups at `location`, a block at 6 spaces).
fn standby(name: &str, size: u32, source: &str, location: Option<String>, promote: bool) -> String {
    live_standby(name, size, source, (location, &[]), promote)
}

/// A standby of `source` following its members at `endpoints` live (none:
/// from the store only).
fn live_standby(
    name: &str,
    size: u32,
    source: &str,
    (location, endpoints): (Option<String>, &[String]),
    promote: bool,
) -> String {
    let mut m = manifest(name, size, "3.4.23");
    m.push_str(&format!("  standby:\n    cluster: {source}\n"));
    if !endpoints.is_empty() {
        m.push_str("    stream:\n      endpoints:\n");
        for e in endpoints {
            m.push_str(&format!("        - {e}\n"));
        }
    }
    if let Some(l) = location {
        m.push_str("    location:\n");
        m.push_str(&l);
    }
    if promote {
        m.push_str("    promote: true\n");
    }
    m
}

/// The standby status of `cluster`.
fn standby_status(env: &Env, cluster: &str) -> Option<StandbyStatus> {
    env.status(cluster)?.status?.standby
}

/// The revision and `HashKV` at `revision` of the member at `url`.
fn hash_at(url: &str, revision: i64) -> (i64, u32, i64) {
    rt().block_on(async {
        let mut c = etcd_client::Client::connect([url], None)
            .await
            .expect("connect");
        let h = c.hash_kv(revision).await.expect("hash_kv");
        let head = h.header().map_or(0, |h| h.revision());
        (head, h.hash(), h.compact_version())
    })
}

/// The revision the cluster at `urls` is at.
fn revision(urls: &[String]) -> i64 {
    rt().block_on(async {
        let mut c = etcd_client::Client::connect(urls, None)
            .await
            .expect("connect");
        let r = c.get("x", None).await.expect("get");
        r.header().map_or(0, |h| h.revision())
    })
}

/// Waits until the standby `name` applied revision `target`, and checks
/// that its revision and `HashKV` at `target` are the primary's.
fn assert_same_as_primary(
    env: &Env,
    name: &str,
    primary: &EtcdCluster,
    target: i64,
) -> EtcdCluster {
    let s = env.wait_for(&format!("the standby at revision {target}"), || {
        let s = standby_status(env, name)?;
        (s.applied_revision == target).then_some(s)
    });
    assert_eq!(s.lag_revisions, 0, "{s:?}");
    let c = env.wait_running(name, env.status(name).map_or(1, |c| c.spec.size as usize));
    let here = client_urls(&c);
    assert_eq!(
        revision(&here),
        target,
        "the standby's revision is the source's"
    );
    let (_, theirs, their_compact) = hash_at(&client_urls(primary)[0], target);
    for url in &here {
        let (_, ours, our_compact) = hash_at(url, target);
        assert_eq!(our_compact, their_compact, "no compaction on either side");
        assert_eq!(ours, theirs, "HashKV at {target} of {url} is the primary's");
    }
    println!("MEASURED: standby {name} at revision {target}, HashKV {theirs:#x} as the primary's");
    c
}

#[test]
fn a_standby_follows_its_primary_from_a_folder_revision_for_revision_and_is_promoted() {
    let mut env = Env::new();
    env.write_manifest("src.yaml", &primary("src", None));
    env.start_operator();
    let src = env.wait_running("src", 3);
    env.wait_for("a full backup of the primary", || {
        env.status("src")?.status?.backup?.last_backup
    });
    let writer = Writer::start(client_urls(&src), "w/");
    env.wait_for("200 writes", || (writer.acked().len() >= 200).then_some(()));
    env.write_manifest("dr.yaml", &standby("dr", 3, "src", None, false));
    let dr = env.wait_running("dr", 3);
    let first = env.wait_for("the standby following", || {
        let s = standby_status(&env, "dr")?;
        (s.state == "Following" && s.applied_revision > 0).then_some(s)
    });
    println!(
        "standby created at revision {} ({:?})",
        first.applied_revision, first.source_uid
    );
    // A standby member killed while it applies: healed as any member, and
    // applying resumes from the standby's own revision.
    let victim = dr.status.as_ref().expect("status").members[0].name.clone();
    let pid = env.pid("dr", &victim).expect("runs");
    kill9(pid);
    env.wait_for("the killed member back", || {
        env.pid("dr", &victim).filter(|p| *p != pid)
    });
    env.wait_for("applying past the kill", || {
        let s = standby_status(&env, "dr")?;
        (s.applied_revision > first.applied_revision + 100).then_some(())
    });
    let acked = writer.stop();
    let target = revision(&client_urls(&src));
    let dr = assert_same_as_primary(&env, "dr", &src, target);
    let found: HashMap<String, String> = read_prefix(&client_urls(&dr), "w/").into_iter().collect();
    let missing = acked
        .iter()
        .filter(|a| found.get(&a.key) != Some(&a.value))
        .count();
    assert_eq!(missing, 0, "every acknowledged write is on the standby");

    // Promoted: it says the last revision applied and takes writes.
    env.write_manifest("dr.yaml", &standby("dr", 3, "src", None, true));
    let promoted = env.wait_for("the standby promoted", || {
        standby_status(&env, "dr").filter(|s| s.state == "Promoted")
    });
    assert_eq!(promoted.applied_revision, target, "{promoted:?}");
    assert!(
        promoted.promoted_at.is_some() && promoted.applied_time.is_some(),
        "{promoted:?}"
    );
    let out = env.etcdctl(&client_urls(&dr), &["put", "after-promotion", "1"]);
    assert!(
        out.status.success(),
        "a promoted cluster takes writes: {out:?}"
    );
    // It never follows again: the primary's next writes do not arrive.
    let w = env.etcdctl(&client_urls(&src), &["put", "w/late", "1"]);
    assert!(w.status.success(), "{w:?}");
    let here = revision(&client_urls(&dr));
    assert_eq!(here, target + 1, "only its own write since the promotion");
}

#[test]
fn a_standby_follows_through_s3_finds_a_foreign_write_and_promotes_under_load() {
    let s3 = S3Server::start();
    s3.create_bucket(BUCKET);
    let place = Place::s3(&s3);
    let mut env = env_with(&place);
    let at = || Some(object_store(&place, "      "));
    env.write_manifest("p.yaml", &primary("p", at()));
    env.start_operator();
    let p = env.wait_running("p", 3);
    env.wait_for("a full backup of the primary in the bucket", || {
        env.status("p")?.status?.backup?.last_backup
    });
    let writer = Writer::start(client_urls(&p), "w/");
    env.write_manifest("s.yaml", &standby("s", 1, "p", at(), false));
    let s = env.wait_running("s", 1);
    env.wait_for("the standby following through the bucket", || {
        let st = standby_status(&env, "s")?;
        (st.state == "Following" && st.applied_revision > 100).then_some(())
    });

    // Promoted under load: every write the primary acknowledged up to the
    // revision the standby reports is there.
    let promoting = Instant::now();
    env.write_manifest("s.yaml", &standby("s", 1, "p", at(), true));
    let promoted = env.wait_for("the standby promoted", || {
        standby_status(&env, "s").filter(|st| st.state == "Promoted")
    });
    let out = env.etcdctl(&client_urls(&s), &["put", "first-own-write", "1"]);
    assert!(out.status.success(), "{out:?}");
    println!(
        "MEASURED: promote to first write accepted in {:.2} s; promoted at revision {} (written \
         by the primary at {:?})",
        promoting.elapsed().as_secs_f64(),
        promoted.applied_revision,
        promoted.applied_time
    );
    let acked = writer.stop();
    let found: HashMap<String, String> = read_prefix(&client_urls(&s), "w/").into_iter().collect();
    let behind: Vec<_> = acked
        .iter()
        .filter(|a| a.revision <= promoted.applied_revision)
        .filter(|a| {
            found.get(&a.key).is_none_or(|v| {
                // A later write of the same key up to the revision is fine.
                v != &a.value
                    && !acked.iter().any(|b| {
                        b.key == a.key
                            && b.revision > a.revision
                            && b.revision <= promoted.applied_revision
                    })
            })
        })
        .collect();
    assert!(
        behind.is_empty(),
        "{} writes up to the promoted revision are missing",
        behind.len()
    );
}

#[test]
fn a_write_to_a_standby_is_found_and_nothing_more_is_applied() {
    let mut env = Env::new();
    env.write_manifest("a.yaml", &primary("a", None));
    env.start_operator();
    let a = env.wait_running("a", 3);
    env.wait_for("a full backup of the primary", || {
        env.status("a")?.status?.backup?.last_backup
    });
    let writer = Writer::start(client_urls(&a), "w/");
    env.write_manifest("b.yaml", &standby("b", 1, "a", None, false));
    let b = env.wait_running("b", 1);
    let before = env.wait_for("the standby following", || {
        let s = standby_status(&env, "b")?;
        (s.state == "Following" && s.applied_revision > 50).then_some(s)
    });
    let out = env.etcdctl(&client_urls(&b), &["put", "not-from-the-source", "x"]);
    assert!(out.status.success(), "{out:?}");
    let diverged = env.wait_for("the standby diverged", || {
        standby_status(&env, "b").filter(|s| s.state == "Diverged")
    });
    writer.stop();
    let message = diverged.message.clone().unwrap_or_default();
    assert!(
        message.contains("something other than the standby's applier"),
        "{message}"
    );
    assert!(diverged.applied_revision >= before.applied_revision);
    // Nothing more is applied: its revision stays.
    let here = revision(&client_urls(&b));
    env.wait_for("the primary ahead in the store", || {
        let p = env.status("a")?.status?.backup?.continuous?;
        (p.last_revision > here + 10).then_some(())
    });
    assert_eq!(
        revision(&client_urls(&b)),
        here,
        "nothing applied after the divergence"
    );
    let _ = a;
}

#[test]
fn a_standby_follows_its_primary_live_and_the_store_takes_over_while_no_member_answers() {
    let mut env = Env::new();
    env.write_manifest("lp.yaml", &primary("lp", None));
    env.start_operator();
    let lp = env.wait_running("lp", 3);
    env.wait_for("a full backup of the primary", || {
        env.status("lp")?.status?.backup?.last_backup
    });
    let urls = client_urls(&lp);
    let writer = Writer::start(urls.clone(), "w/");
    let live =
        |endpoints: &[String], promote| live_standby("ls", 1, "lp", (None, endpoints), promote);
    env.write_manifest("ls.yaml", &live(&urls, false));
    let ls = env.wait_running("ls", 1);
    let first = env.wait_for("the standby following live", || {
        let s = standby_status(&env, "ls")?;
        (s.via.as_deref() == Some("stream") && s.applied_revision > 100).then_some(s)
    });
    // A probe written to the primary, looked for on the standby: the lag
    // of the live path (printed, never judged).
    let probe = Instant::now();
    let put = env.etcdctl(&urls, &["put", "probe", "1"]);
    assert!(put.status.success(), "{put:?}");
    env.wait_for("the probe on the standby", || {
        let found = read_prefix(&client_urls(&ls), "probe");
        (!found.is_empty()).then_some(())
    });
    println!(
        "MEASURED: a write on the primary reached the live standby in {} ms (from revision {})",
        probe.elapsed().as_millis(),
        first.applied_revision
    );

    // A primary member killed: the watch goes on through the others.
    let victim = lp.status.as_ref().expect("status").members[0].name.clone();
    let pid = env.pid("lp", &victim).expect("runs");
    kill9(pid);
    let after_kill = standby_status(&env, "ls").map_or(0, |s| s.applied_revision);
    env.wait_for("applying live past the kill", || {
        let s = standby_status(&env, "ls")?;
        (s.via.as_deref() == Some("stream") && s.applied_revision > after_kill + 100).then_some(())
    });

    // No member answers where the stream points: the store's chain takes
    // over, and says why.
    let nowhere = vec!["http://127.0.0.1:1".to_string()];
    env.write_manifest("ls.yaml", &live(&nowhere, false));
    let fell_back = env.wait_for("the standby following from the store, saying why", || {
        let s = standby_status(&env, "ls")?;
        let why = s.message.as_deref().unwrap_or_default();
        (s.via.as_deref() == Some("store") && why.contains("127.0.0.1:1")).then_some(s)
    });
    env.wait_for("applying from the store", || {
        let s = standby_status(&env, "ls")?;
        (s.applied_revision > fell_back.applied_revision + 100).then_some(())
    });
    // Back to the members: live again.
    env.write_manifest("ls.yaml", &live(&urls, false));
    env.wait_for("the standby following live again", || {
        let s = standby_status(&env, "ls")?;
        (s.via.as_deref() == Some("stream") && s.message.is_none()).then_some(())
    });
    let acked = writer.stop();
    let target = revision(&urls);
    let ls = assert_same_as_primary(&env, "ls", &lp, target);
    let found: HashMap<String, String> = read_prefix(&client_urls(&ls), "w/").into_iter().collect();
    let missing = acked
        .iter()
        .filter(|a| found.get(&a.key) != Some(&a.value))
        .count();
    assert_eq!(missing, 0, "every acknowledged write is on the standby");

    let promoting = Instant::now();
    env.write_manifest("ls.yaml", &live(&urls, true));
    let promoted = env.wait_for("the standby promoted", || {
        standby_status(&env, "ls").filter(|s| s.state == "Promoted")
    });
    let out = env.etcdctl(&client_urls(&ls), &["put", "own", "1"]);
    assert!(out.status.success(), "{out:?}");
    println!(
        "MEASURED: live standby promoted to first write accepted in {} ms",
        promoting.elapsed().as_millis()
    );
    assert_eq!(promoted.applied_revision, target, "{promoted:?}");
}
