//! No acknowledged write is lost: after the run every key's value must be
//! its newest acknowledged write, or a write whose outcome was unknown
//! (it may have been applied after its client gave up). Anything else, or
//! the key missing, is a lost write.
//!
//! When the scenario accepts data loss since the last backup, a write
//! acknowledged before a restore rolled the cluster back, with a revision
//! above the one the backup holds (status.lastRecovery.backupRevision of the
//! first rebuild after the write), is rolled back rather than lost:
//! reported, not counted. Older writes must survive.
//!
//! The loss window of a rolled-back write is how long before the loss it
//! was acknowledged: the loss starts with the fault that caused the
//! rebuild (the newest injected fault at or before the rebuild, after the
//! rebuild before it), not at the rebuild, which comes seconds later
//! (noticing the loss, restoring). A write acknowledged after the fault
//! started has a window of 0. When no fault is known for a rebuild (the
//! fault log is gone, or the loss came from no injected fault), the window
//! is measured to the rebuild instead: longer, never shorter.

use super::{Check, Violation};
use crate::history::{Ms, Restore};
use crate::load::ledger::{Acked, KeyState, Ledger, WriteId, key_name};

/// What became of one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Its newest acknowledged write (or an uncertain one) is there.
    Present,
    /// The newest acknowledged write is missing.
    Lost {
        /// The write that should be there.
        expected: Acked,
        /// What was found instead.
        found: String,
    },
    /// Rolled back by a restore (accepted by the scenario).
    RolledBack {
        /// The write that was rolled back.
        expected: Acked,
        /// How long before the loss that rolled it back it was
        /// acknowledged (`None` when no rebuild was reported after it).
        before_loss: Option<Ms>,
    },
}

/// When the loss that `rebuild` (one of `restores`, in time order) repaired
/// started: the newest of `faults` (injection times) at or before it and
/// after the rebuild before it; else the rebuild itself.
pub fn loss_start(rebuild: &Restore, restores: &[Restore], faults: &[Ms]) -> Ms {
    let previous = restores
        .iter()
        .filter(|r| r.at < rebuild.at)
        .map(|r| r.at)
        .max();
    faults
        .iter()
        .copied()
        .filter(|&f| f <= rebuild.at && previous.is_none_or(|p| f > p))
        .max()
        .unwrap_or(rebuild.at)
}

/// Judges one key against its value at the end: `found` is the value and
/// its mod revision, or `None` when the key is absent. `restores` is `None`
/// when no data loss is accepted, else the rebuilds the operator reported;
/// `faults` are the times faults were injected.
pub fn judge(
    state: &KeyState,
    found: Option<(&[u8], i64)>,
    ledger: &Ledger,
    restores: Option<&[Restore]>,
    faults: &[Ms],
) -> Verdict {
    let Some(expected) = state.newest else {
        return Verdict::Present; // nothing was acknowledged
    };
    let found_id = found.and_then(|(v, _)| WriteId::parse(v));
    let uncertain = found_id.is_some_and(|f| state.uncertain.contains(&f));
    let present = if expected.tombstone {
        found.is_none() || uncertain
    } else {
        found_id == Some(expected.id) || uncertain || (found.is_none() && state.uncertain_delete)
    };
    if present {
        return Verdict::Present;
    }
    // A rebuild after the write may have rolled it back: one the load saw
    // (a later epoch), or one reported too close to the end for the load
    // to see it.
    let rebuild = restores.and_then(|r| r.iter().find(|r| r.at >= expected.at));
    if restores.is_some() && (expected.epoch < ledger.epoch() || rebuild.is_some()) {
        // The revision the cluster went back to: the backup of the first
        // rebuild after the write, else where the next epoch's revisions began.
        let restored = rebuild
            .map(|r| r.backup_revision)
            .unwrap_or_else(|| ledger.floor(expected.epoch + 1));
        if expected.revision > restored {
            let before_loss = rebuild.map(|r| {
                loss_start(r, restores.unwrap_or_default(), faults).saturating_sub(expected.at)
            });
            return Verdict::RolledBack {
                expected,
                before_loss,
            };
        }
    }
    let found = match (found, found_id) {
        (None, _) => "the key is absent".to_string(),
        (Some((_, rev)), Some(id)) if expected.tombstone => {
            format!("{id} (revision {rev}) although the key was deleted")
        }
        (Some((_, rev)), Some(id)) => format!("{id} (revision {rev})"),
        (Some((v, rev)), None) => format!(
            "a value the load never wrote ({:?}, revision {rev})",
            String::from_utf8_lossy(&v[..v.len().min(32)])
        ),
    };
    Verdict::Lost { expected, found }
}

/// The outcome of the final read-back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Keys read back.
    pub keys: usize,
    /// Keys whose newest acknowledged write is missing.
    pub lost: usize,
    /// Keys rolled back by a restore (accepted).
    pub rolled_back: usize,
    /// The loss window: the longest time between a rolled-back write's
    /// acknowledgement and the start of the loss (the fault) that rolled
    /// it back.
    pub loss_window: Option<Ms>,
    /// One violation per lost key.
    pub violations: Vec<Violation>,
}

/// Judges every key of the ledger; `read(key)` gives its final value,
/// `faults` are the times faults were injected (for the loss window).
pub fn check<'a>(
    ledger: &Ledger,
    mut read: impl FnMut(u32) -> Option<(&'a [u8], i64)>,
    restores: Option<&[Restore]>,
    faults: &[Ms],
    at: Ms,
) -> Outcome {
    let mut out = Outcome::default();
    for (key, state) in ledger.keys() {
        out.keys += 1;
        match judge(state, read(key), ledger, restores, faults) {
            Verdict::Present => {}
            Verdict::RolledBack { before_loss, .. } => {
                out.rolled_back += 1;
                out.loss_window = out.loss_window.max(before_loss);
            }
            Verdict::Lost { expected, found } => {
                out.lost += 1;
                out.violations.push(Violation::new(
                    at,
                    Check::LostWrites,
                    format!(
                        "{}: acknowledged {} (revision {}, acknowledged at {}) is lost; found {found}",
                        key_name(key),
                        if expected.tombstone {
                            "delete".to_string()
                        } else {
                            format!("write {}", expected.id)
                        },
                        expected.revision,
                        crate::history::rfc3339(expected.at)
                    ),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn id(writer: u32, seq: u64) -> WriteId {
        WriteId { writer, seq }
    }

    fn run(ledger: &Ledger, finals: &HashMap<u32, (Vec<u8>, i64)>, rollback: bool) -> Outcome {
        run_with(ledger, finals, rollback.then_some(&[][..]))
    }

    fn run_with(
        ledger: &Ledger,
        finals: &HashMap<u32, (Vec<u8>, i64)>,
        restores: Option<&[Restore]>,
    ) -> Outcome {
        run_faults(ledger, finals, restores, &[])
    }

    fn run_faults(
        ledger: &Ledger,
        finals: &HashMap<u32, (Vec<u8>, i64)>,
        restores: Option<&[Restore]>,
        faults: &[Ms],
    ) -> Outcome {
        check(
            ledger,
            |k| finals.get(&k).map(|(v, r)| (v.as_slice(), *r)),
            restores,
            faults,
            99,
        )
    }

    #[test]
    fn the_newest_acknowledged_write_must_be_there() {
        let mut l = Ledger::new();
        l.ack(1, id(0, 1), 10, 1);
        l.ack(1, id(0, 2), 12, 2);
        l.ack(2, id(1, 1), 11, 1);
        let mut finals = HashMap::new();
        finals.insert(1, (id(0, 2).value(32).into_bytes(), 12));
        finals.insert(2, (id(1, 1).value(32).into_bytes(), 11));
        assert_eq!(run(&l, &finals, false).lost, 0);

        // Key 1 went back to its older write: a lost write.
        finals.insert(1, (id(0, 1).value(32).into_bytes(), 10));
        let o = run(&l, &finals, false);
        assert_eq!(o.lost, 1);
        assert_eq!(o.violations[0].check, Check::LostWrites);
        assert!(
            o.violations[0].message.contains("w0#2"),
            "{}",
            o.violations[0].message
        );

        // Key 2 vanished.
        finals.remove(&2);
        let o = run(&l, &finals, false);
        assert_eq!(o.lost, 2);
        assert!(o.violations.iter().any(|v| v.message.contains("absent")));
    }

    #[test]
    fn an_uncertain_later_write_may_win() {
        let mut l = Ledger::new();
        l.ack(1, id(0, 1), 10, 1);
        l.uncertain(1, id(0, 2));
        let mut finals = HashMap::new();
        finals.insert(1, (id(0, 2).value(32).into_bytes(), 13));
        assert_eq!(run(&l, &finals, false).lost, 0);
        finals.insert(1, (b"garbage".to_vec(), 13));
        let o = run(&l, &finals, false);
        assert!(o.violations[0].message.contains("never wrote"));
    }

    #[test]
    fn an_acknowledged_delete_must_leave_the_key_absent() {
        let mut l = Ledger::new();
        l.ack(1, id(0, 1), 10, 1);
        l.ack_delete(1, id(0, 2), 11, 2);
        let mut finals = HashMap::new();
        assert_eq!(run(&l, &finals, false).lost, 0);
        finals.insert(1, (id(0, 1).value(32).into_bytes(), 10));
        let o = run(&l, &finals, false);
        assert_eq!(o.lost, 1);
        assert!(
            o.violations[0].message.contains("acknowledged delete"),
            "{o:?}"
        );
        // A delete whose outcome is unknown may have removed a value.
        let mut l = Ledger::new();
        l.ack(2, id(0, 1), 10, 1);
        l.uncertain_delete(2);
        assert_eq!(run(&l, &HashMap::new(), false).lost, 0);
    }

    #[test]
    fn a_restore_rolls_back_only_what_came_after_the_backup() {
        let mut l = Ledger::new();
        l.ack(1, id(0, 1), 10, 1); // in the backup (restored to revision 15)
        l.ack(2, id(0, 2), 20, 2); // after the backup
        l.rollback(15);
        let finals = HashMap::new(); // both missing
        let strict = run(&l, &finals, false);
        assert_eq!(strict.lost, 2);
        let o = run(&l, &finals, true);
        assert_eq!(o.rolled_back, 1, "the write after the backup is excused");
        assert_eq!(o.loss_window, None, "no rebuild reported: no window known");
        assert_eq!(o.lost, 1, "the write before the backup must survive");
        assert!(o.violations[0].message.contains("soak/k000001"));
    }

    #[test]
    fn the_operators_backup_revision_decides_what_was_rolled_back() {
        // Backup at revision 19; new writes after the restore reuse 20, 21...
        let mut l = Ledger::new();
        l.ack(1, id(0, 1), 19, 1); // in the backup
        l.ack(2, id(0, 2), 20, 2); // just after it
        l.rollback(25);
        let finals = HashMap::new();
        let restores = [Restore {
            at: 5,
            backup_revision: 19,
        }];
        let o = run_with(&l, &finals, Some(&restores));
        assert_eq!((o.rolled_back, o.lost), (1, 1), "{o:?}");
        assert_eq!(
            o.loss_window,
            Some(3),
            "acknowledged at 2, rebuilt at 5, no fault known: up to the rebuild"
        );
        assert!(o.violations[0].message.contains("soak/k000001"));
    }

    #[test]
    fn a_rebuild_reported_at_the_very_end_rolls_back_too() {
        // The load stopped before it saw the rebuilt cluster: no new epoch,
        // but the operator reported the rebuild after the write.
        let mut l = Ledger::new();
        l.ack(1, id(0, 1), 19, 1); // in the backup
        l.ack(2, id(0, 2), 20, 2); // after it
        let restores = [Restore {
            at: 5,
            backup_revision: 19,
        }];
        let o = run_with(&l, &HashMap::new(), Some(&restores));
        assert_eq!(
            (o.rolled_back, o.lost, o.loss_window),
            (1, 1, Some(3)),
            "{o:?}"
        );
    }

    #[test]
    fn the_loss_window_ends_where_the_fault_began() {
        // Writes acknowledged at 1000 (in the backup), 9000 and 9600 (after
        // it); the majority destroyed at 10000, rebuilt at 22000.
        let mut l = Ledger::new();
        l.ack(1, id(0, 1), 19, 1_000);
        l.ack(2, id(0, 2), 20, 9_000);
        l.ack(3, id(0, 3), 21, 9_600);
        let restores = [Restore {
            at: 22_000,
            backup_revision: 19,
        }];
        let mut finals = HashMap::new();
        finals.insert(1, (id(0, 1).value(32).into_bytes(), 19));
        // An earlier fault (healed) and one after the rebuild change nothing.
        let faults = [4_000, 10_000, 30_000];
        let o = run_faults(&l, &finals, Some(&restores), &faults);
        assert_eq!((o.rolled_back, o.lost), (2, 0), "{o:?}");
        assert_eq!(
            o.loss_window,
            Some(1_000),
            "the oldest rolled-back write was acknowledged 1 s before the fault, 13 s before the rebuild"
        );
        // Without the fault log the rebuild bounds it: never shorter.
        let o = run_faults(&l, &finals, Some(&restores), &[]);
        assert_eq!(o.loss_window, Some(13_000));
    }

    #[test]
    fn each_rebuild_is_measured_from_its_own_fault() {
        // Two losses: faults at 10000 and 40000, rebuilds at 20000 and
        // 50000. A write acknowledged just after the second fault began
        // (still in flight when the members died) has a window of 0.
        let mut l = Ledger::new();
        l.ack(1, id(0, 1), 30, 9_500); // rolled back by the first rebuild
        l.rollback(25);
        l.ack(2, id(0, 2), 40, 39_000); // rolled back by the second
        l.ack(3, id(0, 3), 41, 40_050); // acknowledged after the fault began
        let restores = [
            Restore {
                at: 20_000,
                backup_revision: 25,
            },
            Restore {
                at: 50_000,
                backup_revision: 35,
            },
        ];
        let faults = [10_000, 40_000];
        let v = |key: u32| {
            let (k, state) = l.keys().find(|(k, _)| *k == key).expect("key");
            assert_eq!(k, key);
            judge(state, None, &l, Some(&restores), &faults)
        };
        let window = |verdict: Verdict| match verdict {
            Verdict::RolledBack { before_loss, .. } => before_loss,
            other => panic!("not rolled back: {other:?}"),
        };
        assert_eq!(window(v(1)), Some(500));
        assert_eq!(window(v(2)), Some(1_000));
        assert_eq!(window(v(3)), Some(0));
        // The second rebuild's loss is not the first fault's, even when
        // the fault log lacks the second: then the rebuild bounds it.
        assert_eq!(loss_start(&restores[1], &restores, &[10_000]), 50_000);
        assert_eq!(loss_start(&restores[0], &restores, &[10_000]), 10_000);
    }
}
