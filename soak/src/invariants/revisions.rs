//! Revisions never go back, per client session: each session's requests
//! are sequential and linearizable, so the header revision of their
//! responses is monotonic. And reads are not stale: a read that started
//! after a write to its key was acknowledged returns that write's revision
//! or a later one.

use std::collections::HashMap;

use super::{Check, Violation};
use crate::history::Ms;

/// The last revision each session saw.
#[derive(Debug, Default)]
pub struct Sessions {
    last: HashMap<String, (i64, Ms, &'static str, u32)>,
}

/// A revision that went back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Regression {
    /// The session.
    pub session: String,
    /// What it saw before, and when.
    pub before: (i64, Ms),
    /// What it sees now, and when.
    pub now: (i64, Ms),
    /// The session's previous response was from an older restore epoch: the
    /// rollback is already known.
    pub known_epoch: bool,
}

impl Regression {
    /// As a violation.
    pub fn violation(&self) -> Violation {
        Violation::new(
            self.now.1,
            Check::Revision,
            format!(
                "session {} saw revision {} at {} after {} at {}",
                self.session,
                self.now.0,
                crate::history::rfc3339(self.now.1),
                self.before.0,
                crate::history::rfc3339(self.before.1)
            ),
        )
    }
}

impl Sessions {
    /// Records that `session` got a response with header revision `rev` at
    /// `at` for operation `op`, in restore epoch `epoch` (0 unless a restore
    /// rolled the cluster back).
    pub fn observe(
        &mut self,
        session: &str,
        at: Ms,
        rev: i64,
        op: &'static str,
        epoch: u32,
    ) -> Option<Regression> {
        let prev = self.last.insert(session.to_string(), (rev, at, op, epoch));
        match prev {
            Some((p, pat, _, e)) if rev < p => Some(Regression {
                session: session.to_string(),
                before: (p, pat),
                now: (rev, at),
                known_epoch: e < epoch,
            }),
            _ => None,
        }
    }

    /// Sets a session's last response (after an accepted rollback).
    pub fn reset(&mut self, session: &str, at: Ms, rev: i64, op: &'static str, epoch: u32) {
        self.last.insert(session.to_string(), (rev, at, op, epoch));
    }
}

/// A read of `key` that started at `started` when the newest acknowledged
/// write to it had revision `acked` (acknowledged at `acked_at`), and
/// returned the key at `got` (0: absent).
pub fn stale_read(key: &str, started: Ms, acked: i64, acked_at: Ms, got: i64) -> Option<Violation> {
    (got < acked).then(|| {
        Violation::new(
            started,
            Check::StaleRead,
            format!(
                "read of {key} returned revision {got} ({}), but a write with revision {acked} \
                 was acknowledged at {}, before the read started",
                if got == 0 { "key absent" } else { "older data" },
                crate::history::rfc3339(acked_at)
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_going_back_is_caught_per_session() {
        let mut s = Sessions::default();
        assert!(s.observe("w0", 1, 10, "put", 0).is_none());
        assert!(
            s.observe("w1", 2, 5, "get", 0).is_none(),
            "other sessions are separate"
        );
        assert!(s.observe("w0", 3, 10, "get", 0).is_none(), "equal is fine");
        let r = s.observe("w0", 4, 9, "put", 0).expect("went back");
        assert!(!r.known_epoch);
        assert_eq!(r.before, (10, 3));
        assert_eq!(r.now, (9, 4));
        let v = r.violation();
        assert_eq!(v.check, Check::Revision);
        assert!(
            v.message.contains("session w0 saw revision 9"),
            "{}",
            v.message
        );
        assert!(s.observe("w0", 5, 9, "put", 0).is_none(), "reported once");
    }

    #[test]
    fn a_rollback_seen_again_in_a_later_epoch_is_known() {
        let mut s = Sessions::default();
        s.observe("w0", 1, 100, "put", 0);
        s.observe("w1", 1, 101, "put", 0);
        let first = s.observe("w0", 2, 40, "put", 0).expect("rolled back");
        assert!(!first.known_epoch);
        s.reset("w0", 2, 40, "put", 1);
        let second = s.observe("w1", 3, 41, "get", 1).expect("also went back");
        assert!(
            second.known_epoch,
            "the same restore, seen by another session"
        );
    }

    #[test]
    fn stale_reads_are_caught() {
        assert!(stale_read("k", 10, 5, 9, 5).is_none());
        assert!(stale_read("k", 10, 5, 9, 7).is_none());
        let v = stale_read("k", 10, 5, 9, 4).expect("stale");
        assert_eq!(v.check, Check::StaleRead);
        assert!(stale_read("k", 10, 5, 9, 0).is_some_and(|v| v.message.contains("absent")));
    }
}
