//! A history ready for checking: every operation parsed from its record
//! into the model's terms, grouped per key, names interned (values as
//! numbers), plus what was seen of each value (to settle unknown outcomes).

use std::collections::HashMap;

use serde::Serialize;

use super::model::{self, Input, Op, Output, State};
use super::{Shown, Value};
use crate::ops::{Kind, Record, Status, Us};

const FOREIGN: u64 = 1 << 63;

/// Why a record cannot be checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("operation {id}: {message}")]
pub struct Invalid {
    /// The record's id.
    pub id: u64,
    /// What is missing.
    pub message: String,
}

/// A history ready for checking: operations per key, names interned.
#[derive(Debug, Default)]
pub struct History {
    keys: Vec<String>,
    key_index: HashMap<String, u32>,
    clients: Vec<String>,
    client_index: HashMap<String, u32>,
    foreign: Vec<String>,
    foreign_index: HashMap<String, u64>,
    /// Per key, its operations.
    ops: Vec<Vec<Op>>,
    /// Per key: value -> (mod revision, earliest time it was seen).
    seen: Vec<HashMap<Value, (i64, Us)>>,
    /// Counts.
    pub counts: Counts,
}

/// What went into the check.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Operations read.
    pub ops: u64,
    /// Reads that got no answer (not checked).
    pub failed_reads: u64,
    /// Writes whose outcome was unknown.
    pub unknown_writes: u64,
    /// Of those, seen applied (by a read, a watch or the final read-back).
    pub seen_applied: u64,
    /// Of those, never applied (a watch saw every write and not these).
    pub never_applied: u64,
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        History::default()
    }

    fn key(&mut self, name: &str) -> u32 {
        if let Some(&k) = self.key_index.get(name) {
            return k;
        }
        let k = u32::try_from(self.keys.len()).unwrap_or(u32::MAX);
        self.keys.push(name.to_string());
        self.key_index.insert(name.to_string(), k);
        self.ops.push(Vec::new());
        self.seen.push(HashMap::new());
        k
    }

    /// The key's number, if it has operations.
    pub fn key_number(&self, name: &str) -> Option<u32> {
        self.key_index.get(name).copied()
    }

    fn client(&mut self, name: &str) -> u32 {
        if let Some(&c) = self.client_index.get(name) {
            return c;
        }
        let c = u32::try_from(self.clients.len()).unwrap_or(u32::MAX);
        self.clients.push(name.to_string());
        self.client_index.insert(name.to_string(), c);
        c
    }

    /// The value's number (`w3#45` or any other text).
    pub fn value(&mut self, text: &str) -> Value {
        if let Some(v) = parse_write(text) {
            return v;
        }
        if let Some(&v) = self.foreign_index.get(text) {
            return v;
        }
        let v = FOREIGN | self.foreign.len() as u64;
        self.foreign.push(text.to_string());
        self.foreign_index.insert(text.to_string(), v);
        v
    }

    /// The value's text.
    pub fn value_name(&self, v: Value) -> String {
        if v & FOREIGN != 0 {
            let i = usize::try_from(v & !FOREIGN).unwrap_or(usize::MAX);
            return self.foreign.get(i).cloned().unwrap_or_else(|| "?".into());
        }
        format!("w{}#{}", v >> 40, v & ((1 << 40) - 1))
    }

    /// Adds one record. Failed reads are counted, not kept.
    pub fn add(&mut self, r: &Record) -> Result<(), Invalid> {
        self.counts.ops += 1;
        let bad = |m: &str| Invalid {
            id: r.id,
            message: m.to_string(),
        };
        if r.status != Status::Ok && !r.op.writes() {
            self.counts.failed_reads += 1;
            return Ok(());
        }
        let key = self.key(&r.key);
        let client = self.client(&r.client);
        let mut value = || -> Result<Value, Invalid> {
            let text = r
                .value
                .as_deref()
                .ok_or_else(|| bad("a put or cas without a value"))?;
            Ok(self.value(text))
        };
        let input = match r.op {
            Kind::Get => Input::Get,
            Kind::Put => Input::Put(value()?),
            Kind::Cas => Input::Cas {
                expect: r
                    .expect_mod_rev
                    .ok_or_else(|| bad("a cas without expectModRev"))?,
                value: value()?,
            },
            Kind::Delete => Input::Delete,
        };
        let found = r.found.as_ref().map(|f| (self.value(&f.value), f.mod_rev));
        let (ret, output) = if r.status == Status::Ok {
            let rev = r
                .rev
                .ok_or_else(|| bad("an answered operation without rev"))?;
            let out = match r.op {
                Kind::Get => Output::Read { found, rev },
                Kind::Put => Output::Wrote { rev },
                Kind::Cas => match r.succeeded {
                    Some(true) => Output::Wrote { rev },
                    Some(false) => Output::NotSwapped { found, rev },
                    None => return Err(bad("an answered cas without succeeded")),
                },
                Kind::Delete => match r.deleted {
                    Some(0) => Output::DeletedNothing { rev },
                    Some(_) => Output::Wrote { rev },
                    None => return Err(bad("an answered delete without deleted")),
                },
            };
            if r.ret < r.call {
                return Err(bad("it returned before it was invoked"));
            }
            (r.ret, out)
        } else {
            self.counts.unknown_writes += 1;
            (Us::MAX, Output::Unknown)
        };
        if let Some((v, m)) = found {
            self.observe(key, v, m, r.ret);
        }
        self.ops[key as usize].push(Op {
            id: r.id,
            client,
            call: r.call,
            ret,
            input,
            output,
            unknown: r.status != Status::Ok,
        });
        Ok(())
    }

    /// Notes that `value` was seen on key number `key` with mod revision
    /// `rev` at `at` (a read, a watch event, the final read-back).
    pub fn observe(&mut self, key: u32, value: Value, rev: i64, at: Us) {
        if let Some(m) = self.seen.get_mut(key as usize) {
            let e = m.entry(value).or_insert((rev, at));
            e.1 = e.1.min(at);
        }
    }

    /// Uses what was seen: an unknown write whose value was seen took
    /// effect at the revision seen, before it was first seen. With
    /// `complete` (a watch from the first revision saw every change of the
    /// run) an unknown put or cas whose value was never seen did not take
    /// effect and is dropped.
    pub fn patch(&mut self, complete: bool) {
        for (ops, seen) in self.ops.iter_mut().zip(&self.seen) {
            ops.retain_mut(|op| {
                if op.output != Output::Unknown {
                    return true;
                }
                let Some(v) = op.input.written() else {
                    return true;
                };
                match seen.get(&v) {
                    Some(&(rev, at)) => {
                        op.output = Output::Wrote { rev };
                        op.ret = at.max(op.call);
                        self.counts.seen_applied += 1;
                        true
                    }
                    None if complete => {
                        self.counts.never_applied += 1;
                        false
                    }
                    None => true,
                }
            });
        }
    }

    /// Keys with operations.
    pub fn keys(&self) -> usize {
        self.keys.len()
    }

    /// The key's name.
    pub fn key_name(&self, k: u32) -> &str {
        self.keys.get(k as usize).map(String::as_str).unwrap_or("?")
    }

    /// The key's operations.
    pub fn key_ops(&self, k: u32) -> &[Op] {
        self.ops.get(k as usize).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The client's name.
    pub fn client_name(&self, c: u32) -> &str {
        self.clients
            .get(c as usize)
            .map(String::as_str)
            .unwrap_or("?")
    }

    /// Every operation of every key.
    pub fn all(&self) -> impl Iterator<Item = (u32, &Op)> {
        self.ops
            .iter()
            .enumerate()
            .flat_map(|(k, ops)| ops.iter().map(move |o| (k as u32, o)))
    }

    /// What an operation did, in a few words.
    pub fn describe(&self, op: &Op) -> String {
        let found = |f: Option<(Value, i64)>| match f {
            Some((v, m)) => format!("{}@{m}", self.value_name(v)),
            None => "absent".into(),
        };
        let ask = match op.input {
            Input::Get => "get".to_string(),
            Input::Put(v) => format!("put {}", self.value_name(v)),
            Input::Cas { expect, value } => {
                format!("cas {} if mod={expect}", self.value_name(value))
            }
            Input::Delete => "delete".into(),
        };
        let answer = match op.output {
            Output::Read { found: f, rev } => format!("{} (rev {rev})", found(f)),
            Output::Wrote { rev } if op.unknown => format!("unknown, seen applied at rev {rev}"),
            Output::Wrote { rev } => format!("ok rev {rev}"),
            Output::DeletedNothing { rev } => format!("deleted 0 (rev {rev})"),
            Output::NotSwapped { found: f, rev } => {
                format!("not swapped, {} (rev {rev})", found(f))
            }
            Output::Unknown => "unknown".into(),
        };
        format!("{ask} -> {answer}")
    }

    /// The key's state in words.
    pub fn describe_state(&self, s: &State) -> String {
        let v = match s.value {
            None => "absent".to_string(),
            Some((v, model::Rev::Known(r))) => format!("{}@{r}", self.value_name(v)),
            Some((v, model::Rev::Above(r))) => format!("{}@>{r}", self.value_name(v)),
        };
        format!("{v}, revision floor {}", s.floor)
    }
}

/// `w3#45` as a value number.
pub fn parse_write(text: &str) -> Option<Value> {
    let (w, s) = text.strip_prefix('w')?.split_once('#')?;
    let w: u64 = w.parse().ok()?;
    let s: u64 = s.parse().ok()?;
    (w < (1 << 23) && s < (1 << 40)).then_some((w << 40) | s)
}

impl History {
    /// Shows operations of key `k` by call time.
    pub fn show(&self, k: u32, ops: &[&Op]) -> Vec<Shown> {
        let mut v: Vec<Shown> = ops
            .iter()
            .map(|o| Shown {
                id: o.id,
                client: self.client_name(o.client).to_string(),
                key: self.key_name(k).to_string(),
                call: o.call,
                ret: o.known().then_some(o.ret),
                text: self.describe(o),
            })
            .collect();
        v.sort_by_key(|s| (s.call, s.id));
        v
    }
}
