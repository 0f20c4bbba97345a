//! The linearizability checker: is there one order of the history's
//! operations, consistent with when each was invoked and completed, in
//! which every result is what a single etcd would have answered?
//!
//! * etcd keys are independent registers, so the history is split per key
//!   (P-compositionality) and each key is searched on its own
//!   ([`search`], porcupine's algorithm), keys in parallel;
//! * with the revision as an extra constraint ([`model`]): a key's changes
//!   take increasing revisions, reads are served at a revision at least as
//!   high as everything linearized before them; and across keys
//!   ([`revisions`]): no revision is acknowledged to two writes, and an
//!   operation invoked after another completed never answers with a lower
//!   revision;
//! * a write whose outcome is unknown may take effect any time after its
//!   call, or never; once a read (or a watch) saw its value, it did, before
//!   that moment, at the revision seen ([`History::patch`]);
//! * bounded in time: keys not searched to the end are reported unknown,
//!   never passed;
//! * a violation comes with the smallest failing sub-history of its key
//!   ([`minimize`]) and a timeline ([`timeline`]).
//!
//! No crate on crates.io does this (the ones that exist check one object
//! without partitions, unknown outcomes or a time bound), hence our own.

pub mod generate;
mod history;
pub mod minimize;
pub mod model;
pub mod revisions;
pub mod search;
pub mod timeline;

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

pub use self::history::{Counts, History, Invalid, parse_write};
use self::model::{Op, State};
use self::search::Outcome as Search;
use crate::ops::Us;

/// A value, interned: `w3#45` is writer 3's 45th write; other values get
/// numbers with the top bit set.
pub type Value = u64;

/// Settings of a check.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Longest the whole check may take; keys not done by then are unknown.
    pub timeout: Duration,
    /// Longest spent shrinking each violation to its smallest sub-history.
    pub minimize: Duration,
    /// Worker threads (keys are checked in parallel).
    pub threads: usize,
    /// Most violations reported in full (the rest are counted).
    pub max_findings: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            timeout: Duration::from_secs(600),
            minimize: Duration::from_secs(5),
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            max_findings: 20,
        }
    }
}

/// What kind of violation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// No order of the key's operations explains their results.
    NotLinearizable,
    /// One revision acknowledged to two different writes.
    RevisionReused,
    /// An operation invoked after another completed answered with a lower
    /// revision.
    RevisionOrder,
}

/// One operation as shown in a finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Shown {
    /// Its id in history.jsonl.
    pub id: u64,
    /// The client.
    pub client: String,
    /// The key.
    pub key: String,
    /// Invoked (unix µs).
    pub call: Us,
    /// Completed (unix µs); `None`: unknown outcome.
    pub ret: Option<Us>,
    /// What it did.
    pub text: String,
}

/// One violation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What kind.
    pub kind: FindingKind,
    /// The key (for cross-key findings, the later operation's key).
    pub key: String,
    /// When: the call of the earliest operation shown.
    pub at: Us,
    /// In words.
    pub message: String,
    /// The smallest failing sub-history, by call time.
    pub ops: Vec<Shown>,
    /// Those operations on a time line (text).
    pub timeline: String,
}

/// The result of a check.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// What went in.
    pub counts: Counts,
    /// Keys checked.
    pub keys: usize,
    /// Keys whose search did not finish in time: neither passed nor failed.
    pub unknown_keys: Vec<String>,
    /// Violations found, at most `max_findings` in full.
    pub findings: Vec<Finding>,
    /// Violations found in all.
    pub violations: usize,
    /// Time the check took, ms.
    pub elapsed_ms: u64,
}

impl Report {
    /// No violation and nothing unknown.
    pub fn pass(&self) -> bool {
        self.violations == 0 && self.unknown_keys.is_empty()
    }
}

/// Checks the history.
pub fn check(h: &History, o: &Options) -> Report {
    let start = Instant::now();
    let deadline = start + o.timeout;
    let mut findings = revisions::check(h);
    let next = AtomicUsize::new(0);
    let results: Mutex<(Vec<Finding>, Vec<String>)> = Mutex::new((Vec::new(), Vec::new()));
    let threads = o.threads.clamp(1, h.keys().max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= h.keys() {
                        return;
                    }
                    let k = k as u32;
                    let ops = h.key_ops(k);
                    let r = match search::search(ops, State::default(), deadline) {
                        Search::Linearizable(_) => None,
                        Search::Unknown => Some(Err(h.key_name(k).to_string())),
                        Search::Violation { .. } => {
                            let budget = Instant::now() + o.minimize;
                            Some(Ok(explain(h, k, ops, budget)))
                        }
                    };
                    if let Some(r) = r {
                        let mut g = results.lock().unwrap_or_else(|e| e.into_inner());
                        match r {
                            Ok(f) => g.0.push(f),
                            Err(key) => g.1.push(key),
                        }
                    }
                }
            });
        }
    });
    let (found, mut unknown) = results.into_inner().unwrap_or_else(|e| e.into_inner());
    findings.extend(found);
    findings.sort_by_key(|f| f.at);
    unknown.sort();
    let violations = findings.len();
    findings.truncate(o.max_findings);
    Report {
        counts: h.counts.clone(),
        keys: h.keys(),
        unknown_keys: unknown,
        findings,
        violations,
        elapsed_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

/// A violation on key `k`: its smallest failing sub-history, where the
/// search got stuck, and a timeline.
fn explain(h: &History, k: u32, ops: &[Op], budget: Instant) -> Finding {
    let sub = minimize::smallest(ops, budget);
    let far = Instant::now() + Duration::from_secs(5);
    let stuck = match search::search(&sub, State::default(), far) {
        Search::Violation { longest, state } => {
            let done: std::collections::HashSet<usize> = longest.iter().copied().collect();
            // The operation that had to come next: the first return of one
            // not linearized, and what was pending then.
            let due = (0..sub.len())
                .filter(|i| !done.contains(i) && sub[*i].known())
                .min_by_key(|&i| sub[i].ret);
            let pending: Vec<String> = match due {
                Some(d) => (0..sub.len())
                    .filter(|i| !done.contains(i) && sub[*i].call <= sub[d].ret)
                    .take(4)
                    .map(|i| format!("[{}] {}", h.client_name(sub[i].client), h.describe(&sub[i])))
                    .collect(),
                None => Vec::new(),
            };
            format!(
                "after {} of them linearized (key then: {}), none of the next can be: {}",
                longest.len(),
                h.describe_state(&state),
                pending.join("; ")
            )
        }
        _ => "the smallest failing sub-history could not be re-checked in time".into(),
    };
    let refs: Vec<&Op> = sub.iter().collect();
    let shown = h.show(k, &refs);
    Finding {
        kind: FindingKind::NotLinearizable,
        key: h.key_name(k).to_string(),
        at: shown.first().map(|s| s.call).unwrap_or(0),
        message: format!(
            "{}: no order of its {} operations explains their results; the smallest failing \
             sub-history has {}: {stuck}",
            h.key_name(k),
            ops.len(),
            sub.len()
        ),
        timeline: timeline::render(&shown),
        ops: shown,
    }
}
