//! The operator's answers to the monkey's disk faults, against real etcd
//! run by the real operator: a NOSPACE alarm (`disk-full` against a
//! cluster with a small quota) cleared until writes are accepted again, and
//! a member whose db was damaged (`corrupt --corrupt db`) replaced.

mod common;

use common::{one_fault_args, records, run};
use etcd_operator::faults::Fault;
use etcd_operator::testing::{Env, client_urls};

/// A running operator with one 3-member cluster `demo` whose spec has
/// `extra` appended.
fn cluster(extra: &str) -> Env {
    let mut env = Env::new();
    let text = format!(
        "{}{extra}",
        etcd_operator::testing::manifest("demo", 3, "3.4.23")
    );
    env.write_manifest("demo.yaml", &text);
    env.start_operator();
    env.wait_running("demo", 3);
    env
}

fn monkey(env: &Env, fault: &[&str]) -> Vec<etcd_operator::faults::FaultRecord> {
    let log = env.dir.path().join("faults.jsonl");
    let state = env.state.to_str().expect("utf-8");
    let done = run(&one_fault_args(state, &log, fault));
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    records(&log)
}

fn put(env: &Env, urls: &[String], key: &str) -> std::process::Output {
    env.etcdctl(urls, &["put", key, "v"])
}

#[test]
fn the_operator_clears_a_nospace_alarm_and_writes_are_accepted_again() {
    let env = cluster("  quotaBackendBytes: 16777216\n");
    let urls = client_urls(&env.wait_running("demo", 3));
    assert!(put(&env, &urls, "before").status.success());
    let recs = monkey(&env, &["--fault", "disk-full", "--target", "follower"]);
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0].fault, Fault::DiskFull);
    assert_eq!(recs[0].outcome, "injected", "{recs:?}");
    // Cleared by the operator: writes go through again, the alarm list is
    // empty, and status said what it did.
    env.wait_for("writes accepted again", || {
        put(&env, &urls, "after").status.success().then_some(())
    });
    let alarms = env.etcdctl(&urls, &["alarm", "list"]);
    assert!(alarms.status.success(), "{alarms:?}");
    assert_eq!(String::from_utf8_lossy(&alarms.stdout).trim(), "");
    let get = env.etcdctl(&urls, &["get", "before", "--print-value-only"]);
    assert_eq!(String::from_utf8_lossy(&get.stdout), "v\n", "no write lost");
    let log = std::fs::read_to_string(env.operator_log()).expect("operator log");
    for step in ["compact the history", "defragment member", "NOSPACE alarm"] {
        assert!(log.contains(step), "{step:?} in the operator log:\n{log}");
    }
    let c = env.wait_running("demo", 3);
    let s = c.status.expect("status");
    assert_eq!(
        s.condition("Degraded").map(|d| d.status.as_str()),
        Some("False"),
        "{s:?}"
    );
}

#[test]
fn a_member_with_a_damaged_db_is_replaced() {
    let env = cluster("");
    let c = env.wait_running("demo", 3);
    let urls = client_urls(&c);
    for i in 0..20 {
        assert!(put(&env, &urls, &format!("key-{i}")).status.success());
    }
    let recs = monkey(
        &env,
        &[
            "--fault",
            "corrupt",
            "--corrupt",
            "db",
            "--target",
            "follower",
        ],
    );
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0].outcome, "injected", "{recs:?}");
    let victim = recs[0].member.clone();
    // The operator starts it again on the damaged file, finds its KV hash
    // differs from the other two at the same revision, and replaces it.
    let c = env.wait_replaced("the damaged member replaced", "demo", 3, &[&victim]);
    let urls = client_urls(&c);
    let hashes = env.etcdctl(&urls, &["endpoint", "hashkv", "-w", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&hashes.stdout).expect("hashkv json");
    let all: Vec<u64> = v
        .as_array()
        .expect("one per endpoint")
        .iter()
        .map(|e| e["HashKV"]["hash"].as_u64().unwrap_or_default())
        .collect();
    assert!(all.len() == 3 && all.iter().all(|h| *h == all[0]), "{v}");
    let log = std::fs::read_to_string(env.operator_log()).expect("operator log");
    assert!(log.contains("KV hash differs"), "{log}");
}
