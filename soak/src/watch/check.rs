//! The watch guarantees (etcd's api_guarantees, as its robustness tests
//! check them), over each watcher's trace:
//!
//! * ordered and unique: revisions strictly increase (one revision may
//!   carry several keys only in one transaction, which the load never
//!   sends, so a repeated revision is a duplicate);
//! * reliable and resumable: from the first revision it covers to the end
//!   revision, every revision has an event (the watchers see the whole key
//!   space, and every revision after the store's initial 1 is a change),
//!   across every resumption;
//! * events match the history: a put or delete of a load key at revision R
//!   is the write acknowledged with R, or a write whose outcome was
//!   unknown (with that key and value); and every acknowledged write in the
//!   range has its event;
//! * the final state equals the replay: a watcher from revision 1 replays
//!   to exactly the key space read back at the end; any watcher's last
//!   event of a key is that key's final value.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::{Event, FOREIGN_VALUE, OTHER_KEY, Start, Trace};
use crate::lin::History;
use crate::load::ledger::key_name;
use crate::ops::{Kind, Record, Status, Us};

/// Most violations listed per watcher (the rest are counted).
const MOST: usize = 20;

/// The writes of the history, by revision.
#[derive(Debug, Default)]
pub struct Writes {
    /// Acknowledged: revision -> (key, value; `None` for a delete).
    acked: HashMap<i64, (u32, Option<u64>)>,
    /// Writes whose outcome was unknown: (key, value; `None` for a delete).
    unknown: HashSet<(u32, Option<u64>)>,
}

impl Writes {
    /// Takes in one history record.
    pub fn add(&mut self, r: &Record) {
        if !r.op.writes() {
            return;
        }
        let key = super::key_number(r.key.as_bytes());
        if key == OTHER_KEY {
            return;
        }
        let value = match r.op {
            Kind::Delete => None,
            _ => Some(
                r.value
                    .as_deref()
                    .and_then(crate::lin::parse_write)
                    .unwrap_or(FOREIGN_VALUE),
            ),
        };
        if r.acked_write() {
            if let Some(rev) = r.rev {
                self.acked.insert(rev, (key, value));
            }
        } else if r.status == Status::Unknown {
            self.unknown.insert((key, value));
        }
    }
}

/// One watcher's figures.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Watched {
    /// Its name.
    pub name: String,
    /// Where it started.
    pub start: Start,
    /// The revisions checked: from, to.
    pub range: (i64, i64),
    /// Events received.
    pub events: usize,
    /// Times it resumed after its stream broke.
    pub resumes: usize,
    /// Violations found in it.
    pub violations: usize,
}

/// One broken guarantee.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// When (unix µs): the event's arrival, or the end.
    pub at: Us,
    /// The watcher.
    pub watcher: String,
    /// In words.
    pub message: String,
}

/// The result.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Per watcher.
    pub watchers: Vec<Watched>,
    /// Broken guarantees (at most 20 per watcher listed).
    pub problems: Vec<Problem>,
    /// Broken guarantees in all.
    pub violations: usize,
}

/// The key space as read back at the end: key -> (value number, mod
/// revision).
pub type FinalState = HashMap<u32, (u64, i64)>;

fn show(key: u32, value: Option<u64>, h: &History) -> String {
    let k = if key == OTHER_KEY {
        "another key".to_string()
    } else {
        key_name(key)
    };
    match value {
        None => format!("delete {k}"),
        Some(FOREIGN_VALUE) => format!("put {k} = a value the load never wrote"),
        Some(v) => format!("put {k} = {}", h.value_name(v)),
    }
}

/// Checks one trace up to revision `to` (the revision of the final
/// read-back); `finals` is the key space at `to` (`None`: not known, e.g.
/// after a restore).
pub fn check_trace(
    t: &Trace,
    to: i64,
    end: Us,
    writes: &Writes,
    finals: Option<&FinalState>,
    names: &History,
) -> (Watched, Vec<Problem>, usize) {
    let mut problems = Vec::new();
    let mut count = 0usize;
    let mut say = |at: Us, message: String| {
        count += 1;
        if problems.len() < MOST {
            problems.push(Problem {
                at,
                watcher: t.name.clone(),
                message,
            });
        }
    };
    let from = t.from;
    if from == 0 {
        say(end, "the watch was never created".into());
    }
    let mut prev: Option<&Event> = None;
    // A new cluster's store starts at revision 1 with nothing in it: the
    // first change is revision 2.
    let mut next = from.max(2);
    let mut replay: HashMap<u32, Option<(u64, i64)>> = HashMap::new();
    for e in t.events.iter().filter(|e| e.rev <= to) {
        if let Some(p) = prev {
            if e.rev < p.rev {
                say(
                    e.at,
                    format!("revision {} arrived after {}: out of order", e.rev, p.rev),
                );
            } else if e.rev == p.rev && (e.key == p.key || e.key == OTHER_KEY) {
                say(
                    e.at,
                    format!("the event at revision {} arrived twice", e.rev),
                );
            }
        }
        if from > 0 && e.rev < from {
            say(
                e.at,
                format!("revision {} is before the watch's start {from}", e.rev),
            );
        }
        if e.rev > next && from > 0 {
            let missing: Vec<i64> = (next..e.rev).collect();
            let acked = missing
                .iter()
                .filter(|r| writes.acked.contains_key(r))
                .count();
            say(
                e.at,
                format!(
                    "revisions {next}..{} are missing ({} acknowledged writes among them)",
                    e.rev - 1,
                    acked
                ),
            );
        }
        next = next.max(e.rev + 1);
        prev = Some(e);
        if e.key == OTHER_KEY {
            continue;
        }
        match writes.acked.get(&e.rev) {
            Some(&(k, v)) if (k, v) == (e.key, e.value) => {}
            Some(&(k, v)) => say(
                e.at,
                format!(
                    "the event at revision {} is {}, but the history acknowledged {} at that revision",
                    e.rev,
                    show(e.key, e.value, names),
                    show(k, v, names)
                ),
            ),
            None if writes.unknown.contains(&(e.key, e.value)) => {}
            None => say(
                e.at,
                format!(
                    "the event at revision {} ({}) matches no write of the history",
                    e.rev,
                    show(e.key, e.value, names)
                ),
            ),
        }
        replay.insert(e.key, e.value.map(|v| (v, e.rev)));
    }
    if from > 0 && next <= to {
        say(
            end,
            format!(
                "revisions {next}..{to} never arrived (the watch stopped at {})",
                next - 1
            ),
        );
    }
    if let Some(finals) = finals {
        let keys: Vec<u32> = if t.start == Start::First && from <= 2 {
            let mut k: Vec<u32> = finals.keys().chain(replay.keys()).copied().collect();
            k.sort_unstable();
            k.dedup();
            k
        } else {
            let mut k: Vec<u32> = replay.keys().copied().collect();
            k.sort_unstable();
            k
        };
        let mut wrong = 0usize;
        for k in keys {
            let replayed = replay.get(&k).copied().flatten();
            let actual = finals.get(&k).copied();
            if replayed != actual {
                wrong += 1;
                if wrong <= 3 {
                    let f = |x: Option<(u64, i64)>| match x {
                        None => "absent".to_string(),
                        Some((v, r)) => format!("{}@{r}", names.value_name(v)),
                    };
                    say(
                        end,
                        format!(
                            "{}: the watch replays to {}, the key space holds {}",
                            key_name(k),
                            f(replayed),
                            f(actual)
                        ),
                    );
                }
            }
        }
        if wrong > 3 {
            say(
                end,
                format!("... {} more keys replay differently", wrong - 3),
            );
        }
    }
    (
        Watched {
            name: t.name.clone(),
            start: t.start,
            range: (from, to),
            events: t.events.len(),
            resumes: t.resumes.len(),
            violations: count,
        },
        problems,
        count,
    )
}

/// Checks every trace.
pub fn check(
    traces: &[Trace],
    to: i64,
    end: Us,
    writes: &Writes,
    finals: Option<&FinalState>,
    names: &History,
) -> Report {
    let mut r = Report::default();
    for t in traces {
        let (w, p, n) = check_trace(t, to, end, writes, finals, names);
        r.watchers.push(w);
        r.problems.extend(p);
        r.violations += n;
    }
    r.problems.sort_by_key(|p| p.at);
    r
}

#[cfg(test)]
mod tests;
