//! What the cluster's backup tasks share (the schedule of full backups,
//! the restore checks, the follower of delta segments; each its own loop):
//! the members the reconcile loop offers to work from, taken in turn and
//! waited for (bounded) while none is ready, and their part of
//! `status.backup`, written under a lock that a panicked writer cannot
//! leave unusable.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;

use super::{Candidate, Source};
use crate::crd::BackupStatus;

/// How long a task waits for a member to be offered before it looks at
/// its own work again.
const WAIT_FOR_OFFER: Duration = Duration::from_secs(1);

/// The members offered to a task, taken in turn: after a failure the next
/// one is tried.
#[derive(Debug)]
pub struct Sources {
    offered: watch::Receiver<Vec<Candidate>>,
    turn: usize,
}

impl Sources {
    /// Takes members from what the reconcile loop offers on `offered`.
    pub fn new(offered: watch::Receiver<Vec<Candidate>>) -> Self {
        Sources { offered, turn: 0 }
    }

    /// The member whose turn it is; `None` when none was offered within
    /// about a second (the task looks at its work again, then asks anew).
    pub async fn pick(&mut self) -> Option<Candidate> {
        let offered = self.offered.borrow_and_update().clone();
        if offered.is_empty() {
            // Closed (the cluster is going): wait the same, the task is
            // about to be aborted.
            if let Ok(Err(_)) = tokio::time::timeout(WAIT_FOR_OFFER, self.offered.changed()).await {
                tokio::time::sleep(WAIT_FOR_OFFER).await;
            }
            return None;
        }
        Some(offered[self.turn % offered.len()].clone())
    }

    /// The member picked failed: the next pick takes another.
    pub fn failed(&mut self) {
        self.turn = self.turn.wrapping_add(1);
    }
}

/// `candidate` as the source of a backup, a check or a follow.
pub fn source(candidate: &Candidate) -> Source<'_> {
    let (member, url, tls) = candidate;
    Source {
        member,
        url,
        tls: tls.as_ref(),
    }
}

/// Changes the cluster's `status.backup` (shared with the reconcile
/// loop, which reports it).
pub fn update(status: &Mutex<BackupStatus>, f: impl FnOnce(&mut BackupStatus)) {
    f(&mut status.lock().unwrap_or_else(|e| e.into_inner()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(n: &str) -> Candidate {
        (n.into(), format!("http://{n}:2379"), None)
    }

    #[tokio::test]
    async fn members_are_taken_in_turn_and_waited_for() {
        let (tx, rx) = watch::channel(Vec::new());
        let mut s = Sources::new(rx);
        tokio::time::pause();
        assert_eq!(s.pick().await, None, "none offered: a bounded wait");
        tx.send(vec![member("a"), member("b")]).expect("sent");
        assert_eq!(s.pick().await.map(|c| c.0), Some("a".into()));
        assert_eq!(
            s.pick().await.map(|c| c.0),
            Some("a".into()),
            "until it fails"
        );
        s.failed();
        assert_eq!(s.pick().await.map(|c| c.0), Some("b".into()));
        s.failed();
        assert_eq!(s.pick().await.map(|c| c.0), Some("a".into()));
    }

    /// With the sender gone and nothing offered, a pick still returns
    /// (after a wait) rather than spinning or hanging.
    #[tokio::test]
    async fn a_closed_offer_is_waited_on_not_spun_on() {
        let (tx, rx) = watch::channel(Vec::new());
        drop(tx);
        let mut s = Sources::new(rx);
        tokio::time::pause();
        let started = tokio::time::Instant::now();
        assert_eq!(s.pick().await, None);
        assert!(started.elapsed() >= WAIT_FOR_OFFER, "waited, not spun");
    }

    #[test]
    fn status_is_written_even_after_a_writer_panicked() {
        let status = std::sync::Arc::new(Mutex::new(BackupStatus::default()));
        let s = status.clone();
        let _ = std::thread::spawn(move || {
            let _g = s.lock().expect("lock");
            panic!("a writer panics holding the lock");
        })
        .join();
        update(&status, |s| s.last_error = Some("x".into()));
        let got = status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last_error
            .clone();
        assert_eq!(got.as_deref(), Some("x"));
    }
}
