//! The fence of an operator replica that may have lost its leadership.
//!
//! With leader election on, a replica may write (to the API server or to
//! etcd) only while it is sure it still holds the Lease: until its last
//! successful renewal's start plus the renew deadline, counted on its own
//! monotonic clock. The renew deadline is shorter than the Lease's
//! duration, so the fence closes before another replica may take over.
//! A process paused for longer (SIGSTOP, a frozen VM, a long GC) wakes up
//! with its monotonic clock past the deadline and writes nothing, whatever
//! task wakes first: every write path checks [`check`] right before it
//! writes, so not only reconciles but also backup schedules, Jobs, Events
//! and status writes stop.
//!
//! Without leader election (the local platform, one replica) the fence is
//! never closed.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// Leader election is on: writes need a valid lease.
static ELECTED: AtomicBool = AtomicBool::new(false);
/// Until when the lease is surely ours (`None`: not known to be).
static UNTIL: Mutex<Option<Instant>> = Mutex::new(None);

/// A write was refused: this replica may no longer lead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "this operator replica may have lost its leadership (no lease renewal it can count on): it \
     writes nothing until it leads again"
)]
pub struct Deposed;

/// Turns the fence on: from now on writes need a renewed lease.
pub fn elect() {
    ELECTED.store(true, Ordering::SeqCst);
    close();
}

/// The lease was renewed by a request that started at `started`: writes
/// are allowed until `started + valid` (the renew deadline).
pub fn renewed(started: Instant, valid: Duration) {
    let mut until = UNTIL.lock().unwrap_or_else(|e| e.into_inner());
    let new = started.checked_add(valid);
    if new > *until {
        *until = new;
    }
}

/// Closes the fence (the lease is lost, or released).
pub fn close() {
    *UNTIL.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// Ok while this replica may write.
pub fn check() -> Result<(), Deposed> {
    if !ELECTED.load(Ordering::SeqCst) {
        return Ok(());
    }
    let until = *UNTIL.lock().unwrap_or_else(|e| e.into_inner());
    match until {
        Some(u) if Instant::now() < u => Ok(()),
        _ => Err(Deposed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The process-wide fence, as one test (tests run in threads of one
    /// process: a second test of the same statics would race it).
    #[tokio::test(start_paused = true)]
    async fn a_paused_leader_writes_nothing_once_its_deadline_passed() {
        elect();
        assert_eq!(check(), Err(Deposed), "no renewal yet");
        let started = Instant::now();
        renewed(started, Duration::from_secs(10));
        assert_eq!(check(), Ok(()));
        // A renewal that started earlier never moves the deadline back.
        renewed(started - Duration::from_secs(5), Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!(check(), Ok(()));
        // The process was stopped: its clock jumps past the deadline.
        tokio::time::advance(Duration::from_secs(14)).await;
        assert_eq!(check(), Err(Deposed));
        renewed(Instant::now(), Duration::from_secs(10));
        assert_eq!(check(), Ok(()));
        close();
        assert_eq!(check(), Err(Deposed));
        ELECTED.store(false, Ordering::SeqCst);
        assert_eq!(check(), Ok(()), "no election: always open");
    }
}
