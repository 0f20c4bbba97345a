//! One cluster's slow input never slows another cluster's healing: a
//! restore source that takes long to check (an 8 GiB file, hashed at
//! debug speed for far longer than this test runs) is checked off the
//! controller's main loop, and meanwhile a killed member of a healthy
//! cluster is restarted in place. No timing threshold: the test shows the
//! restart happened while the check still ran.

use etcd_operator::testing::{Env, kill9, manifest};

fn message(env: &Env, cluster: &str) -> Option<String> {
    let s = env.status(cluster)?.status?;
    Some(s.condition("Degraded")?.message.clone())
}

#[test]
fn a_slow_restore_check_does_not_delay_another_clusters_restart() {
    let mut env = Env::new();
    env.write_manifest("healthy.yaml", &manifest("healthy", 1, "3.4.23"));
    env.start_operator();
    let healthy = env.wait_running("healthy", 1);
    let member = healthy.status.expect("status").members[0].name.clone();
    let pid = env.pid("healthy", &member).expect("runs");

    // Sparse: no disk space, but every byte is read and hashed.
    let big = env.dir.path().join("big.db");
    std::fs::File::create(&big)
        .and_then(|f| f.set_len(8 << 30))
        .expect("a sparse 8 GiB file");
    env.write_manifest(
        "slow.yaml",
        &format!(
            "{}  restore:\n    backup: {}\n",
            manifest("slow", 1, "3.4.23"),
            big.display()
        ),
    );
    let checking = env.wait_for("the slow cluster's check started and reported", || {
        message(&env, "slow").filter(|m| m.contains("checking the snapshot"))
    });
    assert!(checking.contains("nothing is created"), "{checking}");

    kill9(pid);
    env.wait_for("the healthy member restarted in place", || {
        env.pid("healthy", &member).filter(|p| *p != pid)
    });
    env.wait_running("healthy", 1);
    let still = message(&env, "slow").unwrap_or_default();
    assert!(
        still.contains("checking the snapshot"),
        "the restart happened while the check still ran: {still}"
    );
    assert!(
        env.layout()
            .member_names("slow")
            .expect("members")
            .is_empty(),
        "nothing created for the cluster being checked"
    );
    // Taking the manifest away stops the check (the operator then stops
    // at once, not after the hash).
    env.remove_manifest("slow.yaml");
    env.wait_for("the slow cluster forgotten", || {
        (!env.layout().cluster_dir("slow").exists()).then_some(())
    });
}
