//! Helpers of the soak integration tests: run the `soak` binary with the
//! workspace's operator and chaos monkey, in a temporary folder; kill it
//! and every etcd member it left on drop (also when a test fails).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Longest any soak process in a test may take.
pub const LIMIT: Duration = Duration::from_secs(300);

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

    /// Waits (bounded by [`LIMIT`]) for the exit.
    pub fn wait(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(s) = child.try_wait().expect("wait") {
                return s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
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
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        etcd_operator::platform::local::kill_all(&self.state());
    }
}
