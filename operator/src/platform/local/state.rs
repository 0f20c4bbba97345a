//! The state folder as a whole: the operator's lock, and the member
//! processes recorded under it (for tools and tests that must find or stop
//! them all).

use std::fs::File;
use std::time::Duration;

use super::layout::Layout;
use super::process::{self, ProcessId};
use crate::platform::{Error, Result, io_err};

/// Takes the state folder's lock (one operator per folder) and writes this
/// process's pid and start time into it.
pub(super) fn lock(layout: &Layout) -> Result<File> {
    use rustix::fs::{FlockOperation, flock};
    let path = layout.lock_path();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(io_err(format!("cannot open {}", path.display())))?;
    if flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
        let holder = std::fs::read_to_string(&path).unwrap_or_default();
        return Err(Error::Io {
            what: format!(
                "another etcd-operator ({}) manages {}; stop it or use another --state-dir",
                holder.trim(),
                layout.root().display()
            ),
            source: std::io::Error::from(std::io::ErrorKind::WouldBlock),
        });
    }
    let _ = file.set_len(0);
    let me = i32::try_from(std::process::id())
        .ok()
        .and_then(ProcessId::of);
    let line = match me {
        Some(p) => format!("pid {} start {}\n", p.pid, p.start_time),
        None => format!("pid {}\n", std::process::id()),
    };
    let _ = std::fs::write(&path, line);
    Ok(file)
}

/// The operator process that holds the lock of `state_dir`, if one runs
/// (the lock file names its pid and start time, so a stale lock naming a
/// reused pid is no match).
pub fn running_operator(state_dir: &std::path::Path) -> Option<ProcessId> {
    let text = std::fs::read_to_string(Layout::new(state_dir).lock_path()).ok()?;
    let mut words = text.split_whitespace();
    let pid = match (words.next(), words.next()) {
        (Some("pid"), Some(p)) => p.parse().ok()?,
        _ => return None,
    };
    let start_time = match (words.next(), words.next()) {
        (Some("start"), Some(t)) => t.parse().ok()?,
        _ => return None,
    };
    let id = ProcessId { pid, start_time };
    process::alive(&id).then_some(id)
}

/// Every member process recorded under `state_dir` that still runs.
pub fn running_members(state_dir: &std::path::Path) -> Vec<(String, String, ProcessId)> {
    let layout = Layout::new(state_dir);
    let mut out = Vec::new();
    for cluster in layout.cluster_names().unwrap_or_default() {
        for member in layout.member_names(&cluster).unwrap_or_default() {
            if let Ok(Some(r)) = layout.read_member(&cluster, &member)
                && let Some(id) = r.process.filter(process::alive)
            {
                out.push((cluster.clone(), member, id));
            }
        }
    }
    out
}

/// SIGKILLs every member process recorded under `state_dir` and waits (up
/// to 30 s) until they are gone; for tests and tools that must leave nothing
/// running. Blocking, so it also works in `Drop`. Returns how many it killed.
pub fn kill_all(state_dir: &std::path::Path) -> usize {
    let ids: Vec<ProcessId> = running_members(state_dir)
        .into_iter()
        .map(|(_, _, id)| id)
        .collect();
    for id in &ids {
        let _ = process::signal(id, rustix::process::Signal::KILL);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while ids.iter().any(process::alive) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    ids.len()
}
