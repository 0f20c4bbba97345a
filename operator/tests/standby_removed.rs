//! `spec.standby` removed while the operator is down (issue 36), against
//! real etcd: a standby following its primary, read-only; the operator
//! stops, the standby's manifest loses `spec.standby`, the operator starts
//! again. With no applier running, the operator promotes it from the
//! record and from etcd itself: auth off (a put without credentials is
//! taken), `state: Promoted` saying why, the revision it held kept, and it
//! follows no more.

#[allow(dead_code)]
#[path = "common/store.rs"]
mod store;

#[allow(dead_code)]
#[path = "common/standby.rs"]
mod standby;

use etcd_operator::testing::acked::Writer;
use etcd_operator::testing::{Env, client_urls, manifest};
use standby::{primary, revision, revision_as, standby, standby_status};

#[test]
fn a_standby_whose_spec_lost_its_source_while_the_operator_was_down_is_promoted() {
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
    let following = env.wait_for("the standby read-only and following", || {
        let s = standby_status(&env, "dr")?;
        (s.read_only == Some(true) && s.applied_revision > 50).then_some(s)
    });
    let root = env.standby_credentials("dr", "root");

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
