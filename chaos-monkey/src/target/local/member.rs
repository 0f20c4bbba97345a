//! The local platform's lasting faults on members alone: clock-skew
//! ([`crate::clock`]) and slow-disk ([`crate::disk::slow`]).

use etcd_operator::platform::local::process;

use super::Handle;
use crate::cli::FaultKind;
use crate::clock;
use crate::disk::slow;
use crate::target::{Error, LastingPlan};

/// Checks rights and leftovers; returns what the fault touches.
pub fn prepare(fault: FaultKind) -> Result<Option<String>, Error> {
    match fault {
        FaultKind::ClockSkew => {
            clock::preflight().map_err(Error::Setup)?;
            let left: Vec<String> = clock::leftovers()
                .into_iter()
                .filter(|s| process::alive(&s.process))
                .map(|s| format!("{} (process {})", s.member, s.process.pid))
                .collect();
            if !left.is_empty() {
                return Err(Error::Setup(format!(
                    "clocks shifted by a chaos-monkey that is gone: {}; run `chaos-monkey \
                     --cleanup` to restore them",
                    left.join(", ")
                )));
            }
            Ok(Some(format!(
                "clock-skew touches: the vDSO clock_gettime of each victim (patched through \
                 ptrace, the original written back at heal), records in {}",
                clock::LEDGER_DIR
            )))
        }
        FaultKind::SlowDisk => {
            slow::preflight().map_err(|e| Error::Setup(e.to_string()))?;
            let left = slow::leftovers();
            if !left.is_empty() {
                tracing::warn!(
                    "blkio cgroups of gone monkeys are left (chaos-monkey --cleanup removes \
                     them): {}",
                    left.join(", ")
                );
            }
            Ok(Some(format!(
                "slow-disk touches: a blkio cgroup {}{}-CLUSTER-MEMBER per victim under {} \
                 (removed at heal)",
                slow::PREFIX,
                std::process::id(),
                slow::BLKIO_ROOT
            )))
        }
        _ => Ok(None),
    }
}

fn victims(plan: &LastingPlan<Handle>) -> impl Iterator<Item = &(String, Handle)> {
    plan.victims.iter().filter_map(|&v| plan.members.get(v))
}

/// Shifts the victims' clocks (all or none).
pub async fn skew(plan: &LastingPlan<Handle>) -> Result<(Vec<clock::Skewed>, String), Error> {
    let skew = plan.options.skew;
    let targets: Vec<(String, Handle)> = victims(plan).cloned().collect();
    let cluster = plan.cluster.clone();
    let done = tokio::task::spawn_blocking(move || {
        let mut done = Vec::new();
        for (name, h) in &targets {
            match clock::skew(&h.process, &format!("{cluster}/{name}"), skew) {
                Ok(s) => done.push(s),
                Err(e) => {
                    for s in &done {
                        let _ = clock::restore(s);
                    }
                    return Err(e);
                }
            }
        }
        Ok(done)
    })
    .await
    .map_err(|e| Error::Unsupported(format!("the clock task failed: {e}")))?
    .map_err(clock_err)?;
    let detail = format!(
        "wall clock shifted by {skew} (vDSO clock_gettime of process {} patched)",
        done.iter()
            .map(|s| s.process.pid.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok((done, detail))
}

fn clock_err(e: clock::Error) -> Error {
    match e {
        clock::Error::Gone(pid) => Error::Gone(format!("process {pid}")),
        other => Error::Unsupported(other.to_string()),
    }
}

/// Restores every shifted clock; the first failure is returned.
pub fn unskew(all: &[clock::Skewed]) -> Result<(), Error> {
    let mut first = None;
    for s in all {
        if let Err(e) = clock::restore(s) {
            tracing::error!("cannot restore the clock of {}: {e}", s.member);
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), |e| Err(clock_err(e)))
}

/// Throttles the victims' disks (all or none).
pub async fn slow(plan: &LastingPlan<Handle>) -> Result<(Vec<slow::Slowed>, String), Error> {
    let iops = plan.options.disk_iops;
    let mut done = Vec::new();
    for (name, h) in victims(plan) {
        let r = match &h.data_dir {
            Some(data) => slow::slow(
                &h.process,
                &slow::cgroup_name(&plan.cluster, name),
                data,
                iops,
            ),
            None => Err(slow::Error::Missing(format!("{name} has no data folder"))),
        };
        match r {
            Ok(s) => done.push(s),
            Err(e) => {
                let _ = unslow(&done);
                return Err(match e {
                    slow::Error::Gone(pid) => Error::Gone(format!("process {pid}")),
                    other => Error::Unsupported(other.to_string()),
                });
            }
        }
    }
    let detail = format!(
        "disk writes capped at {iops}/s ({})",
        done.iter()
            .map(|s| format!(
                "process {} on {} in blkio {}",
                s.process.pid, s.device, s.to
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    Ok((done, detail))
}

/// Moves every throttled member back; the first failure is returned.
pub fn unslow(all: &[slow::Slowed]) -> Result<(), Error> {
    let mut first = None;
    for s in all {
        if let Err(e) = slow::restore(s) {
            tracing::error!(
                "cannot undo the slow disk of process {}: {e}",
                s.process.pid
            );
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), |e| Err(Error::Unsupported(e.to_string())))
}
