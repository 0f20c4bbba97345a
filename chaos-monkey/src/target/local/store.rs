//! `--target store` on the local platform: which process is the object
//! store the monkey was told of (`--store-addr`), and the record of a
//! store it paused, which `--cleanup` resumes once the monkey that paused
//! it is gone (a SIGKILL cannot be caught, so the monkey cannot resume it
//! itself).
//!
//! The store is the one process listening on exactly `--store-addr`.
//! Refused, so that nothing is paused (and, at start, the monkey exits
//! with code 2):
//!
//! * a process listening on every address (`0.0.0.0:PORT`, `[::]:PORT`)
//!   and not on the address itself: whatever server holds that port
//!   answers there, store or not; unless `--store-wildcard` says that it
//!   is the store;
//! * a listening socket several processes hold (a server that forked its
//!   workers): which is the store cannot be told, and pausing one would
//!   not stop it;
//! * the operator, or an etcd member of the state folder (an etcd port
//!   given by mistake).

use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};

use etcd_operator::platform::local::layout::{Layout, read_json, write_json};
use etcd_operator::platform::local::process::{self, ProcessId};
use etcd_operator::platform::local::running_operator;
use rustix::process::Signal;
use serde::{Deserialize, Serialize};

use super::paused::stopped;
use crate::net::sockets;
use crate::target::Error;

pub use crate::config::StoreAt;

/// The process name of `pid` (`/proc/PID/comm`), `?` when unknown.
fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim_end().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// The store's process, if one listens; `Err` (why, for the user) when
/// the process there cannot be taken for the store.
pub fn identify(layout: &Layout, at: StoreAt) -> Result<Option<ProcessId>, Error> {
    let addr = at.addr;
    let refuse = |why: String| Err(Error::Refused(format!("--store-addr {addr}: {why}")));
    let found = sockets::listening_now(addr).map_err(|source| Error::Io {
        what: "cannot read the kernel's TCP tables (/proc/net/tcp)".into(),
        source,
    })?;
    let (inodes, every) = if !found.exact.is_empty() {
        (found.exact, None)
    } else if found.wildcard.is_empty() {
        return Ok(None);
    } else {
        let on: Vec<&str> = found.wildcard.iter().map(|(w, _)| w.as_str()).collect();
        let on = on.join(" and ");
        (
            found.wildcard.into_iter().map(|(_, i)| i).collect(),
            Some(on),
        )
    };
    let pid = match (sockets::holders(&inodes).as_slice(), &every) {
        ([], _) => {
            return refuse(
                "a socket listens there, but no process this monkey can see holds it (another \
                 user's or another container's): run the monkey as root, beside the store"
                    .into(),
            );
        }
        ([pid], Some(on)) if !at.wildcard => {
            return refuse(format!(
                "the process answering there, pid {pid} ({}), listens on every address ({on}), \
                 not on {addr} itself, so nothing says it is the object store (any server on \
                 port {port} answers at {addr}): bind the store to {addr} (`moto_server -H {ip} \
                 -p {port}`, `minio server --address {addr}`), or pass --store-wildcard if pid \
                 {pid} is the store",
                comm(*pid),
                port = addr.port(),
                ip = addr.ip(),
            ));
        }
        ([pid], _) => *pid,
        (many, _) => {
            let pids: Vec<String> = many.iter().map(|p| format!("{p} ({})", comm(*p))).collect();
            return refuse(format!(
                "{} processes hold its listening socket (pids {}): which one is the object \
                 store cannot be told, and pausing one would not stop it; run the store as a \
                 single process",
                many.len(),
                pids.join(", ")
            ));
        }
    };
    let Some(id) = ProcessId::of(pid) else {
        return Ok(None);
    };
    if running_operator(layout.root()) == Some(id) {
        return refuse(format!(
            "pid {pid} listening there is etcd-operator (of --state-dir {}), not an object \
             store; --target operator hits the operator",
            layout.root().display()
        ));
    }
    for cluster in layout.cluster_names().unwrap_or_default() {
        for member in layout.member_names(&cluster).unwrap_or_default() {
            if let Ok(Some(r)) = layout.read_member(&cluster, &member)
                && r.process == Some(id)
            {
                return refuse(format!(
                    "pid {pid} listening there is etcd member {cluster}/{member}, not an object \
                     store; give the address of the clusters' objectStore.endpoint"
                ));
            }
        }
    }
    Ok(Some(id))
}

/// A store a monkey paused, written before the SIGSTOP and removed after
/// the SIGCONT.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The monkey that paused it.
    pub monkey: ProcessId,
    /// The store's process.
    pub store: ProcessId,
    /// Where it listens (`--store-addr`).
    pub addr: SocketAddrV4,
}

/// Where the records of paused stores are, in the state folder.
pub fn records_dir(state: &Path) -> PathBuf {
    state.join("chaos-monkey")
}

impl Record {
    /// The record of this monkey pausing `store` at `addr`.
    pub fn mine(store: ProcessId, addr: SocketAddrV4) -> Result<Record, Error> {
        let me = i32::try_from(std::process::id())
            .ok()
            .and_then(ProcessId::of)
            .ok_or_else(|| Error::Unsupported("cannot read this monkey's own start time".into()))?;
        Ok(Record {
            monkey: me,
            store,
            addr,
        })
    }

    fn path(&self, state: &Path) -> PathBuf {
        records_dir(state).join(format!(
            "paused-store-{}-{}-{}.json",
            self.monkey.pid, self.store.pid, self.store.start_time
        ))
    }

    /// Writes the record (before the pause: a monkey killed right after
    /// the SIGSTOP still leaves it).
    pub fn write(&self, state: &Path) -> Result<(), Error> {
        let path = self.path(state);
        write_json(&path, self).map_err(|source| Error::Io {
            what: format!(
                "cannot record the paused object store in {} (so that `--cleanup` could resume \
                 it); it is not paused",
                path.display()
            ),
            source,
        })
    }

    /// Removes the record (after the resume, or a pause that failed).
    pub fn remove(&self, state: &Path) {
        let path = self.path(state);
        if let Err(e) = std::fs::remove_file(&path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("cannot remove {}: {e}", path.display());
        }
    }
}

/// The records under `state`, each with its file.
fn records(state: &Path) -> Vec<(PathBuf, Result<Record, String>)> {
    let Ok(dir) = std::fs::read_dir(records_dir(state)) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, Result<Record, String>)> = dir
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("paused-store-") && n.ends_with(".json"))
        })
        .map(|p| {
            let r = match read_json::<Record>(&p) {
                Ok(Some(r)) => Ok(r),
                Ok(None) => Err("gone".to_string()),
                Err(e) => Err(e.to_string()),
            };
            (p, r)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// `--cleanup`: resumes the stores that monkeys which are gone left
/// paused (not one a running monkey paused too: it resumes it itself),
/// removes their records; a line for each store resumed or left paused.
pub fn cleanup(state: &Path) -> Vec<String> {
    let all = records(state);
    let live: Vec<&Record> = all
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok())
        .filter(|r| process::alive(&r.monkey))
        .collect();
    let mut lines = Vec::new();
    for (path, record) in &all {
        let r = match record {
            Ok(r) if process::alive(&r.monkey) => continue,
            Ok(r) => r,
            Err(e) => {
                lines.push(format!(
                    "cannot read {}: {e}; left as it is",
                    path.display()
                ));
                continue;
            }
        };
        let store = format!("the object store store@{} (pid {})", r.addr, r.store.pid);
        let mut keep = false;
        if stopped(&r.store) {
            if let Some(other) = live.iter().find(|l| l.store == r.store) {
                lines.push(format!(
                    "{store} is paused, not resumed: chaos-monkey {} paused it too and resumes it",
                    other.monkey.pid
                ));
            } else {
                match process::signal(&r.store, Signal::CONT) {
                    Ok(true) => lines.push(format!(
                        "resumed {store}, left paused by chaos-monkey {}",
                        r.monkey.pid
                    )),
                    Ok(false) => {}
                    Err(e) => {
                        keep = true;
                        lines.push(format!(
                            "{store} is paused and could not be resumed: {e}; `kill -CONT {}`",
                            r.store.pid
                        ));
                    }
                }
            }
        }
        // A store that exited or runs again leaves nothing behind.
        if !keep && let Err(e) = std::fs::remove_file(path) {
            lines.push(format!("cannot remove {}: {e}", path.display()));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of a monkey that is gone (a pid no process has, at a start
    /// time of 1) for `store`.
    fn gone_monkey(store: ProcessId, addr: SocketAddrV4) -> Record {
        Record {
            monkey: ProcessId {
                pid: i32::MAX,
                start_time: 1,
            },
            store,
            addr,
        }
    }

    #[test]
    fn cleanup_resumes_a_store_only_a_gone_monkey_paused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let id = ProcessId::of(i32::try_from(child.id()).expect("pid")).expect("alive");
        let addr: SocketAddrV4 = "127.0.0.1:9000".parse().expect("addr");
        let gone = gone_monkey(id, addr);
        gone.write(dir.path()).expect("record");
        // A running monkey (this test) paused it too.
        let live = Record::mine(id, addr).expect("mine");
        live.write(dir.path()).expect("record");
        assert!(process::signal(&id, Signal::STOP).expect("stop"));
        let seen = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            stopped(&id)
        });
        let held = cleanup(dir.path());
        live.remove(dir.path());
        let resumed = cleanup(dir.path());
        let still = stopped(&id);
        let _ = child.kill();
        let _ = child.wait();
        assert!(seen, "never seen stopped");
        assert_eq!(held.len(), 1, "{held:?}");
        assert!(
            held[0].contains("not resumed") && held[0].contains("paused it too"),
            "{held:?}"
        );
        // The gone monkey's record went with the first cleanup: the second
        // finds nothing of a gone monkey's.
        assert!(resumed.is_empty(), "{resumed:?}");
        assert!(still, "a store a running monkey paused stays paused");
        assert!(records(dir.path()).is_empty());
    }

    #[test]
    fn a_gone_monkeys_store_is_resumed_and_its_record_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let id = ProcessId::of(i32::try_from(child.id()).expect("pid")).expect("alive");
        let addr: SocketAddrV4 = "127.0.0.1:9000".parse().expect("addr");
        gone_monkey(id, addr).write(dir.path()).expect("record");
        assert!(process::signal(&id, Signal::STOP).expect("stop"));
        let seen = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            stopped(&id)
        });
        let lines = cleanup(dir.path());
        let resumed = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            !stopped(&id)
        });
        let _ = child.kill();
        let _ = child.wait();
        assert!(seen, "never seen stopped");
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("resumed the object store store@127.0.0.1:9000"),
            "{lines:?}"
        );
        assert!(resumed);
        assert!(records(dir.path()).is_empty());
        assert!(cleanup(dir.path()).is_empty(), "nothing left behind");
    }
}
