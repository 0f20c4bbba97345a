//! The smallest failing sub-history of a key, for the report: the
//! operations a reader needs to see the violation, not the thousand around
//! it. Every step keeps the sub-history failing, and only takes steps that
//! cannot invent a violation the full history does not have:
//!
//! 1. cut at the earliest time T where the operations invoked by T already
//!    fail, operations still running at T made open (a write may or may not
//!    have taken effect; a read is dropped): linearizability is closed
//!    under such prefixes, so the prefix failing means the history fails;
//! 2. drop reads (they only constrain) in halving chunks, then one by one;
//! 3. drop a write when the rest still fails with that write made open
//!    (may or may not have happened, any time after its call): then the
//!    write was not what made the others fail; a write whose value a kept
//!    read returned is never dropped.
//!
//! Bounded by a deadline; whatever it reached by then is returned.

use std::time::Instant;

use super::model::{Op, Output, State};
use super::search::search;
use crate::ops::Us;

fn fails(ops: &[Op], deadline: Instant) -> bool {
    search(ops, State::default(), deadline).is_violation()
}

fn open(op: &Op) -> Op {
    Op {
        ret: Us::MAX,
        output: Output::Unknown,
        unknown: true,
        ..*op
    }
}

fn is_read(op: &Op) -> bool {
    op.known()
        && matches!(
            op.output,
            Output::Read { .. } | Output::NotSwapped { .. } | Output::DeletedNothing { .. }
        )
}

/// The operations invoked by `t`, those running at `t` made open.
fn prefix(ops: &[Op], t: Us) -> Vec<Op> {
    ops.iter()
        .filter(|o| o.call <= t)
        .filter_map(|o| {
            if o.ret <= t || !o.known() {
                Some(*o)
            } else if is_read(o) {
                None
            } else {
                Some(open(o))
            }
        })
        .collect()
}

fn read_values(ops: &[Op]) -> Vec<u64> {
    ops.iter()
        .filter_map(|o| match o.output {
            Output::Read { found, .. } | Output::NotSwapped { found, .. } => found.map(|f| f.0),
            _ => None,
        })
        .collect()
}

/// The smallest failing sub-history of `ops` (which must fail) found by
/// `deadline`, in call order.
pub fn smallest(ops: &[Op], deadline: Instant) -> Vec<Op> {
    let mut cur: Vec<Op> = ops.to_vec();
    cur.sort_by_key(|o| (o.call, o.id));
    // 1. The earliest failing prefix (failing prefixes are upward closed).
    let mut times: Vec<Us> = cur.iter().filter(|o| o.known()).map(|o| o.ret).collect();
    times.sort_unstable();
    times.dedup();
    let (mut lo, mut hi) = (0usize, times.len());
    while lo < hi && Instant::now() < deadline {
        let mid = (lo + hi) / 2;
        if fails(&prefix(&cur, times[mid]), deadline) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    if let Some(&t) = times.get(hi) {
        let p = prefix(&cur, t);
        if fails(&p, deadline) {
            cur = p;
        }
    }
    // 2. Reads, in halving chunks.
    let mut chunk = cur.len().div_ceil(2).max(1);
    loop {
        let mut i = 0;
        while i < cur.len() && Instant::now() < deadline {
            let reads: Vec<usize> = (i..cur.len().min(i + chunk))
                .filter(|&j| is_read(&cur[j]))
                .collect();
            if reads.is_empty() {
                i += chunk;
                continue;
            }
            let trial: Vec<Op> = cur
                .iter()
                .enumerate()
                .filter(|(j, _)| !reads.contains(j))
                .map(|(_, o)| *o)
                .collect();
            if fails(&trial, deadline) {
                cur = trial;
            } else {
                i += chunk;
            }
        }
        if chunk == 1 || Instant::now() >= deadline {
            break;
        }
        chunk = chunk.div_ceil(2);
    }
    // 3. Writes, one at a time.
    let mut i = 0;
    while i < cur.len() && Instant::now() < deadline {
        if is_read(&cur[i]) {
            i += 1;
            continue;
        }
        let needed = cur[i]
            .input
            .written()
            .is_some_and(|v| read_values(&cur).contains(&v));
        if !needed {
            let mut relaxed = cur.clone();
            relaxed[i] = open(&cur[i]);
            if fails(&relaxed, deadline) {
                cur.remove(i);
                continue;
            }
        }
        i += 1;
    }
    cur
}
