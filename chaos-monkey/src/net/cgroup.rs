//! Members moved into cgroups of their own while a network fault lasts.
//!
//! Members dial each other from 127.0.0.1 (etcd does not bind its peer
//! dials to its own address), so a packet's addresses do not say which
//! member sent it; the cgroup of its socket does. Each member is moved into
//! a child of its own cgroup v2 cgroup (so whatever manages the parent
//! still sees it) and moved back when the fault ends.

use std::io;
use std::path::{Path, PathBuf};

use etcd_operator::platform::local::process::{self, ProcessId};
use serde::{Deserialize, Serialize};

/// A process moved into a cgroup.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moved {
    /// The process.
    pub process: ProcessId,
    /// Its cgroup before (relative to the cgroup2 root, starting with `/`).
    pub from: String,
    /// The cgroup it was moved into.
    pub to: String,
}

/// The cgroup v2 path of `pid` (the `0::/PATH` line of `/proc/PID/cgroup`).
pub fn current(pid: i32) -> io::Result<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::").map(str::to_string))
        .ok_or_else(|| io::Error::other(format!("process {pid} has no cgroup v2 entry")))
}

fn dir(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// Moves `process` into a new child cgroup `name` of its own.
pub fn move_into(root: &Path, process: &ProcessId, name: &str) -> io::Result<Moved> {
    let from = current(process.pid)?;
    let to = format!("{}/{name}", from.trim_end_matches('/'));
    let target = dir(root, &to);
    match std::fs::create_dir(&target) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    if !process::alive(process) {
        let _ = std::fs::remove_dir(&target);
        return Err(io::Error::other(format!("process {} is gone", process.pid)));
    }
    if let Err(e) = std::fs::write(target.join("cgroup.procs"), process.pid.to_string()) {
        let _ = std::fs::remove_dir(&target);
        return Err(e);
    }
    Ok(Moved {
        process: *process,
        from,
        to,
    })
}

/// Moves the process back (when it still runs) and removes the cgroup.
pub fn restore(root: &Path, m: &Moved) -> io::Result<()> {
    if process::alive(&m.process)
        && current(m.process.pid).is_ok_and(|now| now == m.to)
        && let Err(e) = std::fs::write(
            dir(root, &m.from).join("cgroup.procs"),
            m.process.pid.to_string(),
        )
        && process::alive(&m.process)
    {
        return Err(e);
    }
    match std::fs::remove_dir(dir(root, &m.to)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether the cgroup `path` exists.
pub fn exists(root: &Path, path: &str) -> bool {
    dir(root, path).is_dir()
}
