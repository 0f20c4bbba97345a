//! Network faults on the local platform: partitions (dropped packets),
//! latency and loss between chosen pairs of members, with kernel rules that
//! touch only those members' traffic, and that are always removed again.
//!
//! Members dial each other from 127.0.0.1, so addresses alone cannot say
//! which member a packet comes from. A fault therefore
//! 1. moves each member it involves into a cgroup of its own
//!    ([`cgroup`]), so the connections the member opens from then on can be
//!    matched (`iptables -m cgroup`);
//! 2. finds the connections the members already hold to each other
//!    ([`sockets`]) and matches those by their exact addresses and ports;
//! 3. marks every matched connection in conntrack (iptables chain
//!    `CM-PID-N` in the mangle table, jumped to from OUTPUT), so both
//!    directions of it carry the mark;
//! 4. drops the marked packets (chain `CM-PID-N` in the filter table,
//!    jumped to from INPUT: they vanish, as on a cut network) for a
//!    partition, drops a random share of them for loss (the statistic
//!    match), or queues them (NFQUEUE) to the monkey, which holds each for
//!    the latency ([`delay`]).
//!
//! Clients (the operator, soak's load, etcdctl) are not in those cgroups:
//! their traffic to every member goes on. What a fault changed is written to
//! `/run/chaos-monkey/CM-PID-N.json` before it is changed, so
//! `chaos-monkey --cleanup` can undo the work of a monkey that was killed.

pub mod cgroup;
pub mod delay;
mod leftovers;
pub mod snapshot;
pub mod sockets;
pub mod sys;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use etcd_operator::platform::local::process::ProcessId;
use serde::{Deserialize, Serialize};

use cgroup::Moved;
pub use leftovers::{Leftover, chains, check_clean, cleanup, leftovers, owner_pid};

/// Where the records of applied faults are kept.
pub const LEDGER_DIR: &str = "/run/chaos-monkey";
/// The comment on every rule the monkey adds starts with this.
pub const COMMENT: &str = "chaos-monkey";

/// Why a network fault could not be injected or removed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Rights, a tool or a kernel feature is missing (exit code 2 at start).
    #[error("{0}")]
    Missing(String),
    /// A command failed.
    #[error("`{command}` failed: {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// What it printed on standard error.
        stderr: String,
    },
    /// A file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Every slot is taken.
    #[error("{0}")]
    Busy(String),
    /// Rules of a monkey that is gone are still in the kernel.
    #[error(
        "rules left behind by a chaos-monkey that is gone: {0}; run `chaos-monkey --cleanup` \
         to remove them"
    )]
    Leftovers(String),
}

/// A member a network fault involves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// `cluster/member`, for logs.
    pub name: String,
    /// Its etcd process.
    pub process: ProcessId,
    /// Its own loopback address.
    pub ip: Ipv4Addr,
}

/// What happens to the traffic between the cut pairs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    /// Dropped.
    Drop,
    /// Dropped at random, this share (0, 1] of the packets (iptables'
    /// statistic match, the kernel's random numbers).
    Loss(f64),
    /// Held for a latency (plus or minus a jitter) in the monkey
    /// ([`delay`]); the jitter drawn from `seed`.
    Delay {
        /// Added one-way latency.
        latency: std::time::Duration,
        /// Its variation.
        jitter: std::time::Duration,
        /// Seed of the jitter.
        seed: u64,
    },
}

/// A fault as it was applied: everything needed to undo it, also from
/// another process (`--cleanup`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    /// `CM-PID-N`: the iptables chains' name.
    pub tag: String,
    /// The monkey that applied it.
    pub owner: ProcessId,
    /// The conntrack and packet mark.
    pub mark: u32,
    /// The cgroup v2 mount.
    pub cgroup_root: PathBuf,
    /// Members moved into cgroups.
    pub moved: Vec<Moved>,
    /// The NFQUEUE number, for latency.
    pub queue: Option<u16>,
    /// Who is involved, for the fault log.
    pub members: Vec<String>,
    /// The state folder of the members' clusters.
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
}

static COUNTER: AtomicU32 = AtomicU32::new(1);

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

fn me() -> Result<ProcessId, Error> {
    let pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    ProcessId::of(pid).ok_or_else(|| Error::Missing("cannot read this process's start time".into()))
}

impl Applied {
    fn ledger_path(&self) -> PathBuf {
        Path::new(LEDGER_DIR).join(format!("{}.json", self.tag))
    }

    fn save(&self) -> Result<(), Error> {
        std::fs::create_dir_all(LEDGER_DIR)
            .map_err(io_err(format!("cannot create {LEDGER_DIR}")))?;
        etcd_operator::platform::local::layout::write_json(&self.ledger_path(), self).map_err(
            io_err(format!("cannot write {}", self.ledger_path().display())),
        )
    }
}

/// The comment on the rules of `tag`.
pub fn comment(tag: &str) -> String {
    format!("{COMMENT} {tag}")
}

/// Cuts (or slows) the traffic between each pair `(a, b)` of `members`, both
/// ways. On error, whatever was applied is undone.
pub fn apply(
    cgroup_root: &Path,
    state_dir: &Path,
    members: &[Member],
    pairs: &[(usize, usize)],
    shape: Shape,
) -> Result<Applied, Error> {
    let owner = me()?;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let tag = format!("CM-{}-{n}", owner.pid);
    let pid_bits = u32::try_from(owner.pid).unwrap_or(0) & 0xF_FFFF;
    let mark = 0xC000_0000 | (pid_bits << 8) | (n & 0xFF);
    let mut applied = Applied {
        tag,
        owner,
        mark,
        cgroup_root: cgroup_root.to_path_buf(),
        moved: Vec::new(),
        queue: None,
        members: members.iter().map(|m| m.name.clone()).collect(),
        state_dir: Some(state_dir.to_path_buf()),
    };
    applied.save()?;
    match build(&mut applied, members, pairs, shape) {
        Ok(()) => Ok(applied),
        Err(e) => {
            if let Err(undo) = heal(&applied) {
                tracing::error!("could not undo the half-applied {}: {undo}", applied.tag);
            }
            Err(e)
        }
    }
}

fn build(
    applied: &mut Applied,
    members: &[Member],
    pairs: &[(usize, usize)],
    shape: Shape,
) -> Result<(), Error> {
    let mut involved: Vec<usize> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
    involved.sort_unstable();
    involved.dedup();
    let mut cgroups = vec![String::new(); members.len()];
    for &i in &involved {
        // One cgroup per member: the rules tell the members apart by it.
        let name = format!("{}-{i}", applied.tag.to_lowercase());
        let m = cgroup::move_into(&applied.cgroup_root, &members[i].process, &name).map_err(
            io_err(format!("cannot move {} into a cgroup", members[i].name)),
        )?;
        cgroups[i].clone_from(&m.to);
        applied.moved.push(m);
        applied.save()?;
    }
    let tag = applied.tag.clone();
    let note = comment(&tag);
    let set = format!("{:#x}", applied.mark);
    let strs = |a: &[&str]| -> Vec<String> { a.iter().map(|s| (*s).to_string()).collect() };
    let with = |matches: Vec<String>, target: &[&str]| -> Vec<String> {
        let mut r = matches;
        r.extend(strs(&["-m", "comment", "--comment", &note]));
        r.extend(strs(target));
        r
    };
    // Each matched packet gets the mark, and its connection too (so the
    // packets of a new connection that no rule names, its replies, follow).
    let mark = ["-j", "MARK", "--set-mark", set.as_str()];
    let mut rules: Vec<Vec<String>> = Vec::new();
    for &(a, b) in pairs {
        for (from, to) in [(a, b), (b, a)] {
            // Connections the member opens from now on, by its cgroup.
            rules.push(with(
                vec![
                    "-d".into(),
                    format!("{}/32", members[to].ip),
                    "-m".into(),
                    "cgroup".into(),
                    "--path".into(),
                    cgroups[from].clone(),
                ],
                &mark,
            ));
            // Connections it holds already, by their addresses and ports,
            // both ways (conntrack may not have seen their start).
            let conns = sockets::connections_to(members[from].process.pid, &[members[to].ip])
                .map_err(io_err(format!(
                    "cannot read the connections of {}",
                    members[from].name
                )))?;
            for c in conns {
                for (src, dst) in [(c.local, c.remote), (c.remote, c.local)] {
                    rules.push(with(
                        vec![
                            "-p".into(),
                            "tcp".into(),
                            "-s".into(),
                            format!("{}/32", src.ip()),
                            "--sport".into(),
                            src.port().to_string(),
                            "-d".into(),
                            format!("{}/32", dst.ip()),
                            "--dport".into(),
                            dst.port().to_string(),
                        ],
                        &mark,
                    ));
                }
            }
        }
    }
    rules.push(with(
        strs(&["-m", "mark", "--mark", &set]),
        &["-j", "CONNMARK", "--save-mark"],
    ));
    rules.push(with(strs(&["-m", "connmark", "--mark", &set]), &mark));
    if let Shape::Delay { .. } = shape {
        let q = queue_of(applied.mark).to_string();
        rules.push(with(
            strs(&["-m", "mark", "--mark", &set]),
            &["-j", "NFQUEUE", "--queue-num", &q, "--queue-bypass"],
        ));
        applied.queue = Some(queue_of(applied.mark));
        applied.save()?;
    }
    chain("mangle", "OUTPUT", &tag, &rules)?;
    match shape {
        Shape::Drop | Shape::Loss(_) => {
            let mut m: Vec<String> = strs(&["-m", "mark", "--mark", &set]);
            if let Shape::Loss(p) = shape {
                m.extend(strs(&[
                    "-m",
                    "statistic",
                    "--mode",
                    "random",
                    "--probability",
                    &format!("{p:.4}"),
                ]));
            }
            chain("filter", "INPUT", &tag, &[with(m, &["-j", "DROP"])])?;
        }
        Shape::Delay { .. } => {}
    }
    Ok(())
}

/// The NFQUEUE number of the fault marked `mark`.
pub fn queue_of(mark: u32) -> u16 {
    u16::try_from(mark & 0xFFFF).unwrap_or(0).max(1)
}

fn ipt(table: &str, args: &[String]) -> Result<String, Error> {
    let mut a: Vec<String> = vec!["-w".into(), "-t".into(), table.into()];
    a.extend_from_slice(args);
    sys::run("iptables", &a)
}

/// Creates chain `name` in `table` with `rules`, then jumps to it first
/// thing from `hook`.
fn chain(table: &str, hook: &str, name: &str, rules: &[Vec<String>]) -> Result<(), Error> {
    ipt(table, &["-N".into(), name.into()])?;
    for r in rules {
        let mut a = vec!["-A".to_string(), name.to_string()];
        a.extend_from_slice(r);
        ipt(table, &a)?;
    }
    ipt(table, &jump("-I", hook, name))?;
    Ok(())
}

fn jump(op: &str, hook: &str, name: &str) -> Vec<String> {
    let mut a = vec![op.to_string(), hook.to_string()];
    if op == "-I" {
        a.push("1".into());
    }
    a.extend(["-m", "comment", "--comment", &comment(name), "-j", name].map(String::from));
    a
}

/// Removes the chains of `tag` and the jumps to them (missing ones are fine).
pub fn remove_chains(tag: &str) -> Result<(), Error> {
    let mut first: Option<Error> = None;
    for (table, hook) in [("filter", "INPUT"), ("mangle", "OUTPUT")] {
        while ipt(table, &jump("-D", hook, tag)).is_ok() {}
        let present = ipt(table, &["-S".into()])
            .map(|s| s.lines().any(|l| l == format!("-N {tag}")))
            .unwrap_or(true);
        if !present {
            continue;
        }
        let r = ipt(table, &["-F".into(), tag.into()])
            .and_then(|_| ipt(table, &["-X".into(), tag.into()]));
        if let Err(e) = r {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Undoes `applied`: jumps and chains, the cgroups (members
/// moved back), then its ledger. Every step is tried; the first error is
/// returned.
pub fn heal(applied: &Applied) -> Result<(), Error> {
    let mut first: Option<Error> = None;
    if let Err(e) = remove_chains(&applied.tag) {
        first.get_or_insert(e);
    }
    for m in &applied.moved {
        if let Err(e) = cgroup::restore(&applied.cgroup_root, m) {
            first.get_or_insert(Error::Io {
                what: format!(
                    "cannot move process {} back from cgroup {}",
                    m.process.pid, m.to
                ),
                source: e,
            });
        }
    }
    if first.is_none() {
        match std::fs::remove_file(applied.ledger_path()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                first.get_or_insert(io_err(format!(
                    "cannot remove {}",
                    applied.ledger_path().display()
                ))(e));
            }
        }
    }
    first.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_names_carry_their_owner() {
        assert_eq!(owner_pid("CM-1234-7"), Some(1234));
        assert_eq!(owner_pid("CM-probe-1"), None);
        assert_eq!(owner_pid("DOCKER"), None);
        assert_eq!(owner_pid("CM-12-x"), None);
    }

    #[test]
    fn jumps_carry_the_comment() {
        assert_eq!(
            jump("-I", "OUTPUT", "CM-1-2").join(" "),
            "-I OUTPUT 1 -m comment --comment chaos-monkey CM-1-2 -j CM-1-2"
        );
    }
}
