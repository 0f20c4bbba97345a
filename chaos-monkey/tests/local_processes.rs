//! The local target against a fake state folder whose members are `sleep`
//! processes: what each fault does to a process and its data, bounds,
//! seeds, signals. No etcd, no operator (nothing restarts a victim).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::{FakeState, Monkey, proc_state, records, run, run_ok, victims, wait_for};
use etcd_operator::faults::{Fault, Role};
use etcd_operator::platform::local::process;
use rustix::process::Signal;

fn log_path(s: &FakeState) -> PathBuf {
    s.dir.path().join("faults.jsonl")
}

#[test]
fn kill_hits_only_the_selected_cluster_and_stops_after_max_faults() {
    let mut s = FakeState::new();
    let demo = s.add_cluster("demo", 3);
    let other = s.add_cluster("other", 2);
    let log = log_path(&s);
    let done = run_ok(
        s.state_arg(),
        Some(&log),
        "--cluster demo --kill-interval 50ms --max-faults 3 --seed 1",
    );
    assert!(
        done.stderr.contains("--max-faults reached"),
        "{}",
        done.stderr
    );
    let recs = records(&log);
    assert_eq!(recs.len(), 3, "{recs:?}");
    assert!(
        recs.iter()
            .all(|r| r.cluster == "demo" && r.fault == Fault::Kill && r.injected())
    );
    assert!(
        recs.iter().all(|r| r.role == Role::Unknown),
        "no etcd answers here"
    );
    assert!(
        demo.iter().all(|p| !process::alive(p)),
        "all three demo members killed"
    );
    assert!(
        other.iter().all(process::alive),
        "the other cluster is untouched"
    );
    // One human line per fault.
    assert_eq!(
        done.stderr.matches("chaos-monkey: kill demo/").count(),
        3,
        "{}",
        done.stderr
    );
}

#[test]
fn a_seed_replays_the_same_victims() {
    let order = |seed: &str| {
        let mut s = FakeState::new();
        s.add_cluster("a", 3);
        s.add_cluster("b", 2);
        let log = log_path(&s);
        run_ok(
            s.state_arg(),
            Some(&log),
            &format!("--kill-interval 20ms --max-faults 5 --seed {seed}"),
        );
        victims(&records(&log))
    };
    let first = order("42");
    assert_eq!(first.len(), 5);
    assert_eq!(first, order("42"), "same seed, same clusters: same victims");
    assert_ne!(first, order("43"));
}

#[test]
fn destroy_kills_and_wipes_the_data() {
    let mut s = FakeState::new();
    let ids = s.add_cluster("demo", 1);
    let log = log_path(&s);
    run_ok(
        s.state_arg(),
        Some(&log),
        "--fault destroy --kill-interval 20ms --max-faults 1",
    );
    assert!(!process::alive(&ids[0]));
    let layout = s.layout();
    assert!(!layout.data_dir("demo", "demo-0").exists(), "data wiped");
    let leftovers: Vec<_> = std::fs::read_dir(layout.member_dir("demo", "demo-0"))
        .expect("member dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    assert_eq!(leftovers, ["member.json"], "nothing but the record is left");
    let r = &records(&log)[0];
    assert_eq!((r.fault, r.outcome.as_str()), (Fault::Destroy, "injected"));
}

#[test]
fn pause_is_resumed_after_pause_for() {
    let mut s = FakeState::new();
    let ids = s.add_cluster("demo", 3);
    let log = log_path(&s);
    let done = run_ok(
        s.state_arg(),
        Some(&log),
        "--fault pause --pause-for 50ms --kill-interval 200ms --max-faults 2",
    );
    // A due resume is always done before the next tick, and the run waits
    // for the last pause to end.
    let kinds: Vec<Fault> = records(&log).iter().map(|r| r.fault).collect();
    assert_eq!(
        kinds,
        [Fault::Pause, Fault::Resume, Fault::Pause, Fault::Resume],
        "{}",
        done.stderr
    );
    for id in &ids {
        assert!(process::alive(id));
        assert_ne!(proc_state(id.pid), Some('T'), "pid {} left stopped", id.pid);
    }
}

fn paused_then_signalled(sig: Signal) {
    let mut s = FakeState::new();
    let ids = s.add_cluster("demo", 3);
    let log = log_path(&s);
    let m = Monkey::start(&[
        "--state-dir",
        s.state_arg(),
        "--fault",
        "pause",
        "--pause-for",
        "1h",
        "--kill-interval",
        "50ms",
        "--fault-log",
        log.to_str().expect("utf-8"),
    ]);
    let paused = wait_for("a member paused", || {
        let r = records(&log)
            .into_iter()
            .find(|r| r.fault == Fault::Pause)?;
        let id = s.process("demo", &r.member)?;
        (proc_state(id.pid) == Some('T')).then_some(id)
    });
    m.signal(sig);
    let done = m.wait();
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    assert!(done.stderr.contains("stopped by signal"), "{}", done.stderr);
    for id in &ids {
        assert_ne!(proc_state(id.pid), Some('T'), "pid {} left stopped", id.pid);
    }
    assert!(process::alive(&paused));
    let recs = records(&log);
    let pauses = recs.iter().filter(|r| r.fault == Fault::Pause).count();
    let resumes = recs
        .iter()
        .filter(|r| r.fault == Fault::Resume && r.injected())
        .count();
    assert!(pauses >= 1 && pauses == resumes, "{recs:?}");
}

#[test]
fn sigterm_resumes_paused_members() {
    paused_then_signalled(Signal::TERM);
}

#[test]
fn sigint_resumes_paused_members() {
    paused_then_signalled(Signal::INT);
}

#[test]
fn dry_run_touches_nothing() {
    let mut s = FakeState::new();
    let ids = s.add_cluster("demo", 3);
    let log = log_path(&s);
    for fault in ["kill", "destroy", "pause"] {
        let done = run_ok(
            s.state_arg(),
            Some(&log),
            &format!("--fault {fault} --dry-run --kill-interval 20ms --max-faults 3"),
        );
        assert!(done.stderr.contains("DRY RUN"), "{}", done.stderr);
    }
    let recs = records(&log);
    assert_eq!(recs.len(), 9, "{recs:?}");
    assert!(recs.iter().all(|r| r.outcome == "dry-run"), "{recs:?}");
    for (i, id) in ids.iter().enumerate() {
        assert!(process::alive(id));
        assert_ne!(proc_state(id.pid), Some('T'));
        assert!(s.layout().has_data("demo", &format!("demo-{i}")));
    }
}

#[test]
fn young_members_are_spared() {
    let mut s = FakeState::new();
    let young = s
        .add_member("demo", "demo-0", true, SystemTime::now())
        .expect("runs");
    let old = s
        .add_member(
            "demo",
            "demo-1",
            true,
            SystemTime::now() - Duration::from_secs(7200),
        )
        .expect("runs");
    let log = log_path(&s);
    let done = run_ok(
        s.state_arg(),
        Some(&log),
        "--min-age 1h --kill-interval 20ms --duration 500ms",
    );
    assert!(
        done.stderr.contains("--duration reached"),
        "{}",
        done.stderr
    );
    let recs = records(&log);
    assert_eq!(
        victims(&recs),
        ["Kill demo/demo-1"],
        "only the old member, once"
    );
    assert!(process::alive(&young));
    assert!(!process::alive(&old));
}

#[test]
fn probability_zero_never_fires() {
    let mut s = FakeState::new();
    let ids = s.add_cluster("demo", 3);
    let done = run_ok(
        s.state_arg(),
        None,
        "--probability 0 --kill-interval 20ms --duration 300ms",
    );
    assert!(done.stderr.contains("0 faults"), "{}", done.stderr);
    assert!(ids.iter().all(process::alive));
}

/// A stand-in operator: a copy of `sleep` named etcd-operator, so its
/// process name is the operator's.
fn fake_operator(s: &mut FakeState) -> process::ProcessId {
    let bin = s.dir.path().join("etcd-operator");
    std::fs::copy("/bin/sleep", &bin).expect("copy sleep");
    let id = s.spawn(&bin, &["300"]);
    std::fs::write(
        s.state.join("operator.lock"),
        format!("pid {} start {}\n", id.pid, id.start_time),
    )
    .expect("lock");
    id
}

#[test]
fn operator_target_kills_the_operator_and_no_member() {
    let mut s = FakeState::new();
    let members = s.add_cluster("demo", 3);
    let op = fake_operator(&mut s);
    let log = log_path(&s);
    run_ok(
        s.state_arg(),
        Some(&log),
        "--target operator --dry-run --kill-interval 20ms --max-faults 1",
    );
    assert!(process::alive(&op), "a dry run does not touch the operator");
    run_ok(
        s.state_arg(),
        Some(&log),
        "--target operator --kill-interval 20ms --max-faults 1",
    );
    assert!(!process::alive(&op));
    assert!(members.iter().all(process::alive));
    let recs = records(&log);
    assert_eq!(recs.len(), 2);
    assert!(
        recs.iter()
            .all(|r| r.cluster.is_empty() && r.member == "etcd-operator")
    );
    assert_eq!(
        (recs[0].outcome.as_str(), recs[1].outcome.as_str()),
        ("dry-run", "injected")
    );
}

#[test]
fn a_stale_lock_naming_another_process_is_left_alone() {
    let mut s = FakeState::new();
    s.add_cluster("demo", 1);
    let other = s.spawn(Path::new("/bin/sleep"), &["300"]);
    std::fs::write(
        s.state.join("operator.lock"),
        format!("pid {} start {}\n", other.pid, other.start_time),
    )
    .expect("lock");
    let done = run_ok(
        s.state_arg(),
        None,
        "--target operator --kill-interval 20ms --duration 300ms",
    );
    assert!(done.stderr.contains("0 faults"), "{}", done.stderr);
    assert!(
        process::alive(&other),
        "a process that is not etcd-operator is never hit"
    );
}

#[test]
fn members_already_down_are_not_hit_again() {
    let mut s = FakeState::new();
    let long_ago = SystemTime::now() - Duration::from_secs(3600);
    s.add_member("demo", "demo-0", false, long_ago);
    let up = s
        .add_member("demo", "demo-1", true, long_ago)
        .expect("runs");
    s.add_member("demo", "demo-2", false, long_ago);
    let log = log_path(&s);
    run_ok(
        s.state_arg(),
        Some(&log),
        "--kill-interval 20ms --duration 300ms",
    );
    assert_eq!(victims(&records(&log)), ["Kill demo/demo-1"]);
    assert!(!process::alive(&up));
}

#[test]
fn cleanup_resumes_a_member_a_killed_monkey_left_paused() {
    let mut s = FakeState::new();
    let ids = s.add_cluster("demo", 2);
    let paused = ids[0];
    assert!(process::signal(&paused, Signal::STOP).expect("stop"));
    wait_for("the member stopped", || {
        (proc_state(paused.pid) == Some('T')).then_some(())
    });
    let state = s.state.to_string_lossy().into_owned();
    let done = run(&["--cleanup", "--state-dir", &state]);
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    assert!(
        done.stderr.contains("resumed member demo/demo-0"),
        "{}",
        done.stderr
    );
    assert!(
        !done.stderr.contains("nothing left behind"),
        "{}",
        done.stderr
    );
    wait_for("the member running again", || {
        (proc_state(paused.pid) != Some('T')).then_some(())
    });
    assert_ne!(proc_state(ids[1].pid), Some('T'));
}
