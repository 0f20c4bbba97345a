//! Client load: writers and readers at a set rate over a key space, each a
//! client session spreading its requests over all endpoints in turn.
//!
//! Every acknowledged write goes into the [`ledger::Ledger`]; every response's
//! header revision is checked per session ([`crate::invariants::revisions`]);
//! every read is checked against the newest write acknowledged before it
//! started (no stale reads).

pub mod ledger;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;

use self::ledger::{Ledger, WriteId, key_name};
use crate::client::Pool;
use crate::history::now_ms;
use crate::invariants::Violation;
use crate::invariants::revisions::{Sessions, stale_read};

/// Settings of the load.
#[derive(Clone, Debug)]
pub struct Config {
    /// Writer sessions.
    pub writers: u32,
    /// Reader sessions.
    pub readers: u32,
    /// Operations per second of all sessions; 0: unthrottled.
    pub rate: u32,
    /// Key space.
    pub keys: u32,
    /// Bytes per value.
    pub value_size: usize,
    /// Timeout of one operation.
    pub timeout: Duration,
    /// Seed of the key choice.
    pub seed: u64,
    /// A restore may roll revisions back (scenario dataLoss: sinceBackup).
    pub allow_rollback: bool,
}

/// Counters and latencies.
#[derive(Debug)]
pub struct Stats {
    /// Write latencies of acknowledged writes, in microseconds.
    pub write_us: Histogram<u64>,
    /// Read latencies of answered reads, in microseconds.
    pub read_us: Histogram<u64>,
    /// Writes acknowledged.
    pub writes_ok: u64,
    /// Writes failed (outcome unknown).
    pub writes_failed: u64,
    /// Reads answered.
    pub reads_ok: u64,
    /// Reads failed.
    pub reads_failed: u64,
    /// Failures by category.
    pub errors: BTreeMap<String, u64>,
    /// Revision rollbacks accepted (restores).
    pub rollbacks: u64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            write_us: crate::report::hist::new(),
            read_us: crate::report::hist::new(),
            writes_ok: 0,
            writes_failed: 0,
            reads_ok: 0,
            reads_failed: 0,
            errors: BTreeMap::new(),
            rollbacks: 0,
        }
    }
}

/// What the load shares with the runner: ledger, checks and counters.
#[derive(Debug, Default)]
pub struct State {
    /// Every write.
    pub ledger: Ledger,
    /// Revisions per session.
    pub sessions: Sessions,
    /// Violations found while running.
    pub violations: Vec<Violation>,
    /// Violations beyond [`KEEP_VIOLATIONS`], counted but not kept.
    pub dropped: u64,
    /// Counters.
    pub stats: Stats,
}

/// The shared state.
pub type Shared = Arc<Mutex<State>>;

/// A new shared state.
pub fn shared() -> Shared {
    Arc::new(Mutex::new(State {
        ledger: Ledger::new(),
        ..State::default()
    }))
}

/// Locks the shared state (a panicked holder does not poison it for us).
pub fn lock(s: &Shared) -> std::sync::MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs every session until `stop` turns true; returns when all have ended
/// (each finishes its operation in flight, bounded by the timeout).
pub async fn run(
    cfg: Config,
    pool: Arc<Pool>,
    endpoints: watch::Receiver<Vec<String>>,
    state: Shared,
    stop: watch::Receiver<bool>,
) {
    let sessions = cfg.writers + cfg.readers;
    let period =
        (cfg.rate > 0).then(|| Duration::from_secs_f64(f64::from(sessions) / f64::from(cfg.rate)));
    let mut tasks = Vec::new();
    for n in 0..sessions {
        let writer = n < cfg.writers;
        let worker = Worker {
            cfg: cfg.clone(),
            number: if writer { n } else { n - cfg.writers },
            writer,
            pool: pool.clone(),
            endpoints: endpoints.clone(),
            state: state.clone(),
            rng: StdRng::seed_from_u64(cfg.seed.wrapping_mul(1_000_003).wrapping_add(u64::from(n))),
            seq: 0,
            turn: n as usize,
        };
        tasks.push(tokio::spawn(worker.run(period, stop.clone())));
    }
    for t in tasks {
        let _ = t.await;
    }
}

struct Worker {
    cfg: Config,
    number: u32,
    writer: bool,
    pool: Arc<Pool>,
    endpoints: watch::Receiver<Vec<String>>,
    state: Shared,
    rng: StdRng,
    seq: u64,
    turn: usize,
}

impl Worker {
    fn session(&self) -> String {
        format!("{}{}", if self.writer { "w" } else { "r" }, self.number)
    }

    async fn run(mut self, period: Option<Duration>, mut stop: watch::Receiver<bool>) {
        let mut tick = period.map(|p| {
            let mut i = tokio::time::interval(p);
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            i
        });
        loop {
            if *stop.borrow() {
                return;
            }
            if let Some(t) = tick.as_mut() {
                tokio::select! {
                    _ = t.tick() => {}
                    _ = stop.changed() => return,
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
                    _ = stop.changed() => return,
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

    async fn write(&mut self, url: &str) {
        let key = self.rng.random_range(0..self.cfg.keys.max(1));
        self.seq += 1;
        let id = WriteId {
            writer: self.number,
            seq: self.seq,
        };
        let value = id.value(self.cfg.value_size);
        let name = key_name(key);
        let started = Instant::now();
        let r = self
            .pool
            .call(url, self.cfg.timeout, |mut c| async move {
                c.put(name, value, None).await
            })
            .await;
        let took = started.elapsed();
        let at = now_ms();
        let session = self.session();
        let mut st = lock(&self.state);
        match r {
            Ok(resp) => {
                let rev = resp.header().map(|h| h.revision()).unwrap_or_default();
                observe(&mut st, &session, at, rev, "put", self.cfg.allow_rollback);
                st.ledger.ack(key, id, rev, at);
                st.stats.writes_ok += 1;
                let _ = st.stats.write_us.record(micros(took));
            }
            Err(e) => {
                st.ledger.uncertain(key, id);
                st.stats.writes_failed += 1;
                *st.stats
                    .errors
                    .entry(format!("put: {}", e.category()))
                    .or_default() += 1;
            }
        }
    }

    async fn read(&mut self, url: &str) {
        let key = self.rng.random_range(0..self.cfg.keys.max(1));
        let name = key_name(key);
        let (before, started_ms) = {
            let st = lock(&self.state);
            (st.ledger.newest(key), now_ms())
        };
        let started = Instant::now();
        let get_name = name.clone();
        let r = self
            .pool
            .call(url, self.cfg.timeout, |mut c| async move {
                c.get(get_name, None).await
            })
            .await;
        let took = started.elapsed();
        let at = now_ms();
        let session = self.session();
        let mut st = lock(&self.state);
        match r {
            Ok(resp) => {
                let rev = resp.header().map(|h| h.revision()).unwrap_or_default();
                let rolled = observe(&mut st, &session, at, rev, "get", self.cfg.allow_rollback);
                let got = resp.kvs().first().map(|kv| kv.mod_revision()).unwrap_or(0);
                if let Some(b) = before
                    && b.epoch == st.ledger.epoch()
                    && !rolled
                    && let Some(v) = stale_read(&name, started_ms, b.revision, b.at, got)
                {
                    push(&mut st, v);
                }
                st.stats.reads_ok += 1;
                let _ = st.stats.read_us.record(micros(took));
            }
            Err(e) => {
                st.stats.reads_failed += 1;
                *st.stats
                    .errors
                    .entry(format!("get: {}", e.category()))
                    .or_default() += 1;
            }
        }
    }
}

/// Most client-side violations kept while running (the rest are counted).
pub const KEEP_VIOLATIONS: usize = 1000;

fn push(st: &mut State, v: Violation) {
    if st.violations.len() < KEEP_VIOLATIONS {
        st.violations.push(v);
    } else {
        st.dropped += 1;
    }
}

/// Checks a session's revision; a rollback is accepted (and starts a new
/// ledger epoch) when the scenario allows restores. Returns whether this
/// response was a rollback.
fn observe(
    st: &mut State,
    session: &str,
    at: u64,
    rev: i64,
    op: &'static str,
    allow: bool,
) -> bool {
    let epoch = st.ledger.epoch();
    match st.sessions.observe(session, at, rev, op, epoch) {
        None => {
            st.ledger.seen(rev);
            false
        }
        Some(r) if allow => {
            if r.known_epoch {
                st.ledger.seen(rev);
            } else {
                st.ledger.rollback(rev);
                st.stats.rollbacks += 1;
                tracing::warn!(
                    "revisions went back from {} to {rev} (session {session}): a restore",
                    r.before.0
                );
            }
            let epoch = st.ledger.epoch();
            st.sessions.reset(session, at, rev, op, epoch);
            true
        }
        Some(r) => {
            push(st, r.violation());
            false
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}
