//! Helpers shared by the integration tests: the chaos-monkey binary as a
//! child that is always stopped (also when a test panics), bounded waits on
//! conditions, and a fake state folder whose "members" are sleep processes.

#![allow(dead_code)]

pub mod etcd;
pub mod kube_api;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime};

use etcd_operator::faults::{self, FaultRecord};
use etcd_operator::member::MemberAddr;
use etcd_operator::platform::local::layout::{Layout, MemberRecord, write_json};
use etcd_operator::platform::local::process::{self, ProcessId};
use etcd_operator::testing::bootstrap_config;

/// The longest any condition is waited for.
pub const WAIT: Duration = Duration::from_secs(60);

/// Waits (bounded by [`WAIT`]) until `f` returns `Some`.
pub fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running chaos-monkey; killed on drop if still running.
pub struct Monkey {
    child: Option<Child>,
    stderr: PathBuf,
    _dir: tempfile::TempDir,
}

/// How a chaos-monkey run ended.
#[derive(Debug)]
pub struct Done {
    pub status: ExitStatus,
    pub stderr: String,
}

impl Done {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Checks that it exited with `code` and said `needle` on standard
    /// error.
    pub fn assert_exit(&self, code: i32, needle: &str) {
        assert_eq!(self.code(), Some(code), "{}", self.stderr);
        assert!(self.stderr.contains(needle), "{}", self.stderr);
    }
}

pub fn monkey_bin() -> &'static str {
    env!("CARGO_BIN_EXE_chaos-monkey")
}

impl Monkey {
    /// Starts chaos-monkey with `args` (no CHAOS_MONKEY_* variables of the
    /// test's environment leak in) plus `env`.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Monkey {
        let dir = tempfile::tempdir().expect("tempdir");
        let stderr = dir.path().join("stderr");
        let mut cmd = Command::new(monkey_bin());
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"));
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("CHAOS_MONKEY_") {
                cmd.env_remove(k);
            }
        }
        cmd.env("RUST_LOG", "chaos_monkey=debug");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("start chaos-monkey");
        Monkey {
            child: Some(child),
            stderr,
            _dir: dir,
        }
    }

    pub fn start(args: &[&str]) -> Monkey {
        Monkey::start_with_env(args, &[])
    }

    /// What it printed on standard error so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    pub fn pid(&self) -> i32 {
        let child = self.child.as_ref().expect("running");
        i32::try_from(child.id()).expect("pid")
    }

    /// Sends a signal (SIGTERM, SIGINT...).
    pub fn signal(&self, sig: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.pid()).expect("pid");
        rustix::process::kill_process(pid, sig).expect("signal chaos-monkey");
    }

    /// Waits (bounded) for it to exit by itself.
    pub fn wait(mut self) -> Done {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return Done {
                    status,
                    stderr: self.stderr(),
                };
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "chaos-monkey did not exit within {WAIT:?}; stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Monkey {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs chaos-monkey to its end (bounded).
pub fn run(args: &[&str]) -> Done {
    Monkey::start(args).wait()
}

pub fn run_with_env(args: &[&str], env: &[(&str, &str)]) -> Done {
    Monkey::start_with_env(args, env).wait()
}

/// Runs chaos-monkey to its end on the state folder `state` with `args`
/// (words split at white space) and the fault log `log`, if given; checks
/// that it exited 0.
pub fn run_ok(state: &str, log: Option<&Path>, args: &str) -> Done {
    let mut all = vec!["--state-dir", state];
    all.extend(args.split_whitespace());
    if let Some(log) = log {
        all.extend_from_slice(&["--fault-log", log.to_str().expect("utf-8")]);
    }
    let done = run(&all);
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    done
}

/// The arguments of a monkey that injects one fault (ticking every
/// 100 ms) into the members under `state` and logs it to `log`; `extra`
/// (the fault and its settings) follow.
pub fn one_fault_args<'a>(state: &'a str, log: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec![
        "--state-dir",
        state,
        "--kill-interval",
        "100ms",
        "--max-faults",
        "1",
        "--fault-log",
        log.to_str().expect("utf-8"),
    ];
    all.extend_from_slice(extra);
    all
}

/// The records of a fault log.
pub fn records(path: &Path) -> Vec<FaultRecord> {
    faults::read(path).expect("read fault log")
}

/// `cluster/member` of each record of kind `fault`.
pub fn victims(records: &[FaultRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| format!("{:?} {}/{}", r.fault, r.cluster, r.member))
        .collect()
}

/// The state letter of a process (`R`, `S`, `T` for stopped...), if it lives.
pub fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// A state folder laid out like the operator's, whose members are `sleep`
/// processes (killed on drop). No etcd, no operator.
pub struct FakeState {
    pub dir: tempfile::TempDir,
    pub state: PathBuf,
    procs: Vec<ProcessId>,
}

impl FakeState {
    pub fn new() -> FakeState {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state");
        std::fs::create_dir_all(state.join("clusters")).expect("state dir");
        FakeState {
            dir,
            state,
            procs: Vec::new(),
        }
    }

    pub fn layout(&self) -> Layout {
        Layout::new(&self.state)
    }

    pub fn state_arg(&self) -> &str {
        self.state.to_str().expect("utf-8 path")
    }

    /// Starts `bin` with `args` as a tracked process.
    pub fn spawn(&mut self, bin: &Path, args: &[&str]) -> ProcessId {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let id = process::spawn(bin, &args, &self.dir.path().join("procs.log")).expect("spawn");
        self.procs.push(id);
        id
    }

    /// Starts `bin` with `args` as a tracked process logging to `log`.
    pub fn spawn_logged(&mut self, bin: &Path, args: &[&str], log: &Path) -> ProcessId {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let id = process::spawn(bin, &args, log).expect("spawn");
        self.procs.push(id);
        id
    }

    /// Adds a member with a running process (`running`) and a data folder.
    pub fn add_member(
        &mut self,
        cluster: &str,
        member: &str,
        running: bool,
        started: SystemTime,
    ) -> Option<ProcessId> {
        let id = running.then(|| self.spawn(Path::new("/bin/sleep"), &["300"]));
        let addr = MemberAddr {
            name: member.into(),
            // Nothing listens on port 1: roles come out unknown at once.
            peer_url: "http://127.0.0.1:1".into(),
            client_url: "http://127.0.0.1:1".into(),
        };
        let version = "3.4.23".parse().expect("version");
        let record = MemberRecord {
            config: bootstrap_config(addr, version, String::new(), "test"),
            ip: std::net::Ipv4Addr::LOCALHOST,
            process: id,
            started_at: Some(humantime::format_rfc3339_millis(started).to_string()),
        };
        let layout = self.layout();
        write_json(&layout.member_record(cluster, member), &record).expect("member record");
        let data = layout.data_dir(cluster, member).join("member").join("wal");
        std::fs::create_dir_all(&data).expect("data dir");
        std::fs::write(data.join("0.wal"), b"x").expect("wal");
        id
    }

    /// A cluster of `size` running members started long ago.
    pub fn add_cluster(&mut self, cluster: &str, size: usize) -> Vec<ProcessId> {
        let long_ago = SystemTime::now() - Duration::from_secs(3600);
        (0..size)
            .filter_map(|i| self.add_member(cluster, &format!("{cluster}-{i}"), true, long_ago))
            .collect()
    }

    /// The process of a member, from its record.
    pub fn process(&self, cluster: &str, member: &str) -> Option<ProcessId> {
        self.layout().read_member(cluster, member).ok()??.process
    }
}

impl Drop for FakeState {
    fn drop(&mut self) {
        for id in &self.procs {
            let _ = process::signal(id, rustix::process::Signal::KILL);
            let _ = process::signal(id, rustix::process::Signal::CONT);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.procs.iter().any(process::alive) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
