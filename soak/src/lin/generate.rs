//! Histories generated from a sequential etcd (one store, one revision
//! counter) with random concurrency: clients invoke operations on random
//! keys; each takes effect at a random moment between its call and its
//! return, in that order, against the store; some writes lose their answer
//! (their outcome is unknown: applied or not) and some reads fail. Such a
//! history is linearizable by construction: the property tests feed them
//! to the checker, and the benchmark times it on them.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::load::ledger::key_name;
use crate::ops::{Found, Kind, Record, Status, Us};

/// What to generate.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// Operations in all.
    pub ops: usize,
    /// Keys they spread over.
    pub keys: u32,
    /// Clients running at once (each one operation at a time).
    pub clients: u32,
    /// Share of writes whose answer is lost (0 to 1).
    pub unknown: f64,
    /// Longest an operation takes, µs (each takes 1 µs up to this).
    pub max_latency: u64,
    /// Seed.
    pub seed: u64,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            ops: 1000,
            keys: 10,
            clients: 8,
            unknown: 0.02,
            max_latency: 5_000,
            seed: 1,
        }
    }
}

#[derive(Debug)]
struct Pending {
    record: Record,
    key: u32,
    effect: Us,
    applies: bool,
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    // At equal times effects come before returns, returns before calls.
    Effect(usize),
    Return(usize),
    Call(u32),
}

/// Generates a linearizable history.
pub fn generate(spec: &Spec) -> Vec<Record> {
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let mut store: HashMap<u32, (String, i64)> = HashMap::new();
    let mut revision: i64 = 1;
    let mut seq: Vec<u64> = vec![0; spec.clients as usize];
    let mut known_mod: Vec<HashMap<u32, i64>> = vec![HashMap::new(); spec.clients as usize];
    let mut pending: Vec<Option<Pending>> = Vec::new();
    let mut queue: BinaryHeap<Reverse<(Us, Ev)>> = BinaryHeap::new();
    let mut out = Vec::with_capacity(spec.ops);
    let mut started = 0usize;
    let t0: Us = 1_700_000_000_000_000;
    for c in 0..spec.clients {
        queue.push(Reverse((t0 + rng.random_range(0..100), Ev::Call(c))));
    }
    while let Some(Reverse((now, ev))) = queue.pop() {
        match ev {
            Ev::Call(c) => {
                if started >= spec.ops {
                    continue;
                }
                started += 1;
                let key = rng.random_range(0..spec.keys.max(1));
                let roll: f64 = rng.random();
                let kind = if roll < 0.40 {
                    Kind::Get
                } else if roll < 0.80 {
                    Kind::Put
                } else if roll < 0.92 {
                    Kind::Cas
                } else {
                    Kind::Delete
                };
                let client = format!("c{c}");
                let mut r = Record::new(&client, kind, &key_name(key), now);
                if kind == Kind::Put || kind == Kind::Cas {
                    seq[c as usize] += 1;
                    r.value = Some(format!("w{c}#{}", seq[c as usize]));
                }
                if kind == Kind::Cas {
                    let guess = known_mod[c as usize].get(&key).copied().unwrap_or(0);
                    r.expect_mod_rev = Some(if rng.random_bool(0.8) {
                        guess
                    } else {
                        guess + 1
                    });
                }
                let took = rng.random_range(1..=spec.max_latency.max(1));
                let effect = now + rng.random_range(0..=took);
                r.ret = now + took;
                let lost = kind.writes() && rng.random_bool(spec.unknown.clamp(0.0, 1.0));
                let failed_read = !kind.writes() && rng.random_bool(spec.unknown.clamp(0.0, 1.0));
                let applies = !failed_read && (!lost || rng.random_bool(0.5));
                if lost {
                    r.status = Status::Unknown;
                    r.error = Some("timeout".into());
                } else if failed_read {
                    r.status = Status::Failed;
                    r.error = Some("timeout".into());
                } else {
                    r.status = Status::Ok;
                }
                let i = pending.len();
                let ret = r.ret;
                pending.push(Some(Pending {
                    record: r,
                    key,
                    effect,
                    applies,
                }));
                queue.push(Reverse((effect, Ev::Effect(i))));
                queue.push(Reverse((ret, Ev::Return(i))));
            }
            Ev::Effect(i) => {
                let Some(p) = pending.get_mut(i).and_then(Option::as_mut) else {
                    continue;
                };
                debug_assert_eq!(p.effect, now);
                if !p.applies {
                    continue;
                }
                let r = &mut p.record;
                let cur = store.get(&p.key).cloned();
                let found = cur.as_ref().map(|(v, m)| Found {
                    value: v.clone(),
                    mod_rev: *m,
                });
                match r.op {
                    Kind::Get => {
                        r.found = found;
                        r.rev = Some(revision);
                    }
                    Kind::Put => {
                        revision += 1;
                        let v = r.value.clone().unwrap_or_default();
                        store.insert(p.key, (v, revision));
                        r.rev = Some(revision);
                    }
                    Kind::Cas => {
                        let m = cur.as_ref().map(|c| c.1).unwrap_or(0);
                        if Some(m) == r.expect_mod_rev {
                            revision += 1;
                            let v = r.value.clone().unwrap_or_default();
                            store.insert(p.key, (v, revision));
                            r.succeeded = Some(true);
                            r.rev = Some(revision);
                        } else {
                            r.succeeded = Some(false);
                            r.found = found;
                            r.rev = Some(revision);
                        }
                    }
                    Kind::Delete => {
                        if store.remove(&p.key).is_some() {
                            revision += 1;
                            r.deleted = Some(1);
                        } else {
                            r.deleted = Some(0);
                        }
                        r.rev = Some(revision);
                    }
                }
            }
            Ev::Return(i) => {
                let Some(mut p) = pending.get_mut(i).and_then(Option::take) else {
                    continue;
                };
                let c: u32 = p.record.client[1..].parse().unwrap_or(0);
                if p.record.status != Status::Ok {
                    // What a client that lost the answer knows: nothing.
                    p.record.rev = None;
                    p.record.found = None;
                    p.record.succeeded = None;
                    p.record.deleted = None;
                } else if let Some(m) = p
                    .record
                    .found
                    .as_ref()
                    .map(|f| f.mod_rev)
                    .or(p.record.acked_write().then_some(p.record.rev.unwrap_or(0)))
                {
                    known_mod[c as usize].insert(p.key, m);
                }
                out.push(p.record);
                queue.push(Reverse((now + rng.random_range(0..200), Ev::Call(c))));
            }
        }
    }
    for (i, r) in out.iter_mut().enumerate() {
        r.id = i as u64;
    }
    out
}
