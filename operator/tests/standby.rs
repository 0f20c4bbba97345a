//! A standby cluster (`spec.standby`, issue 36), against real etcd: a
//! primary under a writer, a standby of it kept up from the primary's
//! backups (a folder, and an S3 bucket through moto), revision for
//! revision: at the end the standby's revision and `HashKV` equal the
//! primary's at the same revision. A standby member killed mid-apply is
//! healed and applying resumes with nothing applied twice; clients may read
//! a standby and not write it (etcd's auth: a put without credentials or as
//! the reader is refused, a get as the reader answers) until it is
//! promoted; a write to the standby by anything else (with root's
//! credentials) is found (`Diverged`) and nothing more is applied;
//! promoting under load keeps every write the primary acknowledged up to
//! the revision status reports. Following live: `standby_live.rs`.

#[allow(dead_code)]
#[path = "common/store.rs"]
mod store;

#[allow(dead_code)]
#[path = "common/standby.rs"]
mod standby;

use std::collections::HashMap;
use std::time::Instant;

use etcd_operator::testing::acked::{Writer, not_found, read_prefix, read_prefix_as};
use etcd_operator::testing::s3::S3Server;
use etcd_operator::testing::{Env, client_urls, kill9};
use standby::{
    assert_same_as_primary, etcdctl_as, primary, revision, revision_as, standby, standby_status,
};
use store::{BUCKET, Place, env_with, object_store};

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
    // Read-only while standby: clients read as the reader, and nobody but
    // the applier writes.
    let here = client_urls(&dr);
    let ro = env.wait_for("the standby read-only", || {
        standby_status(&env, "dr").filter(|s| s.read_only == Some(true))
    });
    assert_eq!(ro.read_user.as_deref(), Some("reader"), "{ro:?}");
    let file = ro
        .read_password_file
        .clone()
        .expect("the reader's password file");
    let reader = env.standby_credentials("dr", "reader");
    let kept = std::fs::read_to_string(&file).expect("the password file status names");
    assert_eq!(kept.trim(), reader.password());
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&file).expect("meta").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600, "{file}");
    let anonymous = etcdctl_as(&env, &here, None, &["put", "w/not-a-client-write", "x"]);
    assert!(
        anonymous.contains("refused") && anonymous.contains("user name is empty"),
        "{anonymous}"
    );
    let as_reader = etcdctl_as(
        &env,
        &here,
        Some(&reader),
        &["put", "w/not-a-client-write", "x"],
    );
    assert!(
        as_reader.contains("refused") && as_reader.contains("permission denied"),
        "{as_reader}"
    );
    let read = etcdctl_as(
        &env,
        &here,
        Some(&reader),
        &["get", "w/", "--prefix", "--limit=1"],
    );
    assert!(read.starts_with("ok: w/"), "the reader reads: {read}");
    let unread = etcdctl_as(&env, &here, None, &["get", "w/", "--prefix", "--limit=1"]);
    assert!(unread.contains("refused"), "{unread}");
    println!("MEASURED: a put without credentials: {anonymous:?}; as the reader: {as_reader:?}");
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
    let found: HashMap<String, String> = read_prefix_as(&client_urls(&dr), "w/", Some(&reader))
        .into_iter()
        .collect();
    let missing = not_found(&acked, &found).len();
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
    assert_eq!(promoted.read_only, Some(false), "{promoted:?}");
    assert_eq!(promoted.read_user, None, "{promoted:?}");
    // Without credentials, as to any cluster.
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
    let behind = standby::missing_up_to(&acked, &found, promoted.applied_revision);
    assert_eq!(behind, 0, "writes up to the promoted revision are missing");
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
    // Only root may write a standby (a client cannot): root writes here.
    let root = env.standby_credentials("b", "root");
    let wrote = etcdctl_as(
        &env,
        &client_urls(&b),
        Some(&root),
        &["put", "not-from-the-source", "x"],
    );
    assert!(wrote.starts_with("ok"), "{wrote}");
    let diverged = env.wait_for("the standby diverged", || {
        standby_status(&env, "b").filter(|s| s.state == "Diverged")
    });
    let message = diverged.message.clone().unwrap_or_default();
    assert!(
        message.contains("something other than the standby's applier"),
        "{message}"
    );
    assert!(diverged.applied_revision >= before.applied_revision);
    // Nothing more is applied: its revision stays.
    let here = revision_as(&client_urls(&b), Some(&root));
    env.wait_for("the primary ahead in the store", || {
        let p = env.status("a")?.status?.backup?.continuous?;
        (p.last_revision > here + 10).then_some(())
    });
    writer.stop();
    assert_eq!(
        revision_as(&client_urls(&b), Some(&root)),
        here,
        "nothing applied after the divergence"
    );
    let _ = a;
}
