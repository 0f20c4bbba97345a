//! A standby following its primary live (`spec.standby.stream`, issue 36),
//! against real etcd: a watch of the primary's members applied revision
//! for revision, through a primary member's `kill -9`; the store's chain
//! taking over while no member answers or once the primary compacted past
//! the standby's revision, and the watch taken up again after; at the end
//! the primary's revision and `HashKV`, and a promotion at the primary's
//! last revision.

#[allow(dead_code)]
#[path = "common/store.rs"]
mod store;

#[allow(dead_code)]
#[path = "common/standby.rs"]
mod standby;

use std::collections::HashMap;
use std::time::Instant;

use etcd_operator::testing::acked::{Writer, not_found, read_prefix, read_prefix_as};
use etcd_operator::testing::{Env, client_urls, kill9, manifest};
use standby::{assert_same_as_primary, live_standby, primary, revision, standby_status};

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
    let reader = env.standby_credentials("ls", "reader");
    let probe = Instant::now();
    let put = env.etcdctl(&urls, &["put", "probe", "1"]);
    assert!(put.status.success(), "{put:?}");
    env.wait_for("the probe on the standby", || {
        let found = read_prefix_as(&client_urls(&ls), "probe", Some(&reader));
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
    let found: HashMap<String, String> = read_prefix_as(&client_urls(&ls), "w/", Some(&reader))
        .into_iter()
        .collect();
    let missing = not_found(&acked, &found).len();
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

/// The applier's live path alone, between two clusters of its own: every
/// kind of change (puts, overwrites, deletes, a transaction of several
/// keys, a prefix delete) lands at the source's revision with the source's
/// `HashKV`; once the source compacted past a standby's revision, the watch
/// says so and hands over (to the store's chain, in the applier).
#[test]
fn the_watch_applies_revision_for_revision_and_hands_over_past_a_compaction() {
    use etcd_client::{DeleteOptions, Txn, TxnOp};
    use etcd_operator::standby::stream::{Error, Live};
    use etcd_operator::validate::standby::Stream;

    let mut env = Env::new();
    for name in ["src", "dst", "late"] {
        env.write_manifest(&format!("{name}.yaml"), &manifest(name, 1, "3.4.23"));
    }
    env.start_operator();
    let [src, dst, late] = ["src", "dst", "late"].map(|n| env.wait_running(n, 1));
    let candidate = |c: &etcd_operator::crd::EtcdCluster| {
        let name = c.status.as_ref().expect("status").members[0].name.clone();
        (name, client_urls(c)[0].clone(), None)
    };
    let stream = || Stream {
        endpoints: client_urls(&src),
        tls_path: None,
    };
    store::rt().block_on(async {
        let mut c = etcd_client::Client::connect(client_urls(&src), None)
            .await
            .expect("connect");
        for i in 0..60 {
            c.put(format!("k/{}", i % 12), format!("v{i}"), None)
                .await
                .expect("put");
        }
        c.delete("k/3", None).await.expect("delete");
        let txn = Txn::new().and_then(vec![
            TxnOp::put("t/a", "1", None),
            TxnOp::put("t/b", "2", None),
            TxnOp::delete("k/4", None),
        ]);
        c.txn(txn).await.expect("txn");
        c.delete("k/1", Some(DeleteOptions::new().with_prefix()))
            .await
            .expect("prefix delete");
        let head = c
            .get("x", None)
            .await
            .expect("get")
            .header()
            .map_or(0, |h| h.revision());

        let mut live = Live::new(stream(), None);
        let mut checked = false;
        let to = candidate(&dst);
        let mut applied = 0;
        for _ in 0..200 {
            let pass = live.pass(&to, &mut checked, None).await.expect("a pass");
            assert!(pass.stop.is_none(), "{:?}", pass.stop);
            applied = pass.applied;
            if applied == head {
                break;
            }
        }
        assert_eq!(applied, head, "the standby reaches the source's revision");
        let theirs = c.hash_kv(head).await.expect("hash").hash();
        let mut d = etcd_client::Client::connect([to.1.as_str()], None)
            .await
            .expect("connect");
        let ours = d.hash_kv(head).await.expect("hash");
        assert_eq!(ours.header().map(|h| h.revision()), Some(head));
        assert_eq!(ours.hash(), theirs, "HashKV at {head} is the source's");

        // Pinned to another etcd cluster: the source's members are not
        // followed.
        let mut other = Live::new(stream(), Some("1234"));
        match other.pass(&to, &mut checked, None).await {
            Err(Error::Source(why)) => assert!(why.contains("another etcd cluster"), "{why}"),
            other => panic!("another cluster is said: {other:?}"),
        }
        assert!(live.cluster_id().is_some(), "the source's id is known");
        // The source compacts: a standby at an older revision cannot be
        // followed live from there.
        c.compact(head, None).await.expect("compact");
        let mut past = Live::new(stream(), None);
        let mut checked = false;
        match past.pass(&candidate(&late), &mut checked, None).await {
            Err(Error::Source(why)) => assert!(why.contains("compacted"), "{why}"),
            other => panic!("a compaction past the standby is said: {other:?}"),
        }
        // The standby that kept up goes on live past the compaction.
        c.put("after", "1", None).await.expect("put");
        let mut checked = true;
        let mut applied = head;
        for _ in 0..200 {
            applied = live
                .pass(&to, &mut checked, None)
                .await
                .expect("a pass")
                .applied;
            if applied > head {
                break;
            }
        }
        assert_eq!(applied, head + 1, "the write after the compaction applied");
    });
}

/// The primary's place lost at once (every member killed, nothing tends
/// it) while a live standby follows it under a writer: promoted, the
/// standby holds every write the primary acknowledged up to the revision
/// its status reports; what it misses is counted (printed).
#[test]
fn the_primary_lost_the_live_standby_is_promoted_with_every_write_up_to_its_revision() {
    let mut env = Env::new();
    env.write_manifest("gone.yaml", &primary("gone", None));
    env.start_operator();
    let gone = env.wait_running("gone", 3);
    env.wait_for("a full backup of the primary", || {
        env.status("gone")?.status?.backup?.last_backup
    });
    let urls = client_urls(&gone);
    let writer = Writer::start(urls.clone(), "w/");
    let kept = |promote| live_standby("kept", 1, "gone", (None, &urls), promote);
    env.write_manifest("kept.yaml", &kept(false));
    let standby = env.wait_running("kept", 1);
    env.wait_for("the standby following live", || {
        let s = standby_status(&env, "kept")?;
        (s.via.as_deref() == Some("stream") && s.applied_revision > 200).then_some(())
    });
    // The primary's place is lost: nothing tends it, every member dies.
    let paused = format!("{}  paused: true\n", primary("gone", None));
    env.write_manifest("gone.yaml", &paused);
    env.wait_for("the primary's operator paused", || {
        (env.status("gone")?.status?.phase.as_str() == "Paused").then_some(())
    });
    for m in &gone.status.as_ref().expect("status").members {
        if let Some(pid) = env.pid("gone", &m.name) {
            kill9(pid);
        }
    }
    let acked = writer.stop();

    let promoting = Instant::now();
    env.write_manifest("kept.yaml", &kept(true));
    let promoted = env.wait_for("the standby promoted", || {
        standby_status(&env, "kept").filter(|s| s.state == "Promoted")
    });
    let out = env.etcdctl(&client_urls(&standby), &["put", "own", "1"]);
    assert!(out.status.success(), "{out:?}");
    let found: HashMap<String, String> = read_prefix(&client_urls(&standby), "w/")
        .into_iter()
        .collect();
    let up_to = promoted.applied_revision;
    let missing = standby::missing_up_to(&acked, &found, up_to);
    assert_eq!(
        missing, 0,
        "writes acknowledged up to revision {up_to} missing"
    );
    let after = acked.iter().filter(|a| a.revision > up_to).count();
    println!(
        "MEASURED: primary lost; live standby promoted in {} ms at revision {up_to}; {after} of \
         {} acknowledged writes were past it (lost with the primary)",
        promoting.elapsed().as_millis(),
        acked.len()
    );
}
