//! Read-only while standby on etcd 3.5.1 (issue 36; 3.4.23 in
//! `standby.rs`), against real etcd: a standby of a primary under a
//! writer refuses a put without credentials and one as the reader and
//! answers a get as the reader; grown from 1 member to 3 (each member
//! added as root), the new members refuse the same (auth came to them
//! through raft) and hold the primary's `HashKV`; an operator restart
//! finds auth on from etcd itself and applying goes on; promoted, a put
//! without credentials is taken.

#[allow(dead_code)]
#[path = "common/store.rs"]
mod store;

#[allow(dead_code)]
#[path = "common/standby.rs"]
mod standby;

use etcd_operator::testing::acked::Writer;
use etcd_operator::testing::{Env, client_urls};
use standby::{assert_same_as_primary, etcdctl_as, primary, revision, standby, standby_status};

const V35: &str = "3.5.1";

/// `manifest` at etcd 3.5.1.
fn at_35(manifest: &str) -> String {
    manifest.replace("\"3.4.23\"", &format!("\"{V35}\""))
}

#[test]
fn a_3_5_standby_refuses_clients_writes_on_every_member_until_promoted() {
    let mut env = Env::new();
    env.write_manifest("p.yaml", &at_35(&primary("p", None)));
    env.start_operator();
    let p = env.wait_running("p", 3);
    env.wait_for("a full backup of the primary", || {
        env.status("p")?.status?.backup?.last_backup
    });
    let writer = Writer::start(client_urls(&p), "w/");
    env.write_manifest("r.yaml", &at_35(&standby("r", 1, "p", None, false)));
    env.wait_running("r", 1);
    env.wait_for("the standby read-only and following", || {
        let s = standby_status(&env, "r")?;
        (s.read_only == Some(true) && s.applied_revision > 50).then_some(())
    });
    let reader = env.standby_credentials("r", "reader");

    // Grown to 3: each member added as root; auth reaches them by raft.
    env.write_manifest("r.yaml", &at_35(&standby("r", 3, "p", None, false)));
    let r = env.wait_running("r", 3);
    for url in client_urls(&r) {
        let one = [url.clone()];
        // A member just promoted may take a while to answer (under load:
        // "context deadline exceeded"); each answer is waited for.
        let answer = |who, args: &[&str]| {
            env.wait_for(&format!("an answer at {url} to {args:?}"), || {
                let said = etcdctl_as(&env, &one, who, args);
                (!said.contains("deadline exceeded")).then_some(said)
            })
        };
        let anonymous = answer(None, &["put", "w/client", "x"]);
        assert!(
            anonymous.contains("user name is empty"),
            "{url}: {anonymous}"
        );
        let as_reader = answer(Some(&reader), &["put", "w/client", "x"]);
        assert!(
            as_reader.contains("permission denied"),
            "{url}: {as_reader}"
        );
        let read = answer(Some(&reader), &["get", "w/", "--prefix", "--limit=1"]);
        assert!(read.starts_with("ok: w/"), "{url}: {read}");
    }

    // An operator restart: auth is found on from etcd; applying goes on.
    let before = standby_status(&env, "r").map_or(0, |s| s.applied_revision);
    env.stop_operator();
    env.start_operator();
    env.wait_for("applying after the operator's restart", || {
        let s = standby_status(&env, "r")?;
        (s.applied_revision > before + 100 && s.read_only == Some(true)).then_some(())
    });
    writer.stop();
    let target = revision(&client_urls(&p));
    assert_same_as_primary(&env, "r", &p, target);

    env.write_manifest("r.yaml", &at_35(&standby("r", 3, "p", None, true)));
    let promoted = env.wait_for("the standby promoted", || {
        standby_status(&env, "r").filter(|s| s.state == "Promoted")
    });
    assert_eq!(promoted.read_only, Some(false), "{promoted:?}");
    let out = etcdctl_as(&env, &client_urls(&r), None, &["put", "own", "1"]);
    assert!(
        out.starts_with("ok"),
        "a promoted cluster takes writes: {out}"
    );
}
