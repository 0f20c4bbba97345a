//! The linearizability search of one key's history: Wing & Gong's
//! algorithm with Lowe's memoisation, as porcupine implements it
//! (`checkSingle` in anishathalye/porcupine's checker.go): the history as a
//! doubly linked list of call and return entries in time order; at a call,
//! try to linearize the operation now (the model accepts it and the pair
//! (operations linearized, state) was not seen before), lift it out of the
//! list and start again from the head; at a return, the operation whose
//! return it is was not linearized in time: undo the last choice. Open
//! operations (unknown outcome) have no return entry: they may take effect
//! any time after their call, or never. The search ends when every
//! operation with a return is linearized.
//!
//! Bounded: past its deadline the search gives up and says so.

use std::collections::HashSet;
use std::time::Instant;

use super::model::{Op, State, step};

/// How a search ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A linearization exists (the order of the operations it linearized).
    Linearizable(Vec<usize>),
    /// None exists. `longest`: the longest sequence of operations the
    /// search could linearize; `state` the key after it.
    Violation {
        /// Operation indices, in linearization order.
        longest: Vec<usize>,
        /// The state after them.
        state: State,
    },
    /// The deadline passed first.
    Unknown,
}

impl Outcome {
    /// Whether it is a violation.
    pub fn is_violation(&self) -> bool {
        matches!(self, Outcome::Violation { .. })
    }
}

const NIL: usize = usize::MAX;

/// The list: entries 0..n are calls (entry i = call of op i), n..2n returns
/// (entry n+i = return of op i, present only for known ops), 2n the head.
struct List {
    next: Vec<usize>,
    prev: Vec<usize>,
    n: usize,
}

impl List {
    fn new(ops: &[Op]) -> List {
        let n = ops.len();
        let mut entries: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * n);
        for (i, op) in ops.iter().enumerate() {
            entries.push((op.call, false, i));
            if op.known() {
                entries.push((op.ret, true, n + i));
            }
        }
        // By time; at equal times calls first (the operations overlap).
        entries.sort_unstable();
        let head = 2 * n;
        let mut next = vec![NIL; 2 * n + 1];
        let mut prev = vec![NIL; 2 * n + 1];
        let mut last = head;
        for &(_, _, e) in &entries {
            next[last] = e;
            prev[e] = last;
            last = e;
        }
        List { next, prev, n }
    }

    fn head(&self) -> usize {
        2 * self.n
    }

    fn unlink(&mut self, e: usize) {
        let (p, x) = (self.prev[e], self.next[e]);
        self.next[p] = x;
        if x != NIL {
            self.prev[x] = p;
        }
    }

    fn relink(&mut self, e: usize) {
        let (p, x) = (self.prev[e], self.next[e]);
        self.next[p] = e;
        if x != NIL {
            self.prev[x] = e;
        }
    }

    /// Takes op `i` (its call and, if known, its return) out of the list.
    fn lift(&mut self, i: usize, known: bool) {
        self.unlink(i);
        if known {
            self.unlink(self.n + i);
        }
    }

    /// Puts it back (in the reverse order of [`List::lift`]).
    fn unlift(&mut self, i: usize, known: bool) {
        if known {
            self.relink(self.n + i);
        }
        self.relink(i);
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Seen {
    linearized: Box<[u64]>,
    state: State,
}

/// Searches for a linearization of `ops` (one key's operations) from the
/// key's `initial` state, giving up at `deadline`.
pub fn search(ops: &[Op], initial: State, deadline: Instant) -> Outcome {
    let n = ops.len();
    let mut list = List::new(ops);
    let head = list.head();
    let mut bits = vec![0u64; n.div_ceil(64)];
    let mut seen: HashSet<Seen> = HashSet::new();
    let mut calls: Vec<(usize, State)> = Vec::new();
    let mut state = initial;
    let mut left = ops.iter().filter(|o| o.known()).count();
    let mut longest: Vec<usize> = Vec::new();
    let mut longest_state = initial;
    let mut cur = list.next[head];
    let mut steps: u64 = 0;
    while left > 0 {
        steps += 1;
        if steps.is_multiple_of(4096) && Instant::now() >= deadline {
            return Outcome::Unknown;
        }
        if cur != NIL && cur < n {
            let i = cur;
            if let Some(next_state) = step(&state, &ops[i]) {
                bits[i / 64] |= 1 << (i % 64);
                let fresh = seen.insert(Seen {
                    linearized: bits.clone().into_boxed_slice(),
                    state: next_state,
                });
                if fresh {
                    calls.push((i, state));
                    state = next_state;
                    let known = ops[i].known();
                    list.lift(i, known);
                    if known {
                        left -= 1;
                    }
                    if calls.len() > longest.len() {
                        longest = calls.iter().map(|c| c.0).collect();
                        longest_state = state;
                    }
                    cur = list.next[head];
                    continue;
                }
                bits[i / 64] &= !(1 << (i % 64));
            }
            cur = list.next[i];
            continue;
        }
        // A return of an operation not linearized (or, defensively, the end
        // of the list): undo the last choice and try the next one.
        let Some((i, before)) = calls.pop() else {
            return Outcome::Violation {
                longest,
                state: longest_state,
            };
        };
        state = before;
        bits[i / 64] &= !(1 << (i % 64));
        let known = ops[i].known();
        list.unlift(i, known);
        if known {
            left += 1;
        }
        cur = list.next[i];
    }
    Outcome::Linearizable(calls.into_iter().map(|c| c.0).collect())
}
