//! The sequential model of one etcd key, with the revision as an extra
//! constraint: etcd keys are independent registers, except that every
//! change takes the next revision of one store-wide counter. So the model of
//! a key holds its value and mod revision, and the highest revision any
//! operation linearized on it has observed (`floor`): a later change must
//! take a higher revision, a later read must be served at one at least as
//! high.
//!
//! A write whose outcome is unknown may take effect at any point after it
//! was invoked, or never; when it does its revision is unknown, only above
//! the floor ([`Rev::Above`]), until a read pins it.

use super::Value;
use crate::ops::Us;

/// A mod revision as the model knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rev {
    /// Exactly this.
    Known(i64),
    /// Some revision above this one (a write whose answer never came).
    Above(i64),
}

impl Rev {
    /// Whether the revision may be `r`.
    pub fn may_be(self, r: i64) -> bool {
        match self {
            Rev::Known(k) => k == r,
            Rev::Above(lo) => r > lo,
        }
    }

    /// Whether the revision may differ from `r`.
    pub fn may_differ(self, r: i64) -> bool {
        match self {
            Rev::Known(k) => k != r,
            Rev::Above(_) => true,
        }
    }
}

/// The state of one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct State {
    /// The value and its mod revision; `None`: the key does not exist.
    pub value: Option<(Value, Rev)>,
    /// The highest revision an operation linearized so far has observed.
    pub floor: i64,
}

/// What an operation asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// Read the key.
    Get,
    /// Write a value.
    Put(Value),
    /// Write a value if the key's mod revision is `expect` (0: absent).
    Cas {
        /// The mod revision compared against.
        expect: i64,
        /// The value written when it matches.
        value: Value,
    },
    /// Delete the key.
    Delete,
}

impl Input {
    /// The value this operation writes, if any.
    pub fn written(self) -> Option<Value> {
        match self {
            Input::Put(v) | Input::Cas { value: v, .. } => Some(v),
            _ => None,
        }
    }
}

/// What came back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// A read: the value and mod revision found (`None`: absent), served
    /// at revision `rev`.
    Read {
        /// What was found.
        found: Option<(Value, i64)>,
        /// The response's revision.
        rev: i64,
    },
    /// A write that changed the key at revision `rev` (put, a cas that
    /// succeeded, a delete that deleted the key).
    Wrote {
        /// The revision of the change.
        rev: i64,
    },
    /// A delete of a key that did not exist (no change), at revision `rev`.
    DeletedNothing {
        /// The response's revision.
        rev: i64,
    },
    /// A cas whose comparison failed; it read the key instead.
    NotSwapped {
        /// What was found.
        found: Option<(Value, i64)>,
        /// The response's revision.
        rev: i64,
    },
    /// No answer: a write that may or may not have taken effect.
    Unknown,
}

/// One operation on one key, times in µs; `ret` is `Us::MAX` when the
/// operation has no known completion (unknown outcome).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    /// Its id in the history file.
    pub id: u64,
    /// The client session.
    pub client: u32,
    /// When it was invoked.
    pub call: Us,
    /// When it completed (`Us::MAX`: open).
    pub ret: Us,
    /// What it asked.
    pub input: Input,
    /// What came back.
    pub output: Output,
    /// The client never learned the outcome (its `output` may have been
    /// learned since, from a read or a watch that saw the value).
    pub unknown: bool,
}

impl Op {
    /// Whether it must be linearized (it completed with a known result).
    pub fn known(&self) -> bool {
        self.ret != Us::MAX
    }

    /// The revision the answer carries, if any.
    pub fn rev(&self) -> Option<i64> {
        match self.output {
            Output::Read { rev, .. }
            | Output::Wrote { rev }
            | Output::DeletedNothing { rev }
            | Output::NotSwapped { rev, .. } => Some(rev),
            Output::Unknown => None,
        }
    }

    /// Whether the answer says it changed the key.
    pub fn changed(&self) -> bool {
        matches!(self.output, Output::Wrote { .. })
    }
}

fn read(s: &State, found: Option<(Value, i64)>, rev: i64) -> Option<State> {
    if rev < s.floor {
        return None;
    }
    let value = match (s.value, found) {
        (None, None) => None,
        (Some((v, r)), Some((fv, fr))) if v == fv && r.may_be(fr) && fr <= rev => {
            Some((v, Rev::Known(fr)))
        }
        _ => return None,
    };
    Some(State { value, floor: rev })
}

/// The mod revision a compare sees: 0 when the key is absent.
fn compare_may_match(s: &State, expect: i64) -> bool {
    match s.value {
        None => expect == 0,
        Some((_, r)) => r.may_be(expect),
    }
}

/// Applies `op` to `s`: the state after it, or `None` when the operation
/// cannot take effect here with the result it had (or, for an unknown
/// write, would change nothing here: leaving it out is the same).
pub fn step(s: &State, op: &Op) -> Option<State> {
    match (op.input, op.output) {
        (Input::Get, Output::Read { found, rev }) => read(s, found, rev),
        (Input::Put(v), Output::Wrote { rev }) if rev > s.floor => Some(State {
            value: Some((v, Rev::Known(rev))),
            floor: rev,
        }),
        (Input::Cas { expect, value }, Output::Wrote { rev })
            if rev > s.floor && compare_may_match(s, expect) =>
        {
            Some(State {
                value: Some((value, Rev::Known(rev))),
                floor: rev,
            })
        }
        (Input::Cas { expect, .. }, Output::NotSwapped { found, rev }) => {
            let differs = match found {
                None => expect != 0,
                Some((_, m)) => m != expect,
            };
            // `read` checks that `found` is the key as the model has it, so
            // its mod revision (0: absent) is the one the compare saw.
            if differs { read(s, found, rev) } else { None }
        }
        (Input::Delete, Output::Wrote { rev }) if rev > s.floor && s.value.is_some() => {
            Some(State {
                value: None,
                floor: rev,
            })
        }
        (Input::Delete, Output::DeletedNothing { rev }) if s.value.is_none() => read(s, None, rev),
        (Input::Put(v), Output::Unknown) => Some(State {
            value: Some((v, Rev::Above(s.floor))),
            floor: s.floor,
        }),
        (Input::Cas { expect, value }, Output::Unknown) if compare_may_match(s, expect) => {
            Some(State {
                value: Some((value, Rev::Above(s.floor))),
                floor: s.floor,
            })
        }
        (Input::Delete, Output::Unknown) if s.value.is_some() => Some(State {
            value: None,
            floor: s.floor,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(input: Input, output: Output) -> Op {
        Op {
            id: 0,
            client: 0,
            call: 0,
            ret: 1,
            input,
            output,
            unknown: false,
        }
    }

    #[test]
    fn the_revision_constrains_writes_and_reads() {
        let s = State::default();
        let s = step(&s, &op(Input::Put(1), Output::Wrote { rev: 10 })).expect("put");
        assert_eq!(s.value, Some((1, Rev::Known(10))));
        assert!(
            step(&s, &op(Input::Put(2), Output::Wrote { rev: 9 })).is_none(),
            "a later write must take a higher revision"
        );
        let read = |found, rev| op(Input::Get, Output::Read { found, rev });
        assert!(step(&s, &read(Some((1, 10)), 12)).is_some());
        assert!(
            step(&s, &read(Some((1, 10)), 9)).is_none(),
            "served before the write"
        );
        assert!(
            step(&s, &read(Some((1, 11)), 12)).is_none(),
            "wrong mod revision"
        );
        assert!(step(&s, &read(None, 12)).is_none(), "absent");
        let s2 = step(&s, &read(Some((1, 10)), 15)).expect("read");
        assert!(
            step(&s2, &op(Input::Put(2), Output::Wrote { rev: 14 })).is_none(),
            "a write after a read served at 15 takes a revision above 15"
        );
    }

    #[test]
    fn cas_compares_the_mod_revision_and_absent_is_zero() {
        let empty = State::default();
        let cas = |expect, out| op(Input::Cas { expect, value: 7 }, out);
        assert!(step(&empty, &cas(0, Output::Wrote { rev: 3 })).is_some());
        assert!(step(&empty, &cas(2, Output::Wrote { rev: 3 })).is_none());
        let s = step(&empty, &op(Input::Put(1), Output::Wrote { rev: 5 })).expect("put");
        assert!(step(&s, &cas(5, Output::Wrote { rev: 6 })).is_some());
        assert!(step(&s, &cas(4, Output::Wrote { rev: 6 })).is_none());
        let failed = |expect, found| cas(expect, Output::NotSwapped { found, rev: 6 });
        assert!(step(&s, &failed(4, Some((1, 5)))).is_some());
        assert!(step(&s, &failed(5, Some((1, 5)))).is_none(), "it matched");
        assert!(step(&empty, &failed(0, None)).is_none(), "absent matches 0");
        assert!(step(&empty, &failed(3, None)).is_some());
    }

    #[test]
    fn unknown_writes_take_effect_with_a_revision_above_the_floor() {
        let s = step(
            &State::default(),
            &op(Input::Put(1), Output::Wrote { rev: 5 }),
        )
        .expect("put");
        let mut u = op(Input::Put(2), Output::Unknown);
        u.ret = Us::MAX;
        let s = step(&s, &u).expect("applied");
        assert_eq!(s.value, Some((2, Rev::Above(5))));
        let read = |m| {
            op(
                Input::Get,
                Output::Read {
                    found: Some((2, m)),
                    rev: 9,
                },
            )
        };
        assert!(step(&s, &read(5)).is_none());
        assert_eq!(
            step(&s, &read(6)).map(|s| s.value),
            Some(Some((2, Rev::Known(6))))
        );
        let mut del = op(Input::Delete, Output::Unknown);
        del.ret = Us::MAX;
        assert!(
            step(&State::default(), &del).is_none(),
            "a no-op is left out"
        );
        assert_eq!(step(&s, &del).map(|s| s.value), Some(None));
    }
}
