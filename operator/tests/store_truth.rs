//! The bucket is the truth (issue 34): what status promises about
//! continuous backups is what the store holds, checked there. Against a
//! real S3 server (moto) and real etcd:
//!
//! * a store that stops answering shows in status within a few segment
//!   intervals; an operator killed while a segment's upload hangs fills
//!   the hole it left, before anything newer, when it starts again, so a
//!   rebuild from the bucket loses none of the writes the chain held
//!   (the reproduction of the issue: 5,549 writes lost before);
//! * a segment changed in the store is healed from the copy staged here,
//!   and one that nothing can heal ends the chain, said in status, and a
//!   full backup starts a new one at once;
//! * a multipart upload cut off by a crash is aborted when the operator
//!   starts again, its marker deleted.

#[allow(dead_code)]
#[path = "common/store.rs"]
mod store;

use std::collections::HashMap;
use std::time::Instant;

use etcd_operator::backup::chain::segment_file;
use etcd_operator::crd::{Condition, RecoverySource};
use etcd_operator::testing::acked::{Writer, not_found, read_prefix};
use etcd_operator::testing::proxy::Blackhole;
use etcd_operator::testing::s3::S3Server;
use etcd_operator::testing::{Env, client_urls, manifest};
use store::{BUCKET, Place, env_with, object_store, reader, rt};

/// A cluster backing up to `place` hourly, with 1 s segments.
fn continuous(name: &str, place: &Place, rebuild: bool) -> String {
    let mut m = manifest(name, 3, "3.4.23");
    m.push_str("  backup:\n    interval: 1h\n    maxBackups: 2\n");
    m.push_str("    continuous:\n      segmentInterval: 1s\n    location:\n");
    m.push_str(&object_store(place, "      "));
    if rebuild {
        m.push_str("  recovery:\n    restoreFromBackup: true\n    fromSurvivor: false\n");
    }
    m
}

/// Condition `type_` of `cluster`, as published.
fn condition(env: &Env, cluster: &str, type_: &str) -> Option<Condition> {
    env.status(cluster)?.status?.condition(type_).cloned()
}

/// The segment numbers of `base` staged in `cluster`'s folder.
fn staged(env: &Env, cluster: &str, base: &str) -> Vec<u64> {
    let dir = env.state.join("clusters").join(cluster).join("segments");
    etcd_operator::backup::chain::segment_files(&dir)
        .into_iter()
        .filter(|(b, _, _)| b == base)
        .map(|(_, seq, _)| seq)
        .collect()
}

#[test]
fn a_hole_left_by_a_hung_store_and_a_crash_is_filled_and_a_rebuild_loses_nothing() {
    let s3 = S3Server::start();
    s3.create_bucket(BUCKET);
    // The operator reaches the store through a proxy that can drop
    // everything, as the network did (iptables DROP).
    let net = Blackhole::start(s3.addr());
    let place = Place {
        endpoint: net.endpoint(),
        ..Place::s3(&s3)
    };
    let mut env = env_with(&place);
    env.write_manifest("hole.yaml", &continuous("hole", &place, true));
    env.start_operator();
    let c = env.wait_running("hole", 3);
    let bucket = reader(&env, &place, "hole");
    let base = env.wait_for("a full backup in the bucket", || {
        bucket.list().first().cloned()
    });
    let writer = Writer::start(client_urls(&c), "w/");
    let before = env.wait_for("3 segments in the bucket", || {
        let chain = bucket.chain(&base)?;
        (chain.segments.len() >= 3).then_some(chain.segments.len() as u64)
    });

    // The store stops answering: the next segment's upload hangs.
    net.drop_all();
    let paused = Instant::now();
    let behind = env.wait_for("status saying the store is behind", || {
        condition(&env, "hole", "BackupChainBehind").filter(|c| c.status == "True")
    });
    let shown = paused.elapsed();
    let hole = env.wait_for("a segment staged that the store never got", || {
        staged(&env, "hole", &base.name)
            .into_iter()
            .max()
            .filter(|s| *s > before)
    });
    println!(
        "MEASURED: the store stopped answering; BackupChainBehind=True ({}) {:.1} s later: {}",
        behind.reason,
        shown.as_secs_f64(),
        behind.message
    );
    // The operator is killed meanwhile (an OOM kill, a node lost), and
    // the store comes back.
    env.kill_operator();
    net.heal();
    // The hole of the issue: segment `hole` staged here, not in the store.
    // (Its upload may have reached the store just before the drop: then
    // it is deleted there, which leaves the store as the did.)
    let key = format!("prod/hole/{}", segment_file(&base.name, hole));
    rt().block_on(place.bucket().delete(&key))
        .expect("the bucket answers again");

    // Started again, the operator fills the hole before anything newer.
    env.start_operator();
    let whole = env.wait_for("the bucket's chain whole past the hole", || {
        let chain = bucket.chain(&base)?;
        let last = chain.segments.last()?.seq;
        (chain.cut.is_none() && last >= hole + 2).then_some(chain)
    });
    let chain = env.wait_for("status agreeing with the bucket", || {
        let b = env.status("hole")?.status?.backup?;
        let c = b.continuous?;
        let current = condition(&env, "hole", "BackupChainBehind")?.status == "False";
        (current && c.problem.is_none() && c.base == base.name && c.segments > hole as i64)
            .then_some(c)
    });
    assert!(chain.last_error.is_none(), "{chain:?}");

    // A majority lost: the rebuild from the bucket replays past the hole,
    // and every write it holds is back.
    let members = c.status.as_ref().expect("status").members.clone();
    for m in &members[..2] {
        env.destroy("hole", &m.name);
    }
    let lost_at = Instant::now();
    let (c, r) = env.wait_rebuilt("the cluster rebuilt from the bucket", "hole", 3);
    let acked = writer.stop();
    assert_eq!(r.source, RecoverySource::Backup, "{r:?}");
    assert!(
        r.replayed_revision >= whole.last_revision(),
        "the replay went past the hole: {r:?}"
    );
    assert!(r.replay_problem.is_none(), "{r:?}");
    let found: HashMap<String, String> = read_prefix(&client_urls(&c), "w/").into_iter().collect();
    let missing = not_found(&acked, &found);
    let behind = missing
        .iter()
        .filter(|a| a.revision <= r.replayed_revision)
        .count();
    assert_eq!(behind, 0, "every write the chain held is back");
    let window = missing
        .iter()
        .map(|a| lost_at.saturating_duration_since(a.at))
        .max()
        .unwrap_or_default();
    println!(
        "MEASURED: hole at segment {hole} filled after the restart; the rebuild replayed {} \
         segments to revision {}; {} of {} acknowledged writes lost, the oldest {:.2} s before the \
         loss",
        r.replayed_segments,
        r.replayed_revision,
        missing.len(),
        acked.len(),
        window.as_secs_f64()
    );
    env.wait_for(
        "a new full backup after the rebuild, and no backup trouble",
        || {
            let failing = condition(&env, "hole", "BackupsFailing")?;
            (failing.status == "False" && bucket.list().len() >= 2).then_some(())
        },
    );
}

#[test]
fn a_segment_changed_in_the_store_is_healed_and_one_nothing_heals_ends_the_chain() {
    let s3 = S3Server::start();
    s3.create_bucket(BUCKET);
    let place = Place::s3(&s3);
    let mut env = env_with(&place);
    env.write_manifest("cut.yaml", &continuous("cut", &place, false));
    env.start_operator();
    let c = env.wait_running("cut", 3);
    let bucket = reader(&env, &place, "cut");
    let base = env.wait_for("a full backup in the bucket", || {
        bucket.list().first().cloned()
    });
    let writer = Writer::start(client_urls(&c), "w/");
    env.wait_for("4 segments in the bucket", || {
        (bucket.chain(&base)?.segments.len() >= 4).then_some(())
    });
    let objects = place.bucket();
    let key = |seq| format!("prod/cut/{}", segment_file(&base.name, seq));
    let flip = |seq| {
        let mut bytes = rt()
            .block_on(objects.get_small(&key(seq)))
            .expect("read")
            .expect("there");
        let original = bytes.clone();
        let at = bytes.len() / 2;
        bytes[at] ^= 0x10;
        rt().block_on(objects.put(&key(seq), bytes)).expect("write");
        original
    };

    // One byte changed in segment 2 in the store (same size): the copy
    // staged here heals it.
    let original = flip(2);
    env.wait_for("segment 2 healed in the store", || {
        let now = rt().block_on(objects.get_small(&key(2))).ok()??;
        (now == original).then_some(())
    });
    assert!(bucket.chain(&base).is_some_and(|c| c.cut.is_none()));

    // Segment 3 changed in the store and its staged copy gone: nothing
    // heals it. Status says the chain ended and what is not protected;
    // a full backup starts a new chain at once.
    let staging = env.state.join("clusters/cut/segments");
    std::fs::remove_file(staging.join(segment_file(&base.name, 3))).expect("rm");
    flip(3);
    let newer = env.wait_for("a new full backup", || {
        bucket.list().into_iter().find(|m| m.name != base.name)
    });
    assert!(newer.revision > base.revision, "{newer:?}");
    let chain = env.wait_for("the new chain current in status", || {
        let c = condition(&env, "cut", "BackupChainBehind")?;
        let chain = env.status("cut")?.status?.backup?.continuous?;
        (c.status == "False" && chain.base == newer.name && chain.problem.is_none())
            .then_some(chain)
    });
    let previous = chain
        .previous
        .expect("status says how the chain before ended");
    assert!(
        previous.contains(&segment_file(&base.name, 3))
            && previous.contains("cannot be restored to a point in time"),
        "{previous}"
    );
    println!("status.backup.continuous.previous: {previous}");
    writer.stop();
    // `backups` reads the bucket and says where the old chain is cut.
    let out = env.operator_cli(&["backups", "cut"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("CUT") && text.contains(&segment_file(&base.name, 3)),
        "{text}"
    );
}

#[test]
fn a_multipart_upload_cut_off_by_a_crash_is_aborted_when_the_operator_starts_again() {
    let s3 = S3Server::start();
    s3.create_bucket(BUCKET);
    let net = Blackhole::start(s3.addr());
    let place = Place {
        endpoint: net.endpoint(),
        ..Place::s3(&s3)
    };
    let direct = Place::s3(&s3);
    let mut env = env_with(&place);
    // A database past one part (16 MiB), before backups are on.
    env.write_manifest("big.yaml", &manifest("big", 3, "3.4.23"));
    env.start_operator();
    let c = env.wait_running("big", 3);
    let urls = client_urls(&c);
    rt().block_on(async {
        let mut client = etcd_client::Client::connect(&urls, None)
            .await
            .expect("connect");
        for i in 0..48 {
            let value = vec![b'v'; 1 << 20];
            client
                .put(format!("big/{i}"), value, None)
                .await
                .expect("put");
        }
    });
    let mut m = manifest("big", 3, "3.4.23");
    m.push_str("  backup:\n    interval: 1h\n    maxBackups: 2\n    location:\n");
    m.push_str(&object_store(&place, "      "));
    env.write_manifest("big.yaml", &m);
    // The first backup's multipart upload begins: its marker appears. The
    // network drops everything then and the operator is killed mid-upload.
    let bucket = direct.bucket();
    let marker = env.wait_for("an upload's marker in the bucket", || {
        let objects = rt().block_on(bucket.list("prod/big")).ok()?;
        objects.into_iter().find(|o| o.name.ends_with(".db.upload"))
    });
    net.drop_all();
    env.kill_operator();
    net.heal();
    let unfinished = s3.unfinished_uploads(BUCKET);
    assert!(
        !unfinished.is_empty(),
        "the crash left an upload unfinished (marker {})",
        marker.name
    );
    println!("left unfinished: {unfinished:?}, marker {}", marker.name);
    // Started again, the operator aborts it and deletes the marker, and
    // takes its backup.
    env.start_operator();
    env.wait_for("the unfinished upload aborted and its marker gone", || {
        let objects = rt().block_on(bucket.list("prod/big")).ok()?;
        let marked = objects.iter().any(|o| o.name == marker.name);
        (!marked && s3.unfinished_uploads(BUCKET).is_empty()).then_some(())
    });
    let reader = reader(&env, &direct, "big");
    let backup = env.wait_for("a whole backup in the bucket", || {
        reader.list().first().cloned()
    });
    assert!(backup.size > 16 << 20, "{backup:?}");
}

#[test]
fn a_bucket_that_does_not_exist_is_said_so_with_the_fix() {
    let s3 = S3Server::start();
    let place = Place {
        url: "s3://no-such-bucket/prod".into(),
        ..Place::s3(&s3)
    };
    let bucket = place.bucket();
    for e in [
        rt().block_on(bucket.list("prod/x")).map(|_| ()),
        rt().block_on(bucket.put("prod/x/a.json", b"{}".to_vec()))
            .map(|_| ()),
    ] {
        let text = e.expect_err("no bucket").to_string();
        assert!(
            text.contains("\"no-such-bucket\" does not exist") && text.contains("create it"),
            "{text}"
        );
    }
}
