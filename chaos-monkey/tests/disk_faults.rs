//! Disk faults against real 3-member etcd clusters: `corrupt` (the member
//! is stopped with damaged files; etcd itself then refuses them) and
//! `disk-full` (etcd raises its NOSPACE alarm). The test restarts the
//! member itself (there is no operator here).

mod common;

use std::time::Duration;

use common::etcd::{Cluster, rt};
use common::{one_fault_args, records, run, wait_for};
use etcd_client::{AlarmAction, AlarmOptions, AlarmType};
use etcd_operator::faults::Fault;
use etcd_operator::platform::local::process::{self, ProcessId};

fn put_some(c: &Cluster, leader: usize) {
    rt().block_on(async {
        let mut client = etcd_client::Client::connect([c.url(leader)], None)
            .await
            .expect("client");
        for i in 0..50 {
            client
                .put(format!("key-{i}"), format!("value-{i}"), None)
                .await
                .expect("put");
        }
    });
}

/// Corrupts one follower's `part` and restarts it (waiting for it to exit
/// when `fails`); returns the cluster, the victim, its log since the restart
/// and the fault log.
fn corrupt_and_restart(part: &str, fails: bool) -> (Cluster, usize, String, String) {
    let mut c = Cluster::start(
        3,
        &[
            "--experimental-initial-corrupt-check",
            "--experimental-corrupt-check-time",
            "1s",
        ],
    );
    let leader = c.wait_leader();
    put_some(&c, leader);
    // Every member at the same revision before the damage.
    wait_for("equal revisions", || {
        let s = c.statuses();
        let r: Vec<i64> = s
            .iter()
            .filter_map(|m| m.as_ref().map(|m| m.revision))
            .collect();
        (r.len() == 3 && r.iter().all(|x| *x == r[0])).then_some(())
    });
    let log = c.state.dir.path().join("faults.jsonl");
    let fault = [
        "--fault",
        "corrupt",
        "--corrupt",
        part,
        "--target",
        "follower",
    ];
    let done = run(&one_fault_args(c.state_arg(), &log, &fault));
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    let rec = records(&log).into_iter().next().expect("a record");
    assert_eq!(
        (rec.fault, rec.outcome.as_str()),
        (Fault::Corrupt, "injected"),
        "{rec:?}"
    );
    let victim = c.index(&rec.member);
    let line = std::fs::read_to_string(&log).expect("log");
    // Stopped by the fault; started again here, on the damaged files.
    let before = std::fs::read_to_string(c.log(victim))
        .unwrap_or_default()
        .len();
    let id: ProcessId = c.spawn(victim, "existing");
    if fails {
        wait_for("the damaged member to give up", || {
            (!process::alive(&id)).then_some(())
        });
    }
    let text = std::fs::read_to_string(c.log(victim)).expect("member log");
    (c, victim, text[before..].to_string(), line)
}

#[test]
fn a_corrupt_db_is_silent_until_etcds_hash_check_raises_corrupt() {
    let (c, victim, _, line) = corrupt_and_restart("db", false);
    assert!(line.contains("member/snap/db"), "{line}");
    // etcd's own view: the damaged member's KV hash differs at the same
    // revision, and the leader's periodic check raises a CORRUPT alarm
    // (3.4.23's initial check at start lets it through).
    let rt = rt();
    let hashes = wait_for("every member answers HashKV at one revision", || {
        rt.block_on(async {
            let mut out = Vec::new();
            for i in 0..3 {
                let mut client = etcd_client::Client::connect([c.url(i)], None).await.ok()?;
                let r = client.hash_kv(0).await.ok()?;
                out.push((r.header()?.revision(), r.hash()));
            }
            Some(out)
        })
    });
    let others: Vec<u32> = (0..3)
        .filter(|&i| i != victim)
        .map(|i| hashes[i].1)
        .collect();
    assert_eq!(others[0], others[1], "{hashes:?}");
    assert_ne!(hashes[victim].1, others[0], "{hashes:?}");
    wait_for("a CORRUPT alarm", || {
        rt.block_on(async {
            for i in 0..3 {
                let Ok(mut client) = etcd_client::Client::connect([c.url(i)], None).await else {
                    continue;
                };
                let Ok(a) = client
                    .alarm(AlarmAction::Get, AlarmType::None, None::<AlarmOptions>)
                    .await
                else {
                    continue;
                };
                if a.alarms().iter().any(|m| m.alarm() == AlarmType::Corrupt) {
                    return Some(());
                }
            }
            None
        })
    });
}

#[test]
fn a_corrupt_wal_is_refused_by_etcd() {
    let (_c, _, etcd_log, line) = corrupt_and_restart("wal", true);
    assert!(line.contains(".wal"), "{line}");
    assert!(
        etcd_log.contains("crc mismatch"),
        "etcd should refuse the damaged WAL:\n{etcd_log}"
    );
}

#[test]
fn disk_full_fills_the_keyspace_until_etcd_raises_nospace() {
    let c = Cluster::start(3, &["--quota-backend-bytes", "16777216"]);
    c.wait_leader();
    let log = c.state.dir.path().join("faults.jsonl");
    let fault = ["--fault", "disk-full", "--fill-max", "256MiB"];
    let done = run(&one_fault_args(c.state_arg(), &log, &fault));
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    let rec = records(&log).into_iter().next().expect("a record");
    assert_eq!(
        (rec.fault, rec.outcome.as_str()),
        (Fault::DiskFull, "injected"),
        "{rec:?}"
    );
    // etcd's own view: the alarm list holds NOSPACE, and a put is refused.
    let (alarms, put) = rt().block_on(async {
        let mut client = etcd_client::Client::connect([c.url(0)], None)
            .await
            .expect("client");
        let a = client
            .alarm(AlarmAction::Get, AlarmType::None, None::<AlarmOptions>)
            .await
            .expect("alarm list");
        let kinds: Vec<AlarmType> = a.alarms().iter().map(|m| m.alarm()).collect();
        let put = client
            .put("after", "x", None)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string());
        (kinds, put)
    });
    assert!(alarms.contains(&AlarmType::Nospace), "{alarms:?}");
    let err = put.expect_err("writes are refused under NOSPACE");
    assert!(err.contains("database space exceeded"), "{err}");
    let _ = Duration::ZERO;
}
