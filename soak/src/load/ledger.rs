//! The ledger: every write the load sent, per key, with what became of it.
//! An acknowledged write (a put, a compare-and-set that swapped, a delete
//! that deleted) is kept with its revision; a write whose outcome is
//! unknown (error or timeout: it may still have been applied) is kept as
//! uncertain. At the end each key must hold its newest acknowledged write
//! (be absent when that was a delete) or an uncertain one
//! ([`crate::invariants::lost`]).
//!
//! Values name their write: `WWWW-SSSSSSSSSSSS-` (writer, sequence) padded
//! to the value size.

use std::collections::BTreeMap;

use crate::history::Ms;

/// Which write a value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WriteId {
    /// Writer number.
    pub writer: u32,
    /// Its sequence number.
    pub seq: u64,
}

impl WriteId {
    /// The value written, padded to `size` bytes.
    pub fn value(self, size: usize) -> String {
        let mut v = format!("{:04}-{:012}-", self.writer, self.seq);
        while v.len() < size {
            v.push('x');
        }
        v
    }

    /// The write a value names, if it is one of ours.
    pub fn parse(value: &[u8]) -> Option<WriteId> {
        let text = std::str::from_utf8(value).ok()?;
        let mut parts = text.splitn(3, '-');
        let writer = parts.next()?.parse().ok()?;
        let seq = parts.next()?.parse().ok()?;
        parts.next()?;
        Some(WriteId { writer, seq })
    }
}

impl std::fmt::Display for WriteId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "w{}#{}", self.writer, self.seq)
    }
}

/// An acknowledged write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Acked {
    /// Which (for a delete, the id the deleting session had next).
    pub id: WriteId,
    /// A delete: the key must be absent.
    pub tombstone: bool,
    /// Restore epoch it was acknowledged in (0 unless a restore rolled the
    /// cluster back).
    pub epoch: u32,
    /// Revision of the put.
    pub revision: i64,
    /// When it was acknowledged.
    pub at: Ms,
}

/// What the ledger knows about one key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyState {
    /// The newest acknowledged write (highest epoch, then revision).
    pub newest: Option<Acked>,
    /// Writes whose outcome is unknown.
    pub uncertain: Vec<WriteId>,
    /// A delete whose outcome is unknown was sent.
    pub uncertain_delete: bool,
    /// Deletes sent and not answered yet.
    pub deletes_in_flight: u32,
    /// When the last delete was answered (or failed).
    pub last_delete_done: Option<Ms>,
    /// Writes acknowledged in all.
    pub acked: u64,
}

/// All keys.
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    keys: BTreeMap<u32, KeyState>,
    epoch: u32,
    /// Lowest revision seen in each epoch (index = epoch).
    floors: Vec<i64>,
    acked: u64,
    uncertain: u64,
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Self {
        Ledger {
            floors: vec![0],
            ..Ledger::default()
        }
    }

    /// Records an acknowledged write.
    pub fn ack(&mut self, key: u32, id: WriteId, revision: i64, at: Ms) {
        self.record(key, id, false, revision, at);
    }

    /// Records an acknowledged delete that deleted the key.
    pub fn ack_delete(&mut self, key: u32, id: WriteId, revision: i64, at: Ms) {
        self.record(key, id, true, revision, at);
    }

    fn record(&mut self, key: u32, id: WriteId, tombstone: bool, revision: i64, at: Ms) {
        let a = Acked {
            id,
            tombstone,
            epoch: self.epoch,
            revision,
            at,
        };
        let k = self.keys.entry(key).or_default();
        if k.newest
            .is_none_or(|n| (n.epoch, n.revision) < (a.epoch, a.revision))
        {
            k.newest = Some(a);
        }
        k.acked += 1;
        self.acked += 1;
        self.seen(revision);
    }

    /// Records a write whose outcome is unknown.
    pub fn uncertain(&mut self, key: u32, id: WriteId) {
        self.keys.entry(key).or_default().uncertain.push(id);
        self.uncertain += 1;
    }

    /// Records a delete whose outcome is unknown.
    pub fn uncertain_delete(&mut self, key: u32) {
        self.keys.entry(key).or_default().uncertain_delete = true;
        self.uncertain += 1;
    }

    /// Notes a revision some client saw (for the floor of the epoch).
    pub fn seen(&mut self, revision: i64) {
        if let Some(f) = self.floors.last_mut()
            && (*f == 0 || revision < *f)
        {
            *f = revision;
        }
    }

    /// A restore rolled the cluster back: revisions start again at
    /// `revision`. Writes acknowledged before belong to an older epoch.
    pub fn rollback(&mut self, revision: i64) {
        self.epoch += 1;
        self.floors.push(revision);
    }

    /// The current epoch.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Lowest revision seen in `epoch` (0 if none).
    pub fn floor(&self, epoch: u32) -> i64 {
        usize::try_from(epoch)
            .ok()
            .and_then(|e| self.floors.get(e))
            .copied()
            .unwrap_or(0)
    }

    /// A delete of `key` whose outcome is unknown was sent: the key may be
    /// absent whatever was acknowledged before (the linearizability check
    /// decides precisely; the stale-read check must not guess).
    pub fn may_be_deleted(&self, key: u32) -> bool {
        self.keys.get(&key).is_some_and(|k| k.uncertain_delete)
    }

    /// A delete of `key` is about to be sent.
    pub fn delete_sent(&mut self, key: u32) {
        self.keys.entry(key).or_default().deletes_in_flight += 1;
    }

    /// A delete of `key` was answered, whatever the answer, at `at`.
    pub fn delete_done(&mut self, key: u32, at: Ms) {
        let k = self.keys.entry(key).or_default();
        k.deletes_in_flight = k.deletes_in_flight.saturating_sub(1);
        k.last_delete_done = Some(k.last_delete_done.map_or(at, |d| d.max(at)));
    }

    /// A delete of `key` was in flight at some moment since `since` (a
    /// read started then may rightly find the key absent, whatever was
    /// acknowledged before it started).
    pub fn delete_since(&self, key: u32, since: Ms) -> bool {
        self.keys.get(&key).is_some_and(|k| {
            k.deletes_in_flight > 0 || k.last_delete_done.is_some_and(|d| d >= since)
        })
    }

    /// The newest acknowledged write of `key`.
    pub fn newest(&self, key: u32) -> Option<Acked> {
        self.keys.get(&key).and_then(|k| k.newest)
    }

    /// Every key written, with its state.
    pub fn keys(&self) -> impl Iterator<Item = (u32, &KeyState)> {
        self.keys.iter().map(|(k, s)| (*k, s))
    }

    /// Writes acknowledged.
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// Writes with unknown outcome.
    pub fn uncertain_count(&self) -> u64 {
        self.uncertain
    }
}

/// The etcd key of key number `n`.
pub fn key_name(n: u32) -> String {
    format!("soak/k{n:06}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_name_their_write() {
        let id = WriteId { writer: 3, seq: 42 };
        let v = id.value(64);
        assert_eq!(v.len(), 64);
        assert_eq!(WriteId::parse(v.as_bytes()), Some(id));
        assert_eq!(
            WriteId::parse(id.value(8).as_bytes()),
            Some(id),
            "never cut short"
        );
        assert_eq!(WriteId::parse(b"hello"), None);
    }

    #[test]
    fn the_newest_ack_wins_by_revision_even_out_of_order() {
        let mut l = Ledger::new();
        let a = WriteId { writer: 0, seq: 1 };
        let b = WriteId { writer: 1, seq: 1 };
        l.ack(7, b, 11, 5);
        l.ack(7, a, 10, 6);
        assert_eq!(l.newest(7).map(|n| n.id), Some(b));
        assert_eq!(l.acked(), 2);
        l.rollback(3);
        l.ack(7, a, 4, 9);
        assert_eq!(
            l.newest(7).map(|n| (n.id, n.epoch)),
            Some((a, 1)),
            "a newer epoch wins"
        );
        assert_eq!(l.floor(1), 3);
        assert_eq!(l.floor(0), 10);
        l.ack_delete(7, b, 5, 10);
        let n = l.newest(7).expect("newest");
        assert!(n.tombstone && n.revision == 5, "{n:?}");
        assert!(!l.delete_since(9, 0));
        l.delete_sent(9);
        assert!(l.delete_since(9, 50), "in flight");
        l.delete_done(9, 40);
        assert!(!l.delete_since(9, 50), "answered before the read started");
        assert!(l.delete_since(9, 40), "answered while the read ran");
        assert!(!l.may_be_deleted(8));
        l.uncertain_delete(8);
        assert_eq!(l.uncertain_count(), 1);
        assert!(
            l.may_be_deleted(8),
            "a timed-out delete may have removed the key"
        );
    }
}
