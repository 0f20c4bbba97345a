//! Helpers of the soak integration tests: run the `soak` binary with the
//! workspace's operator and chaos monkey, in a temporary folder; on drop
//! (also when a test fails) stop it and every process it left: soak gets
//! SIGTERM (it tears down what it started) and a bounded wait, then the
//! operator, the chaos monkey and the etcd members are SIGKILLed. The
//! operator and the monkey run in process groups of their own, so they
//! outlive a killed soak, and the operator would restart killed members.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use etcd_operator::platform::local::process::{self, ProcessId};
use rustix::process::{Pid, Signal, kill_process};

/// Longest any soak process in a test may take.
pub const LIMIT: Duration = Duration::from_secs(300);
/// Longest soak may take to tear down after SIGTERM (the monkey, the load,
/// the operator and the members, each bounded, then the report).
const TERM_GRACE: Duration = Duration::from_secs(90);
/// Longest a SIGKILLed process may take to be gone.
const KILL_WAIT: Duration = Duration::from_secs(10);

/// A test's folder and its soak process.
pub struct Soak {
    pub dir: tempfile::TempDir,
    child: Option<Child>,
}

pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// `soak` with the workspace's binaries.
pub fn soak_cmd() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_soak"));
    cmd.env(
        "SOAK_OPERATOR_BIN",
        etcd_operator::testing::workspace_binary("etcd-operator"),
    )
    .env(
        "SOAK_CHAOS_BIN",
        etcd_operator::testing::workspace_binary("chaos-monkey"),
    )
    .env("SOAK_ETCD_BINARIES", etcd_operator::testing::binaries())
    .env("SOAK_NO_PROGRESS", "true")
    .env_remove("SOAK_DURATION")
    .env_remove("SOAK_SEED")
    .env_remove("SOAK_OUT")
    .env_remove("SOAK_PLATFORM");
    cmd
}

impl Soak {
    /// Starts `soak run SCENARIO` writing to `dir/out`, with its work folder
    /// in `dir/work`.
    pub fn start(scenario: &Path, extra: &[&str]) -> Soak {
        let dir = tempfile::Builder::new()
            .prefix("soak-test-")
            .tempdir()
            .expect("tempdir");
        let log = std::fs::File::create(dir.path().join("soak.log")).expect("log");
        let child = soak_cmd()
            .arg("run")
            .arg(scenario)
            .arg("--out")
            .arg(dir.path().join("out"))
            .arg("--work-dir")
            .arg(dir.path().join("work"))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start soak");
        Soak {
            dir,
            child: Some(child),
        }
    }

    pub fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    pub fn state(&self) -> PathBuf {
        self.dir.path().join("work/state")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("soak.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().map(|c| c.id() as i32).expect("running")
    }

    /// Waits (bounded by [`LIMIT`]) for the exit. On timeout it panics,
    /// and the drop stops everything.
    pub fn wait(&mut self) -> ExitStatus {
        let child = self.child.as_mut().expect("running");
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(s) = child.try_wait().expect("wait") {
                self.child = None;
                return s;
            }
            if Instant::now() > deadline {
                panic!("soak did not finish within {LIMIT:?}\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits (bounded) until the log contains `text`.
    pub fn wait_log(&self, text: &str) {
        let deadline = Instant::now() + LIMIT;
        while !self.log().contains(text) {
            assert!(
                Instant::now() < deadline,
                "no {text:?} in the log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn summary(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(self.out().join("summary.json"))
            .unwrap_or_else(|e| panic!("no summary.json ({e}):\n{}", self.log()));
        serde_json::from_str(&text).expect("summary.json is JSON")
    }
}

impl Drop for Soak {
    fn drop(&mut self) {
        if let Some(c) = self.child.take() {
            stop_soak(c);
        }
        leave_nothing(&self.state());
    }
}

/// SIGTERM, up to [`TERM_GRACE`] to exit, then SIGKILL; reaped either way.
fn stop_soak(mut c: Child) {
    if let Ok(None) = c.try_wait() {
        if let Some(pid) = i32::try_from(c.id()).ok().and_then(Pid::from_raw) {
            let _ = kill_process(pid, Signal::TERM);
        }
        let deadline = Instant::now() + TERM_GRACE;
        while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let _ = c.kill();
    let _ = c.wait();
}

/// Kills whatever a run with the operator state folder `state` left: the
/// operator first (its pid and start time are in `STATE/operator.lock`; it
/// would restart members), then every other process with the state folder
/// in its arguments (a chaos monkey's or operator's `--state-dir`, a
/// member's `--data-dir`), then the members recorded in the state folder.
/// Blocking and bounded, so it also works in `Drop`.
pub fn leave_nothing(state: &Path) {
    if let Some(op) = etcd_operator::platform::local::running_operator(state) {
        let _ = process::signal(&op, Signal::KILL);
        wait_gone(&[op]);
    }
    let others = using(state);
    for id in &others {
        let _ = process::signal(id, Signal::KILL);
    }
    wait_gone(&others);
    etcd_operator::platform::local::kill_all(state);
}

/// Every process (not this one) with `state` or a path inside it among its
/// arguments.
pub fn using(state: &Path) -> Vec<ProcessId> {
    let want = state.display().to_string();
    let inside = format!("{want}/");
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| u32::try_from(pid).ok() != Some(me))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmd| {
                cmd.split(|b| *b == 0)
                    .map(String::from_utf8_lossy)
                    .any(|a| a == want.as_str() || a.contains(&inside))
            })
        })
        .filter_map(ProcessId::of)
        .collect()
}

/// Whether the process is gone (or a zombie: dead, waiting to be reaped).
pub fn gone(id: &ProcessId) -> bool {
    !process::alive(id)
        || std::fs::read_to_string(format!("/proc/{}/stat", id.pid)).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
}

fn wait_gone(ids: &[ProcessId]) {
    let deadline = Instant::now() + KILL_WAIT;
    while !ids.iter().all(gone) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}
