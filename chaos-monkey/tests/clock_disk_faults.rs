//! clock-skew and slow-disk against real 3-member etcd clusters: a
//! follower's wall clock shifted (seen in the `Date` header its HTTP server
//! sends, taken from the process's own clock) and its disk writes
//! throttled (seen in etcd's own WAL fsync histogram); the cluster keeps
//! serving writes; the heal (at SIGTERM, or `--cleanup` after a SIGKILL)
//! puts everything back in the same process. Needs root, ptrace, and the
//! cgroup v1 blkio controller, as the faults do.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, SystemTime};

use common::etcd::{Cluster, rt};
use common::{Monkey, one_fault_args, records, run, wait_for};
use etcd_operator::faults::{Fault, Role};
use etcd_operator::platform::local::process::{self, ProcessId};
use rustix::process::Signal;

/// A plain HTTP/1.0 GET of `path` on member `i`: the whole answer.
fn get(c: &Cluster, i: usize, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect((c.ips[i], 2379)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", c.ips[i]).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// How far ahead of ours member `i`'s clock is, in whole seconds, from the
/// `Date` header of its `/health` (which has a resolution of 1 s).
fn clock_offset(c: &Cluster, i: usize) -> Option<i64> {
    let answer = get(c, i, "/health")?;
    let date = answer
        .lines()
        .find_map(|l| l.strip_prefix("Date: "))?
        .trim();
    let theirs = httpdate::parse_http_date(date).ok()?;
    let secs = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    };
    Some((secs(theirs) - secs(SystemTime::now())).round() as i64)
}

fn put_through(c: &Cluster, i: usize, n: usize, tag: &str) {
    rt().block_on(async {
        let mut client = etcd_client::Client::connect([c.url(i)], None)
            .await
            .expect("client");
        for k in 0..n {
            client
                .put(format!("{tag}-{k}"), "v", None)
                .await
                .expect("the cluster takes the write");
        }
    });
}

fn process_of(c: &Cluster, i: usize) -> ProcessId {
    c.state
        .process("net", &c.names[i])
        .expect("the member's process")
}

fn start_monkey(c: &Cluster, log: &std::path::Path, args: &[&str]) -> Monkey {
    let fixed = ["--target", "follower", "--fault-for", "10m", "--seed", "3"];
    let mut all = one_fault_args(c.state_arg(), log, &fixed);
    all.extend_from_slice(args);
    Monkey::start(&all)
}

/// The ledger records of clock patches of monkey `pid`.
fn clock_records(pid: i32) -> Vec<String> {
    let prefix = format!("clock-{pid}-");
    std::fs::read_dir(chaos_monkey::clock::LEDGER_DIR)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Skews a follower of a fresh `version` cluster by 30 s; returns the
/// cluster, the victim and the running monkey.
fn skew_a_follower(version: &'static str, skew: &str) -> (Cluster, usize, Monkey) {
    let c = Cluster::start_version(3, version, &[]);
    c.wait_leader();
    for i in 0..3 {
        let o = wait_for("every member's Date header", || clock_offset(&c, i));
        assert!(o.abs() <= 2, "member {i} is already {o} s off");
    }
    let log = c.state.dir.path().join("faults.jsonl");
    let m = start_monkey(&c, &log, &["--fault", "clock-skew", "--skew", skew]);
    let rec = wait_for("the clock-skew record", || records(&log).into_iter().next());
    assert_eq!(
        (rec.fault, rec.role, rec.outcome.as_str()),
        (Fault::ClockSkew, Role::Follower, "injected"),
        "{rec:?}\n{}",
        m.stderr()
    );
    let victim = c.index(&rec.member);
    (c, victim, m)
}

fn clock_skew_is_seen_served_through_and_healed(version: &'static str) {
    let (c, victim, m) = skew_a_follower(version, "30s");
    let before = process_of(&c, victim);
    let off = wait_for("the victim's Date header 30 s ahead", || {
        clock_offset(&c, victim).filter(|o| (28..=32).contains(o))
    });
    assert!((28..=32).contains(&off));
    for i in (0..3).filter(|&i| i != victim) {
        let o = clock_offset(&c, i).expect("a Date header");
        assert!(
            o.abs() <= 2,
            "member {i} was not the victim but is {o} s off"
        );
    }
    // The cluster serves writes, also through the skewed member.
    put_through(&c, victim, 20, "skewed");
    put_through(&c, (victim + 1) % 3, 20, "other");
    assert_eq!(clock_records(m.pid()).len(), 1, "the patch is recorded");
    let pid = m.pid();
    m.signal(Signal::TERM);
    let done = m.wait();
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    let o = clock_offset(&c, victim).expect("a Date header");
    assert!(o.abs() <= 2, "healed, yet the victim is {o} s off");
    assert!(process::alive(&before), "the victim never restarted");
    assert_eq!(process_of(&c, victim), before);
    assert!(clock_records(pid).is_empty(), "the record is removed");
    let log = c.state.dir.path().join("faults.jsonl");
    let kinds: Vec<(Fault, String)> = records(&log)
        .into_iter()
        .map(|r| (r.fault, r.outcome))
        .collect();
    assert_eq!(
        kinds,
        [
            (Fault::ClockSkew, "injected".to_string()),
            (Fault::Heal, "injected".to_string())
        ]
    );
    put_through(&c, victim, 5, "after");
    c.wait_leader();
}

#[test]
fn clock_skew_of_a_follower_on_3_4_23() {
    clock_skew_is_seen_served_through_and_healed("3.4.23");
}

#[test]
fn clock_skew_of_a_follower_on_3_5_1() {
    clock_skew_is_seen_served_through_and_healed("3.5.1");
}

/// WAL fsyncs of member `i` so far: (all, slower than 64 ms), from its
/// `etcd_disk_wal_fsync_duration_seconds` histogram.
fn fsyncs(c: &Cluster, i: usize) -> Option<(u64, u64)> {
    let text = get(c, i, "/metrics")?;
    let value = |prefix: &str| -> Option<u64> {
        let l = text.lines().find(|l| l.starts_with(prefix))?;
        l.rsplit(' ')
            .next()?
            .trim()
            .parse::<f64>()
            .ok()
            .map(|v| v as u64)
    };
    let all = value("etcd_disk_wal_fsync_duration_seconds_count")?;
    let fast = value("etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.064\"}")?;
    Some((all, all - fast))
}

/// The blkio cgroup of `pid`.
fn blkio_cgroup(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.split_once(":blkio:").map(|(_, p)| p.to_string()))
        .unwrap_or_default()
}

fn chaos_cgroups(pid: i32) -> Vec<String> {
    let own = format!("{}{pid}-", chaos_monkey::disk::slow::PREFIX);
    chaos_monkey::disk::slow::cgroups()
        .into_iter()
        .filter(|p| p.rsplit('/').next().is_some_and(|n| n.starts_with(&own)))
        .collect()
}

#[test]
fn slow_disk_makes_a_followers_fsyncs_slow_until_healed() {
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader();
    let log = c.state.dir.path().join("faults.jsonl");
    let m = start_monkey(&c, &log, &["--fault", "slow-disk", "--disk-iops", "10"]);
    let rec = wait_for("the slow-disk record", || records(&log).into_iter().next());
    assert_eq!(
        (rec.fault, rec.outcome.as_str()),
        (Fault::SlowDisk, "injected"),
        "{rec:?}\n{}",
        m.stderr()
    );
    let victim = c.index(&rec.member);
    let before = process_of(&c, victim);
    let cg = blkio_cgroup(before.pid);
    assert!(cg.contains("/etcd-chaos-"), "moved into its cgroup: {cg}");
    assert_eq!(chaos_cgroups(m.pid()).len(), 1);
    let (_, slow_before) = fsyncs(&c, victim).expect("metrics");
    // Writes go on (the leader and the other follower make a quorum); the
    // victim's own WAL fsyncs are slow.
    let mut n = 0;
    let (_, slow_during) = wait_for("slow fsyncs on the victim", || {
        n += 1;
        put_through(&c, leader, 5, &format!("slow-{n}"));
        fsyncs(&c, victim).filter(|(_, s)| *s >= slow_before + 5)
    });
    let pid = m.pid();
    m.signal(Signal::TERM);
    let done = m.wait();
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    assert!(chaos_cgroups(pid).is_empty(), "the cgroup is removed");
    assert!(!blkio_cgroup(before.pid).contains("etcd-chaos"));
    assert!(process::alive(&before), "the victim never restarted");
    // Healed: new writes no longer add slow fsyncs beyond a stray one.
    let (_, slow_after_heal) = fsyncs(&c, victim).expect("metrics");
    put_through(&c, leader, 40, "fast");
    let (_, slow_end) = fsyncs(&c, victim).expect("metrics");
    assert!(
        slow_end <= slow_after_heal + 2,
        "still slow after the heal: {slow_after_heal} -> {slow_end} (during: {slow_during})"
    );
    let kinds: Vec<Fault> = records(&log).into_iter().map(|r| r.fault).collect();
    assert_eq!(kinds, [Fault::SlowDisk, Fault::Heal]);
}

/// One test runs `--cleanup` (which undoes the leftovers of every gone
/// monkey), so two cleanups of this file never race.
#[test]
fn what_killed_monkeys_left_is_undone_by_cleanup() {
    a_clock_a_killed_monkey_shifted_is_restored_by_cleanup();
    a_slow_disk_a_killed_monkey_left_is_removed_by_cleanup();
}

fn a_slow_disk_a_killed_monkey_left_is_removed_by_cleanup() {
    let c = Cluster::start(3, &[]);
    c.wait_leader();
    let log = c.state.dir.path().join("faults.jsonl");
    let m = start_monkey(&c, &log, &["--fault", "slow-disk"]);
    let rec = wait_for("the slow-disk record", || records(&log).into_iter().next());
    let victim = c.index(&rec.member);
    let before = process_of(&c, victim);
    let pid = m.pid();
    m.signal(Signal::KILL);
    let _ = m.wait();
    assert_eq!(chaos_cgroups(pid).len(), 1, "left behind");
    let cleaned = run(&["--cleanup", "--state-dir", c.state_arg()]);
    assert_eq!(cleaned.code(), Some(0), "{}", cleaned.stderr);
    assert!(
        cleaned.stderr.contains("removed blkio cgroup"),
        "{}",
        cleaned.stderr
    );
    assert!(chaos_cgroups(pid).is_empty());
    assert!(!blkio_cgroup(before.pid).contains("etcd-chaos"));
    assert!(process::alive(&before));
}

fn a_clock_a_killed_monkey_shifted_is_restored_by_cleanup() {
    let (c, victim, m) = skew_a_follower("3.4.23", "-1m");
    wait_for("the victim's Date header a minute behind", || {
        clock_offset(&c, victim).filter(|o| (-62..=-58).contains(o))
    });
    let before = process_of(&c, victim);
    let pid = m.pid();
    m.signal(Signal::KILL);
    let done = m.wait();
    assert_eq!(done.code(), None, "killed");
    assert_eq!(
        clock_records(pid).len(),
        1,
        "the record outlives the monkey"
    );
    // A new monkey refuses to skew members while a gone one's patch is on.
    let refused = run(&[
        "--state-dir",
        c.state_arg(),
        "--fault",
        "clock-skew",
        "--max-faults",
        "1",
    ]);
    assert_eq!(refused.code(), Some(2), "{}", refused.stderr);
    assert!(refused.stderr.contains("--cleanup"), "{}", refused.stderr);
    let cleaned = run(&["--cleanup", "--state-dir", c.state_arg()]);
    assert_eq!(cleaned.code(), Some(0), "{}", cleaned.stderr);
    assert!(
        cleaned.stderr.contains("restored the clock of net/"),
        "{}",
        cleaned.stderr
    );
    let o = clock_offset(&c, victim).expect("a Date header");
    assert!(o.abs() <= 2, "cleaned up, yet the victim is {o} s off");
    assert!(process::alive(&before), "the victim never restarted");
    assert!(clock_records(pid).is_empty());
    put_through(&c, victim, 5, "after");
}
