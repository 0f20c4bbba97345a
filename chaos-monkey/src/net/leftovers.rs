//! What monkeys that are gone left in the kernel (their ledgers under
//! /run/chaos-monkey, chains named after their pid), the check at start
//! that none of it touches this run's members, and `--cleanup`.

use std::path::Path;

use etcd_operator::platform::local::process::{self, ProcessId};

use super::{Applied, Error, LEDGER_DIR, heal, ipt, remove_chains};

/// Something a monkey left behind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Leftover {
    /// A ledger of a fault whose monkey is gone.
    Ledger(Applied),
    /// A chain with no ledger whose monkey (by the pid in its name) is gone.
    Chain(String),
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Leftover::Ledger(a) => write!(
                f,
                "{} (pid {}, members {})",
                a.tag,
                a.owner.pid,
                a.members.join(", ")
            ),
            Leftover::Chain(c) => write!(f, "iptables chain {c}"),
        }
    }
}

/// The chains named `CM-PID-N` in the filter and mangle tables.
pub fn chains() -> Result<Vec<String>, Error> {
    let mut out = Vec::new();
    for table in ["filter", "mangle"] {
        for l in ipt(table, &["-S".into()])?.lines() {
            if let Some(c) = l.strip_prefix("-N ")
                && owner_pid(c).is_some()
            {
                out.push(c.to_string());
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The pid in a chain name `CM-PID-N`.
pub fn owner_pid(chain: &str) -> Option<i32> {
    let rest = chain.strip_prefix("CM-")?;
    let (pid, n) = rest.split_once('-')?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
}

fn ledgers() -> Vec<Applied> {
    let Ok(dir) = std::fs::read_dir(LEDGER_DIR) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path()).ok()?;
            serde_json::from_str(&text).ok()
        })
        .collect()
}

fn pid_alive(pid: i32) -> bool {
    ProcessId::of(pid).is_some()
}

/// What monkeys that are gone left behind.
pub fn leftovers() -> Result<Vec<Leftover>, Error> {
    let ledgers = ledgers();
    let mut out: Vec<Leftover> = ledgers
        .iter()
        .filter(|a| !process::alive(&a.owner))
        .cloned()
        .map(Leftover::Ledger)
        .collect();
    for c in chains()? {
        let has_ledger = ledgers.iter().any(|a| a.tag == c);
        if !has_ledger && owner_pid(&c).is_some_and(|p| !pid_alive(p)) {
            out.push(Leftover::Chain(c));
        }
    }
    Ok(out)
}

/// Refuses to start while a gone monkey's rules on the members of
/// `state_dir` are in the kernel; returns a warning naming those of other
/// state folders (other monkeys' business).
pub fn check_clean(state_dir: &Path) -> Result<Option<String>, Error> {
    let left = leftovers()?;
    let (mine, other): (Vec<Leftover>, Vec<Leftover>) = left.into_iter().partition(|l| match l {
        Leftover::Ledger(a) => a
            .state_dir
            .as_deref()
            .is_none_or(|d| same_dir(d, state_dir)),
        Leftover::Chain(_) => false,
    });
    if !mine.is_empty() {
        let list: Vec<String> = mine.iter().map(ToString::to_string).collect();
        return Err(Error::Leftovers(list.join("; ")));
    }
    Ok((!other.is_empty()).then(|| {
        let list: Vec<String> = other.iter().map(ToString::to_string).collect();
        format!(
            "rules of gone monkeys on other members are in the kernel (not touched; \
             chaos-monkey --cleanup removes them): {}",
            list.join("; ")
        )
    }))
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// Removes what gone monkeys left behind; returns a line per thing removed.
pub fn cleanup() -> Result<Vec<String>, Error> {
    let mut done = Vec::new();
    for l in leftovers()? {
        match &l {
            Leftover::Ledger(a) => heal(a)?,
            Leftover::Chain(c) => remove_chains(c)?,
        }
        done.push(format!("removed {l}"));
    }
    Ok(done)
}
