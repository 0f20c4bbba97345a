//! `--fault slow-disk`: a member's disk writes throttled, so its fsyncs
//! (WAL and backend commits) get slow. The member's process is moved into a
//! new cgroup v1 blkio cgroup, a child of its own, named
//! `etcd-chaos-MONKEYPID-CLUSTER-MEMBER`, whose
//! `blkio.throttle.write_iops_device` caps the write operations per second
//! to the disk that holds its data folder; healing moves it back and
//! removes the cgroup. `chaos-monkey --cleanup` does the same for the
//! cgroups of monkeys that are gone (the pid in the name).
//!
//! cgroup v1 blkio throttles the writes a process issues itself (direct
//! writes and the ones fsync flushes), which is all of etcd's durable
//! writes. Not on cgroup v2-only machines (io.max is not supported yet).

use std::io;
use std::path::{Path, PathBuf};

use etcd_operator::platform::local::process::{self, ProcessId};

/// Where cgroup v1's blkio controller is mounted.
pub const BLKIO_ROOT: &str = "/sys/fs/cgroup/blkio";
/// Every cgroup the fault makes starts with this.
pub const PREFIX: &str = "etcd-chaos-";

/// Why a disk could not be slowed or restored.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// This machine cannot do it (exit code 2 at start).
    #[error("{0}")]
    Missing(String),
    /// The data folder is not on a block device.
    #[error(
        "{0} is not on a block device (tmpfs or another virtual file system?): there is no \
         disk to throttle; run the operator with a --state-dir on a disk"
    )]
    NotBlock(String),
    /// The process is gone.
    #[error("process {0} is gone")]
    Gone(i32),
    /// A file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// A throttled member: everything needed to undo it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slowed {
    /// The member's process.
    pub process: ProcessId,
    /// Its blkio cgroup before (relative to [`BLKIO_ROOT`], from `/`).
    pub from: String,
    /// The cgroup made for it.
    pub to: String,
    /// The throttled device, `MAJOR:MINOR`.
    pub device: String,
}

/// Checks the blkio controller is there and writable.
pub fn preflight() -> Result<(), Error> {
    let knob = Path::new(BLKIO_ROOT).join("blkio.throttle.write_iops_device");
    if !knob.exists() {
        return Err(Error::Missing(format!(
            "--fault slow-disk needs the cgroup v1 blkio controller with throttling mounted at \
             {BLKIO_ROOT} (no {}); cgroup v2-only machines are not supported",
            knob.display()
        )));
    }
    let probe = Path::new(BLKIO_ROOT).join(format!("{PREFIX}probe-{}", std::process::id()));
    match std::fs::create_dir(&probe) {
        Ok(()) => {
            let _ = std::fs::remove_dir(&probe);
            Ok(())
        }
        Err(e) => Err(Error::Missing(format!(
            "--fault slow-disk makes blkio cgroups under {BLKIO_ROOT}, which failed ({e}): run \
             the monkey as root"
        ))),
    }
}

/// The whole disk (`MAJOR:MINOR`) holding `path`: throttling takes disks,
/// not partitions.
pub fn device_of(path: &Path) -> Result<String, Error> {
    let st = rustix::fs::stat(path).map_err(|e| Error::Io {
        what: format!("cannot stat {}", path.display()),
        source: e.into(),
    })?;
    let (major, minor) = (rustix::fs::major(st.st_dev), rustix::fs::minor(st.st_dev));
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if !sys.exists() {
        return Err(Error::NotBlock(path.display().to_string()));
    }
    if sys.join("partition").exists() {
        let disk = sys
            .canonicalize()
            .ok()
            .and_then(|p| std::fs::read_to_string(p.parent()?.join("dev")).ok())
            .ok_or_else(|| Error::NotBlock(path.display().to_string()))?;
        return Ok(disk.trim().to_string());
    }
    Ok(format!("{major}:{minor}"))
}

/// The blkio cgroup of `pid` (`N:blkio:/PATH` in `/proc/PID/cgroup`).
fn current(pid: i32) -> io::Result<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))?;
    text.lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
            ctrl.split(',')
                .any(|c| c == "blkio")
                .then(|| path.to_string())
        })
        .ok_or_else(|| io::Error::other(format!("process {pid} is in no blkio cgroup")))
}

fn dir(path: &str) -> PathBuf {
    Path::new(BLKIO_ROOT).join(path.trim_start_matches('/'))
}

/// The name of the cgroup for `member` of `cluster` (names are checked by
/// the operator: lower-case letters, digits and `-`).
pub fn cgroup_name(cluster: &str, member: &str) -> String {
    format!("{PREFIX}{}-{cluster}-{member}", std::process::id())
}

/// Moves `p` into a new cgroup capped at `iops` writes per second (and, when
/// given, `bps` bytes per second) on the disk holding `data_dir`.
pub fn slow(p: &ProcessId, name: &str, data_dir: &Path, iops: u32) -> Result<Slowed, Error> {
    let device = device_of(data_dir)?;
    let from = current(p.pid).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::Gone(p.pid),
        _ => io_err(format!("cannot read the blkio cgroup of process {}", p.pid))(e),
    })?;
    let to = format!("{}/{name}", from.trim_end_matches('/'));
    let target = dir(&to);
    std::fs::create_dir(&target).map_err(io_err(format!("cannot create {}", target.display())))?;
    let undo = |e: Error| {
        let _ = std::fs::remove_dir(&target);
        e
    };
    let knob = target.join("blkio.throttle.write_iops_device");
    std::fs::write(&knob, format!("{device} {iops}"))
        .map_err(io_err(format!("cannot write {}", knob.display())))
        .map_err(undo)?;
    if !process::alive(p) {
        return Err(undo(Error::Gone(p.pid)));
    }
    std::fs::write(target.join("cgroup.procs"), p.pid.to_string())
        .map_err(io_err(format!("cannot move process {} into {to}", p.pid)))
        .map_err(undo)?;
    Ok(Slowed {
        process: *p,
        from,
        to,
        device,
    })
}

/// Moves the process back (when it still runs there) and removes the cgroup.
pub fn restore(s: &Slowed) -> Result<(), Error> {
    empty_and_remove(&s.to, &s.from)
}

/// Moves every process of cgroup `path` into `parent`, then removes it.
fn empty_and_remove(path: &str, parent: &str) -> Result<(), Error> {
    let d = dir(path);
    let procs = match std::fs::read_to_string(d.join("cgroup.procs")) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(io_err(format!("cannot read {}/cgroup.procs", d.display()))(
                e,
            ));
        }
    };
    let back = dir(parent).join("cgroup.procs");
    for pid in procs.lines().filter(|l| !l.trim().is_empty()) {
        if let Err(e) = std::fs::write(&back, pid.trim())
            && e.raw_os_error() != Some(rustix::io::Errno::SRCH.raw_os_error())
        {
            return Err(io_err(format!(
                "cannot move process {pid} back to {parent}"
            ))(e));
        }
    }
    match std::fs::remove_dir(&d) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(format!("cannot remove {}", d.display()))(e)),
    }
}

/// The pid in a cgroup name `etcd-chaos-PID-...`.
pub fn owner_pid(name: &str) -> Option<i32> {
    let (pid, _) = name.strip_prefix(PREFIX)?.split_once('-')?;
    pid.parse().ok()
}

/// The slow-disk cgroups (paths from [`BLKIO_ROOT`]) anywhere in the blkio
/// hierarchy.
pub fn cgroups() -> Vec<String> {
    fn walk(at: &Path, rel: &str, depth: usize, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(at) else {
            return;
        };
        for e in rd.flatten() {
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let path = format!("{rel}/{name}");
            if name.starts_with(PREFIX) {
                out.push(path);
            } else if depth < 8 {
                walk(&e.path(), &path, depth + 1, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(Path::new(BLKIO_ROOT), "", 0, &mut out);
    out.sort();
    out
}

/// The slow-disk cgroups of monkeys that are gone.
pub fn leftovers() -> Vec<String> {
    cgroups()
        .into_iter()
        .filter(|p| {
            let name = p.rsplit('/').next().unwrap_or_default();
            owner_pid(name).is_some_and(|pid| ProcessId::of(pid).is_none())
        })
        .collect()
}

/// Removes the slow-disk cgroups of monkeys that are gone (their processes
/// moved back to the parent cgroup); a line per cgroup.
pub fn cleanup() -> Result<Vec<String>, Error> {
    let mut done = Vec::new();
    for path in leftovers() {
        let parent = path.rsplit_once('/').map(|(p, _)| p).unwrap_or("/");
        let parent = if parent.is_empty() { "/" } else { parent };
        empty_and_remove(&path, parent)?;
        done.push(format!(
            "removed blkio cgroup {path} (its processes moved back)"
        ));
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pids_come_from_the_name() {
        assert_eq!(owner_pid("etcd-chaos-42-demo-demo-1"), Some(42));
        assert_eq!(owner_pid("etcd-chaos-probe-42"), None);
        assert_eq!(owner_pid("other-42-x"), None);
        assert!(cgroup_name("demo", "demo-1").starts_with(PREFIX));
        assert_eq!(
            owner_pid(&cgroup_name("demo", "demo-1")),
            Some(i32::try_from(std::process::id()).expect("pid"))
        );
    }

    #[test]
    fn tmpfs_is_not_a_disk() {
        if Path::new("/dev/shm").is_dir() {
            assert!(matches!(
                device_of(Path::new("/dev/shm")),
                Err(Error::NotBlock(_))
            ));
        }
    }
}
