//! Spec fields etcd takes only at start are applied to a running cluster:
//! a raised `quotaBackendBytes` and a new `compaction` restart the members
//! one at a time, and each etcd process then runs with them (read from its
//! command line). Before, they restarted nothing while status said the
//! cluster matched the spec.

use etcd_operator::testing::{Env, manifest};

fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

#[test]
fn a_raised_quota_and_a_new_compaction_reach_every_member() {
    let mut env = Env::new();
    let base = manifest("demo", 3, "3.4.23");
    env.write_manifest(
        "demo.yaml",
        &format!("{base}  quotaBackendBytes: 16777216\n"),
    );
    env.start_operator();
    let c = env.wait_running("demo", 3);
    let members: Vec<String> = c
        .status
        .as_ref()
        .map(|s| s.members.iter().map(|m| m.name.clone()).collect())
        .unwrap_or_default();
    assert_eq!(members.len(), 3);
    env.write_manifest(
        "demo.yaml",
        &format!(
            "{base}  quotaBackendBytes: 33554432\n  compaction: {{mode: Revision, retention: \"1000\"}}\n"
        ),
    );
    env.wait_for("every member running the new quota and compaction", || {
        let all = members.iter().all(|m| {
            env.pid("demo", m).is_some_and(|pid| {
                let args = cmdline(pid);
                args.contains("--quota-backend-bytes 33554432")
                    && args.contains("--auto-compaction-mode revision")
            })
        });
        let c = env.status("demo")?;
        let running = c.status.as_ref()?.phase.as_str() == "Running";
        (all && running).then_some(())
    });
}
