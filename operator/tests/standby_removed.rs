//! A standby promoted across an operator restart (issue 36), against real
//! etcd: a standby following its primary, read-only; the operator stops,
//! the standby's manifest loses `spec.standby` (or says `promote: true`),
//! the operator starts again. Removed: with no applier running, the
//! operator promotes it from the record and from etcd itself: auth off (a
//! put without credentials is taken), `state: Promoted` saying why, the
//! revision it held kept, and it follows no more. `promote: true`: the new
//! applier finds auth on in etcd and applies what is left as root (it once
//! went without credentials, failed three times and reported the
//! revision it was created at), and status says the revision the standby
//! holds.

#[allow(dead_code)]
#[path = "common/store.rs"]
mod store;

#[allow(dead_code)]
#[path = "common/standby.rs"]
mod standby;

use etcd_operator::crd::EtcdCluster;
use etcd_operator::etcd::Credentials;
use etcd_operator::testing::acked::Writer;
use etcd_operator::testing::{Env, client_urls, manifest};
use standby::{primary, revision, revision_as, standby, standby_status};

/// A primary under a writer and a 1-member standby of it, read-only and
/// following; the standby's root credentials.
fn following() -> (Env, EtcdCluster, EtcdCluster, Writer, Credentials) {
    let mut env = Env::new();
    env.write_manifest("src.yaml", &primary("src", None));
    env.start_operator();
    let src = env.wait_running("src", 3);
    env.wait_for("a full backup of the primary", || {
        env.status("src")?.status?.backup?.last_backup
    });
    let writer = Writer::start(client_urls(&src), "w/");
    env.write_manifest("dr.yaml", &standby("dr", 1, "src", None, false));
    let dr = env.wait_running("dr", 1);
    env.wait_for("the standby read-only and following", || {
        let s = standby_status(&env, "dr")?;
        (s.read_only == Some(true) && s.applied_revision > 50).then_some(s)
    });
    let root = env.standby_credentials("dr", "root");
    (env, src, dr, writer, root)
}

#[test]
fn a_standby_whose_spec_lost_its_source_while_the_operator_was_down_is_promoted() {
    let (mut env, _src, dr, writer, root) = following();
    let following = standby_status(&env, "dr").expect("following");
    // Down, and the standby's manifest names no source any more.
    env.stop_operator();
    let held = revision_as(&client_urls(&dr), Some(&root));
    assert!(held >= following.applied_revision);
    env.write_manifest("dr.yaml", &manifest("dr", 1, "3.4.23"));
    env.start_operator();
    let promoted = env.wait_for("the standby promoted after the restart", || {
        standby_status(&env, "dr").filter(|s| s.state == "Promoted")
    });
    assert_eq!(promoted.read_only, Some(false), "{promoted:?}");
    assert_eq!(promoted.read_user, None, "{promoted:?}");
    assert!(promoted.promoted_at.is_some(), "{promoted:?}");
    let why = promoted.message.clone().unwrap_or_default();
    assert!(why.contains("spec.standby was removed"), "{promoted:?}");
    let dr = env.wait_running("dr", 1);
    let out = env.etcdctl(&client_urls(&dr), &["put", "after-promotion", "1"]);
    assert!(
        out.status.success(),
        "a promoted cluster takes writes: {out:?}"
    );
    // It held what it had applied, and follows no more.
    let after = revision(&client_urls(&dr));
    assert_eq!(after, held + 1, "only its own write since it stopped");
    env.wait_for("the primary's store 200 revisions further", || {
        let c = env.status("src")?.status?.backup?.continuous?;
        (c.last_revision > held + 200).then_some(())
    });
    writer.stop();
    assert_eq!(revision(&client_urls(&dr)), after, "nothing more applied");
}

#[test]
fn a_standby_told_to_promote_while_the_operator_was_down_says_what_it_holds() {
    let (mut env, src, dr, writer, root) = following();
    // The primary's writes end, and its store holds them all.
    writer.stop();
    let last = revision(&client_urls(&src));
    env.wait_for("the primary's store at its last revision", || {
        let c = env.status("src")?.status?.backup?.continuous?;
        (c.last_revision >= last).then_some(())
    });
    env.stop_operator();
    let held = revision_as(&client_urls(&dr), Some(&root));
    env.write_manifest("dr.yaml", &standby("dr", 1, "src", None, true));
    env.start_operator();
    let promoted = env.wait_for("the standby promoted after the restart", || {
        standby_status(&env, "dr").filter(|s| s.state == "Promoted")
    });
    // It applied what the store still held past what it held, as root.
    assert!(held <= last, "held {held}, the primary at {last}");
    assert_eq!(promoted.applied_revision, last, "{promoted:?} held {held}");
    let dr = env.wait_running("dr", 1);
    assert_eq!(revision(&client_urls(&dr)), promoted.applied_revision);
    assert!(
        !promoted
            .message
            .clone()
            .unwrap_or_default()
            .contains("tries failed"),
        "{promoted:?}"
    );
    let out = env.etcdctl(&client_urls(&dr), &["put", "after-promotion", "1"]);
    assert!(out.status.success(), "{out:?}");
}
