//! One load session: a writer (puts, and a share of compare-and-sets on
//! the key's mod revision and deletes) or a reader (linearizable gets), one
//! operation at a time, each recorded in the history, the ledger and the
//! session's revision check.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, GetResponse, Txn, TxnOp, TxnOpResponse};
use rand::Rng;
use rand::rngs::StdRng;
use tokio_util::sync::CancellationToken;

use super::ledger::{WriteId, key_name};
use super::{Config, Sabotage, Shared, lock, micros, observe, push};
use crate::client::{Error, Pool};
use crate::history::now_ms;
use crate::invariants::revisions::stale_read;
use crate::ops::{Found, Kind, Record, Status};

pub(super) struct Worker {
    pub cfg: Config,
    pub number: u32,
    pub writer: bool,
    pub pool: std::sync::Arc<Pool>,
    pub endpoints: tokio::sync::watch::Receiver<Vec<String>>,
    pub state: Shared,
    pub rng: StdRng,
    pub seq: u64,
    pub turn: usize,
    /// Mod revisions this writer learned, per key (for its compare-and-sets).
    pub mod_revs: HashMap<u32, i64>,
    /// The highest revision this session saw.
    pub last_rev: i64,
}

/// What a write got back.
enum Answer {
    Put(i64),
    Cas {
        rev: i64,
        swapped: bool,
        found: Option<(Vec<u8>, i64)>,
    },
    Delete {
        rev: i64,
        deleted: u64,
    },
}

fn found_of(value: &[u8], mod_rev: i64) -> Found {
    let value = match WriteId::parse(value) {
        Some(id) => id.to_string(),
        None => format!(
            "raw:{}",
            String::from_utf8_lossy(&value[..value.len().min(32)])
        ),
    };
    Found { value, mod_rev }
}

fn first_kv(r: &GetResponse) -> Option<(Vec<u8>, i64)> {
    r.kvs()
        .first()
        .map(|kv| (kv.value().to_vec(), kv.mod_revision()))
}

impl Worker {
    fn session(&self) -> String {
        format!("{}{}", if self.writer { "w" } else { "r" }, self.number)
    }

    pub(super) async fn run(mut self, period: Option<Duration>, stop: CancellationToken) {
        let mut tick = period.map(|p| {
            let mut i = tokio::time::interval(p);
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            i
        });
        loop {
            if stop.is_cancelled() {
                return;
            }
            if let Some(t) = tick.as_mut() {
                tokio::select! {
                    _ = t.tick() => {}
                    _ = stop.cancelled() => return,
                }
            }
            let url = {
                let eps = self.endpoints.borrow();
                if eps.is_empty() {
                    None
                } else {
                    self.turn = self.turn.wrapping_add(1);
                    Some(eps[self.turn % eps.len()].clone())
                }
            };
            let Some(url) = url else {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                    _ = stop.cancelled() => return,
                }
                continue;
            };
            if self.writer {
                self.write(&url).await;
            } else {
                self.read(&url).await;
            }
        }
    }

    fn record(&self, r: &mut Record) {
        if let Some(h) = &self.cfg.history {
            h.record(r);
        }
    }

    async fn write(&mut self, url: &str) {
        let key = self.rng.random_range(0..self.cfg.keys.max(1));
        let roll: f64 = self.rng.random();
        let share = self.cfg.txn_share.clamp(0.0, 0.66);
        let kind = if roll < share {
            Kind::Cas
        } else if roll < share * 1.5 {
            Kind::Delete
        } else {
            Kind::Put
        };
        self.seq += 1;
        let id = WriteId {
            writer: self.number,
            seq: self.seq,
        };
        let value = id.value(self.cfg.value_size);
        let name = key_name(key);
        let session = self.session();
        let mut rec = Record::new(&session, kind, &name, self.cfg.clock.now());
        if kind != Kind::Delete {
            rec.value = Some(id.to_string());
        }
        let expect = self.mod_revs.get(&key).copied().unwrap_or(0);
        if kind == Kind::Cas {
            rec.expect_mod_rev = Some(expect);
        }
        if kind == Kind::Delete {
            lock(&self.state).ledger.delete_sent(key);
        }
        let started = Instant::now();
        let lie = self.cfg.sabotage == Some(Sabotage::AckUnsentWrites)
            && kind == Kind::Put
            && self.rng.random_bool(0.05);
        let r: Result<Answer, Error> = if lie {
            Ok(Answer::Put(self.last_rev + 1))
        } else {
            let (n, v) = (name.clone(), value);
            match kind {
                Kind::Put => self
                    .pool
                    .call(url, self.cfg.timeout, |mut c| async move {
                        c.put(n, v, None).await
                    })
                    .await
                    .map(|p| Answer::Put(p.header().map(|h| h.revision()).unwrap_or_default())),
                Kind::Cas => self
                    .pool
                    .call(url, self.cfg.timeout, |mut c| async move {
                        let txn = Txn::new()
                            .when([Compare::mod_revision(n.clone(), CompareOp::Equal, expect)])
                            .and_then([TxnOp::put(n.clone(), v, None)])
                            .or_else([TxnOp::get(n, None)]);
                        c.txn(txn).await
                    })
                    .await
                    .map(|t| Answer::Cas {
                        rev: t.header().map(|h| h.revision()).unwrap_or_default(),
                        swapped: t.succeeded(),
                        found: t.op_responses().iter().find_map(|o| match o {
                            TxnOpResponse::Get(g) => first_kv(g),
                            _ => None,
                        }),
                    }),
                _ => self
                    .pool
                    .call(url, self.cfg.timeout, |mut c| async move {
                        c.delete(n, None).await
                    })
                    .await
                    .map(|d| Answer::Delete {
                        rev: d.header().map(|h| h.revision()).unwrap_or_default(),
                        deleted: u64::try_from(d.deleted()).unwrap_or(0),
                    }),
            }
        };
        rec.ret = self.cfg.clock.now();
        let took = started.elapsed();
        let at = now_ms();
        let mut st = lock(&self.state);
        if kind == Kind::Delete {
            st.ledger.delete_done(key, at);
        }
        match r {
            Ok(answer) => {
                rec.status = Status::Ok;
                let rev = match answer {
                    Answer::Put(rev) => {
                        st.ledger.ack(key, id, rev, at);
                        self.mod_revs.insert(key, rev);
                        rev
                    }
                    Answer::Cas {
                        rev,
                        swapped,
                        found,
                    } => {
                        st.stats.cas.0 += 1;
                        rec.succeeded = Some(swapped);
                        if swapped {
                            st.stats.cas.1 += 1;
                            st.ledger.ack(key, id, rev, at);
                            self.mod_revs.insert(key, rev);
                        } else {
                            rec.found = found.as_ref().map(|(v, m)| found_of(v, *m));
                            self.mod_revs.insert(key, found.map(|f| f.1).unwrap_or(0));
                        }
                        rev
                    }
                    Answer::Delete { rev, deleted } => {
                        st.stats.deletes += 1;
                        rec.deleted = Some(deleted);
                        if deleted > 0 {
                            st.ledger.ack_delete(key, id, rev, at);
                        }
                        self.mod_revs.insert(key, 0);
                        rev
                    }
                };
                rec.rev = Some(rev);
                self.last_rev = self.last_rev.max(rev);
                observe(
                    &mut st,
                    &session,
                    at,
                    rev,
                    kind.as_str(),
                    self.cfg.allow_rollback,
                );
                st.stats.writes_ok += 1;
                let _ = st.stats.write_us.record(micros(took));
                st.stats.recent.push(micros(took));
            }
            Err(e) => {
                rec.error = Some(e.short());
                if matches!(e, Error::Unreachable(_)) {
                    rec.status = Status::Failed;
                } else if kind == Kind::Delete {
                    st.ledger.uncertain_delete(key);
                } else {
                    st.ledger.uncertain(key, id);
                }
                st.stats.writes_failed += 1;
                *st.stats
                    .errors
                    .entry(format!("{}: {}", kind.as_str(), e.category()))
                    .or_default() += 1;
            }
        }
        drop(st);
        self.record(&mut rec);
    }

    async fn read(&mut self, url: &str) {
        let key = self.rng.random_range(0..self.cfg.keys.max(1));
        let name = key_name(key);
        let session = self.session();
        let (before, started_ms) = {
            let st = lock(&self.state);
            (st.ledger.newest(key), now_ms())
        };
        let mut rec = Record::new(&session, Kind::Get, &name, self.cfg.clock.now());
        let started = Instant::now();
        let get_name = name.clone();
        let r = self
            .pool
            .call(url, self.cfg.timeout, |mut c| async move {
                c.get(get_name, None).await
            })
            .await;
        rec.ret = self.cfg.clock.now();
        let took = started.elapsed();
        let at = now_ms();
        let mut st = lock(&self.state);
        match r {
            Ok(resp) => {
                let rev = resp.header().map(|h| h.revision()).unwrap_or_default();
                rec.status = Status::Ok;
                rec.rev = Some(rev);
                let kv = first_kv(&resp);
                rec.found = kv.as_ref().map(|(v, m)| found_of(v, *m));
                self.last_rev = self.last_rev.max(rev);
                let rolled = observe(&mut st, &session, at, rev, "get", self.cfg.allow_rollback);
                let got = kv.map(|k| k.1).unwrap_or(0);
                if let Some(b) = before
                    && b.epoch == st.ledger.epoch()
                    && !rolled
                    && !(got == 0
                        && (b.tombstone
                            || st.ledger.may_be_deleted(key)
                            || st.ledger.delete_since(key, started_ms)))
                    && let Some(v) = stale_read(&name, started_ms, b.revision, b.at, got)
                {
                    push(&mut st, v);
                }
                st.stats.reads_ok += 1;
                let _ = st.stats.read_us.record(micros(took));
                st.stats.recent.push(micros(took));
            }
            Err(e) => {
                rec.status = Status::Failed;
                rec.error = Some(e.short());
                st.stats.reads_failed += 1;
                *st.stats
                    .errors
                    .entry(format!("get: {}", e.category()))
                    .or_default() += 1;
            }
        }
        drop(st);
        self.record(&mut rec);
    }
}
