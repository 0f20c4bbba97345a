//! Spec fields etcd takes only at start are applied to a running cluster:
//! a raised `quotaBackendBytes` and a new `compaction` restart the members
//! one at a time, and each etcd process then runs with them (read from its
//! command line). Before, they restarted nothing while status said the
//! cluster matched the spec.

use etcd_operator::testing::{Env, client_urls, manifest};

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

/// The NOSPACE loop: a cluster filled to its 1 MiB quota, then
/// the quota raised as the operator's own advice says, while a client
/// keeps trying to write. The alarm is judged by the quota each member
/// runs with: disarmed only when etcd has room under it, the members
/// restarted one by one with the new quota, and writes then go past the
/// old one. Before, the alarm was disarmed by the spec's quota while etcd
/// kept its 1 MiB ("1780 KiB of a 8388608 KiB quota", 37 times in 15 s),
/// so each disarm let no write in.
#[test]
fn a_raised_quota_clears_nospace_and_writes_go_past_the_old_one() {
    const OLD: u64 = 1 << 20;
    const NEW: u64 = 64 << 20;
    let mut env = Env::new();
    let base = manifest("demo", 3, "3.4.23");
    env.write_manifest("demo.yaml", &format!("{base}  quotaBackendBytes: {OLD}\n"));
    env.start_operator();
    let c = env.wait_running("demo", 3);
    let urls = client_urls(&c);
    let members: Vec<String> = c
        .status
        .as_ref()
        .map(|s| s.members.iter().map(|m| m.name.clone()).collect())
        .unwrap_or_default();
    // Paused while the keys fill the quota, so the pass that reads the
    // raised quota is the first to see the alarm.
    env.write_manifest(
        "demo.yaml",
        &format!("{base}  quotaBackendBytes: {OLD}\n  paused: true\n"),
    );
    env.wait_for("the operator paused", || {
        (env.status("demo")?.status?.phase.as_str() == "Paused").then_some(())
    });
    let value = "v".repeat(64 << 10);
    let mut n = 0u32;
    let mut put = |env: &Env| {
        n += 1;
        let out = env.etcdctl(&urls, &["put", &format!("k{n}"), &value]);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Distinct keys: nothing a compaction frees.
    let refused = (0..200).any(|_| {
        let (ok, err) = put(&env);
        !ok && err.contains("database space exceeded")
    });
    assert!(refused, "200 puts of 64 KiB never hit a 1 MiB quota");
    let raised_at = std::fs::read_to_string(env.operator_log()).map_or(0, |l| l.len());
    env.write_manifest("demo.yaml", &format!("{base}  quotaBackendBytes: {NEW}\n"));
    let runs_new = |env: &Env, m: &str| {
        env.pid("demo", m)
            .is_some_and(|pid| cmdline(pid).contains(&format!("--quota-backend-bytes {NEW}")))
    };
    let mut generation = None;
    env.wait_for(
        "a write accepted with every member on the new quota",
        || {
            let s = env.status("demo")?.status?;
            if s.phase.as_str() == "Paused" {
                generation = s.observed_generation;
                return None;
            }
            // Status never says the cluster matches the new spec while a
            // member runs the old quota.
            let converged = s
                .condition("Progressing")
                .is_some_and(|p| p.reason == "Converged");
            let all_new = members.iter().all(|m| runs_new(&env, m));
            assert!(
                !converged || s.observed_generation <= generation || all_new,
                "status says converged while a member runs the old quota"
            );
            let (ok, _) = put(&env);
            (ok && all_new && converged).then_some(())
        },
    );
    // Past the old quota: two more MiB.
    for _ in 0..32 {
        let (ok, err) = put(&env);
        assert!(ok, "a write past the old quota was refused: {err}");
    }
    // Each disarm named the quota the members ran with then: the old one
    // until each had been restarted with the new.
    let log = std::fs::read_to_string(env.operator_log()).unwrap_or_default();
    let log = log.get(raised_at..).unwrap_or_default();
    let mut restarted = std::collections::BTreeSet::new();
    for line in log.lines() {
        if let Some(m) = members
            .iter()
            .find(|m| line.contains(&format!("restart member {m} ")))
        {
            restarted.insert(m.clone());
        }
        if line.contains("NOSPACE alarm disarmed") {
            let quota = if restarted.len() == members.len() {
                NEW
            } else {
                OLD
            };
            assert!(
                line.contains(&format!("of a {} KiB quota", quota >> 10)),
                "disarmed by a quota etcd did not run with ({} of {} members restarted with \
                 the new one): {line}",
                restarted.len(),
                members.len()
            );
        }
    }
}
