//! Child processes the runner starts (the operator, the chaos monkey):
//! each in a process group of its own (so a Ctrl-C
//! in the terminal reaches only the runner, which stops them in order), its
//! output appended to a log file, and stopped when dropped.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

/// Why a process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The log file could not be opened.
    #[error("cannot open {path}: {source}")]
    Log {
        /// The log file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The program could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// A running child process.
#[derive(Debug)]
pub struct Proc {
    name: String,
    child: Option<Child>,
    log: PathBuf,
}

impl Proc {
    /// Starts `cmd`, its stdout and stderr appended to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> Result<Proc, Error> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|source| Error::Log {
                path: log.into(),
                source,
            })?;
        let err = file.try_clone().map_err(|source| Error::Log {
            path: log.into(),
            source,
        })?;
        cmd.stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .process_group(0);
        let child = cmd.spawn().map_err(|source| Error::Spawn {
            program: cmd.get_program().to_string_lossy().into_owned(),
            source,
        })?;
        tracing::debug!(%name, pid = child.id(), "started");
        Ok(Proc {
            name: name.into(),
            child: Some(child),
            log: log.into(),
        })
    }

    /// Its log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Sends SIGTERM, waits up to `grace`, then SIGKILLs. Returns the exit
    /// status (`None` if it had to be killed or was already reaped).
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if let Some(pid) = i32::try_from(child.id()).ok().and_then(Pid::from_raw) {
            let _ = kill_process(pid, Signal::TERM);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        tracing::warn!(name = %self.name, "did not stop within {grace:?} of SIGTERM; killing it");
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    /// SIGKILLs it at once and reaps it (no grace: what it held in memory
    /// is gone). Returns whether it was still running.
    pub fn kill(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        let _ = child.kill();
        let _ = child.wait();
        true
    }

    /// [`Proc::stop`] without blocking the async runtime.
    pub async fn stop_async(&mut self, grace: Duration) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if let Some(pid) = i32::try_from(child.id()).ok().and_then(Pid::from_raw) {
            let _ = kill_process(pid, Signal::TERM);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = child.try_wait() {
                return Some(s);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tracing::warn!(name = %self.name, "did not stop within {grace:?} of SIGTERM; killing it");
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The last `lines` lines of a text file.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_and_drop_end_the_process() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("log");
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", "echo started; exec sleep 30"]);
        let mut p = Proc::spawn("sleeper", cmd, &log).expect("spawn");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !p.log_tail(5).contains("started") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(p.exited().is_none());
        let status = p.stop(Duration::from_secs(10)).expect("stopped by SIGTERM");
        assert!(!status.success());

        let mut cmd = Command::new("/bin/sleep");
        cmd.arg("30");
        let p = Proc::spawn("sleeper", cmd, &log).expect("spawn");
        let pid = p.child.as_ref().map(|c| c.id()).expect("pid");
        drop(p);
        let gone = !Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z"));
        assert!(gone, "process {pid} still runs after drop");
    }
}
