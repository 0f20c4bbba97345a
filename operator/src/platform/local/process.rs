//! etcd member processes: started detached (their own process group, so
//! they outlive the operator like pods outlive a controller), found again by
//! pid *and* start time (so a reused pid is never mistaken for a member),
//! and watched through a pidfd so a death is noticed the moment it happens.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, Signal, WaitOptions, pidfd_open, waitpid};
use serde::{Deserialize, Serialize};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// A process, identified by its pid and its start time since boot (clock
/// ticks), which together never repeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProcessId {
    /// Process id.
    pub pid: i32,
    /// Start time in clock ticks since boot (`/proc/PID/stat` field 22).
    pub start_time: u64,
}

impl ProcessId {
    /// The live process `pid` (`None` if there is none, or it is a zombie).
    pub fn of(pid: i32) -> Option<ProcessId> {
        let start_time = start_time(pid).ok().flatten()?;
        Some(ProcessId { pid, start_time })
    }
}

/// Starts `bin` with `args`, detached: stdin closed, stdout and stderr
/// appended to `log`, in a process group of its own, with only the
/// variables of the operator's environment [`crate::child_env`] keeps.
pub fn spawn(bin: &Path, args: &[String], log: &Path) -> io::Result<ProcessId> {
    let log = OpenOptions::new().create(true).append(true).open(log)?;
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0);
    cmd.env_clear().envs(crate::child_env::vars());
    // The child is reaped by `wait_exit` (waitpid on its pid) once its pidfd
    // reports the exit; std's handle is not needed for that.
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn()?;
    let pid = i32::try_from(child.id()).map_err(|_| io::Error::other("pid out of range"))?;
    let start_time = start_time(pid)?
        .ok_or_else(|| io::Error::other(format!("process {pid} exited at once")))?;
    Ok(ProcessId { pid, start_time })
}

/// Start time of `pid`, or `None` when there is no such live process
/// (zombies count as dead).
fn start_time(pid: i32) -> io::Result<Option<u64>> {
    let stat = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is field 3, starttime field 22.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.first() == Some(&"Z") || fields.first() == Some(&"X") {
        return Ok(None);
    }
    Ok(fields.get(19).and_then(|f| f.parse().ok()))
}

/// Whether the process still runs.
pub fn alive(id: &ProcessId) -> bool {
    matches!(start_time(id.pid), Ok(Some(t)) if t == id.start_time)
}

/// Sends `signal` if the process still runs. Returns whether it was sent.
/// The signal goes through a pidfd opened before the start time is checked,
/// so it can never reach another process that reused the pid.
pub fn signal(id: &ProcessId, signal: Signal) -> io::Result<bool> {
    let Some(pid) = Pid::from_raw(id.pid) else {
        return Ok(false);
    };
    let fd = match pidfd_open(pid, PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(Errno::SRCH) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    if !alive(id) {
        return Ok(false);
    }
    match rustix::process::pidfd_send_signal(&fd, signal) {
        Ok(()) => Ok(true),
        Err(Errno::SRCH) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// How a process ended, when we could learn it (only for our children).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
    /// Not our child (adopted), or already collected.
    Unknown,
}

impl Exit {
    /// Whether the process ended by itself with a failure (as opposed to
    /// being killed from outside, or exiting cleanly).
    pub fn crashed(self) -> bool {
        const SIGILL: i32 = 4;
        const SIGABRT: i32 = 6;
        const SIGBUS: i32 = 7;
        const SIGSEGV: i32 = 11;
        match self {
            Exit::Code(c) => c != 0,
            Exit::Signal(s) => matches!(s, SIGILL | SIGABRT | SIGBUS | SIGSEGV),
            Exit::Unknown => false,
        }
    }
}

/// Collects the exit status if the process is our child; harmless if not.
fn reap(pid: i32) -> Exit {
    let Some(pid) = Pid::from_raw(pid) else {
        return Exit::Unknown;
    };
    match waitpid(Some(pid), WaitOptions::NOHANG) {
        Ok(Some((_, status))) => match (status.exit_status(), status.terminating_signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(sig)) => Exit::Signal(sig),
            _ => Exit::Unknown,
        },
        _ => Exit::Unknown,
    }
}

/// Returns once the process has exited (at once if it already has), with
/// how it ended when that can be known.
pub async fn wait_exit(id: ProcessId) -> io::Result<Exit> {
    let Some(pid) = Pid::from_raw(id.pid) else {
        return Ok(Exit::Unknown);
    };
    let fd = match pidfd_open(pid, PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(Errno::SRCH) => return Ok(Exit::Unknown),
        Err(e) => return Err(e.into()),
    };
    // The pidfd is open, so the pid cannot be reused from here on; if it
    // already belongs to another process, ours has exited.
    if !alive(&id) {
        return Ok(reap(id.pid));
    }
    // SAFETY: the pidfd is an `OwnedFd` moved into the `AsyncFd`, which
    // owns it until it is dropped; nothing else closes or replaces it.
    #[allow(unsafe_code)]
    let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }?;
    let _ready = fd.readable().await?;
    Ok(reap(id.pid))
}

/// Sends SIGTERM, waits up to `grace` for the exit, then SIGKILLs and waits.
pub async fn stop(id: ProcessId, grace: Duration) -> io::Result<()> {
    if signal(&id, Signal::TERM)? && tokio::time::timeout(grace, wait_exit(id)).await.is_ok() {
        return Ok(());
    }
    kill(id).await
}

/// SIGKILLs the process and waits for it to be gone.
pub async fn kill(id: ProcessId) -> io::Result<()> {
    signal(&id, Signal::KILL)?;
    // SIGKILL cannot be caught; the bound only guards against a process
    // stuck in the kernel (uninterruptible I/O).
    match tokio::time::timeout(Duration::from_secs(30), wait_exit(id)).await {
        Ok(r) => r.map(|_| ()),
        Err(_) => Err(io::Error::other(format!(
            "process {} did not exit within 30s of SIGKILL",
            id.pid
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleeper(dir: &Path) -> ProcessId {
        spawn(
            Path::new("/bin/sleep"),
            &["30".to_string()],
            &dir.join("log"),
        )
        .expect("spawn sleep")
    }

    #[tokio::test]
    async fn spawn_watch_and_kill() {
        let dir = tempfile::tempdir().expect("tempdir");
        let id = sleeper(dir.path());
        assert!(alive(&id));
        let waiter = tokio::spawn(wait_exit(id));
        kill(id).await.expect("kill");
        let exit = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("exit noticed")
            .expect("join")
            .expect("wait");
        // Either the waiter or kill() collected the status first.
        assert!(matches!(exit, Exit::Signal(9) | Exit::Unknown), "{exit:?}");
        assert!(!exit.crashed());
        assert!(!alive(&id));
        assert!(!signal(&id, Signal::TERM).expect("signal"));
    }

    #[tokio::test]
    async fn a_reused_pid_is_not_ours() {
        let dir = tempfile::tempdir().expect("tempdir");
        let id = sleeper(dir.path());
        let other = ProcessId {
            start_time: id.start_time + 1,
            ..id
        };
        assert!(!alive(&other));
        assert!(!signal(&other, Signal::KILL).expect("signal"));
        assert!(alive(&id), "the real process was not touched");
        stop(id, Duration::from_secs(5)).await.expect("stop");
        assert!(!alive(&id));
    }
}
