//! Client load: writers and readers at a set rate over a key space, each a
//! client session spreading its requests over all endpoints in turn.
//! Writers put, and a share of their operations are transactions: a
//! compare-and-set on the key's mod revision, or a delete.
//!
//! Every operation goes into the history (`history.jsonl`, [`crate::ops`])
//! for the linearizability check; every acknowledged write goes into the
//! [`ledger::Ledger`]; every response's header revision is checked per
//! session ([`crate::invariants::revisions`]); every read is checked against
//! the newest write acknowledged before it started (no stale reads).

pub mod ledger;
mod worker;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio_util::sync::CancellationToken;

use self::ledger::Ledger;
use self::worker::Worker;
use crate::client::Pool;
use crate::invariants::Violation;
use crate::invariants::revisions::Sessions;
use crate::ops::Clock;
use crate::ops::file::Writer;

/// A deliberately broken client, to show that the soak catches one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Sabotage {
    /// One write in 20 is acknowledged (revision: the last the session saw
    /// plus one) without ever being sent to etcd.
    AckUnsentWrites,
}

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
    /// Share of writer operations that are compare-and-sets (0 to 1); as
    /// many again, halved, are deletes.
    pub txn_share: f64,
    /// Where every operation is recorded (none: not recorded).
    pub history: Option<Arc<Writer>>,
    /// The clock of the history.
    pub clock: Clock,
    /// A deliberately broken client.
    pub sabotage: Option<Sabotage>,
}

/// Share of writer operations that are compare-and-sets by default (and
/// half as many deletes).
pub const TXN_SHARE: f64 = 0.1;

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
    /// When (unix ms) the operation that first saw revisions go back was
    /// started: the rebuilt cluster answered after that.
    pub first_rollback: Option<u64>,
    /// Compare-and-sets answered, and of those swapped.
    pub cas: (u64, u64),
    /// Deletes answered.
    pub deletes: u64,
    /// Latencies of the last seconds, for the live view.
    pub recent: Window,
}

/// Latencies of the last few seconds: operations per second and p99 now.
#[derive(Debug, Default)]
pub struct Window {
    entries: std::collections::VecDeque<(Instant, u32)>,
}

/// How far back [`Window`] looks.
const WINDOW: Duration = Duration::from_secs(5);

impl Window {
    /// Counts one answered operation of `us` µs.
    pub fn push(&mut self, us: u64) {
        let now = Instant::now();
        self.entries
            .push_back((now, u32::try_from(us).unwrap_or(u32::MAX)));
        while self
            .entries
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > WINDOW)
        {
            self.entries.pop_front();
        }
    }

    /// Operations per second and their p99 latency (ms) over the window.
    pub fn now(&self) -> (f64, Option<f64>) {
        let now = Instant::now();
        let mut v: Vec<u32> = self
            .entries
            .iter()
            .filter(|(t, _)| now.duration_since(*t) <= WINDOW)
            .map(|e| e.1)
            .collect();
        if v.is_empty() {
            return (0.0, None);
        }
        v.sort_unstable();
        let i = ((0.99 * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
        (
            v.len() as f64 / WINDOW.as_secs_f64(),
            Some(f64::from(v[i]) / 1000.0),
        )
    }
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
            first_rollback: None,
            cas: (0, 0),
            deletes: 0,
            recent: Window::default(),
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

/// Runs every session until `stop` is cancelled; returns when all have
/// ended (each finishes its operation in flight, bounded by the timeout).
pub async fn run(
    cfg: Config,
    pool: Arc<Pool>,
    endpoints: tokio::sync::watch::Receiver<Vec<String>>,
    state: Shared,
    stop: CancellationToken,
) {
    let sessions = cfg.writers + cfg.readers;
    let period =
        (cfg.rate > 0).then(|| Duration::from_secs_f64(f64::from(sessions) / f64::from(cfg.rate)));
    let mut tasks = tokio::task::JoinSet::new();
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
            mod_revs: std::collections::HashMap::new(),
            last_rev: 0,
        };
        tasks.spawn(worker.run(period, stop.clone()));
    }
    while tasks.join_next().await.is_some() {}
}

/// Most client-side violations kept while running (the rest are counted).
pub const KEEP_VIOLATIONS: usize = 1000;

pub(crate) fn push(st: &mut State, v: Violation) {
    if st.violations.len() < KEEP_VIOLATIONS {
        st.violations.push(v);
    } else {
        st.dropped += 1;
    }
}

/// Checks a session's revision; a rollback is accepted (and starts a new
/// ledger epoch) when the scenario allows restores, and one into an epoch
/// already started (by another session's rollback, or by the runner when
/// it moved the load to a promoted standby) always. Returns whether this
/// response was a rollback.
pub(crate) fn observe(
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
        Some(r) if allow || r.known_epoch => {
            if r.known_epoch {
                st.ledger.seen(rev);
            } else {
                st.ledger.rollback(rev);
                st.stats.rollbacks += 1;
                st.stats.first_rollback.get_or_insert(at);
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

pub(crate) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_going_back_are_accepted_only_into_a_known_epoch_unless_allowed() {
        let st = shared();
        let mut s = lock(&st);
        assert!(!observe(&mut s, "w0", 1, 20, "put", false));
        assert!(!observe(&mut s, "w0", 2, 10, "put", false), "a violation");
        assert_eq!(s.violations.len(), 1);
        assert!(!observe(&mut s, "w1", 3, 30, "put", false));
        // The runner moved the load: a new epoch at 15.
        s.ledger.rollback(15);
        assert!(
            observe(&mut s, "w1", 4, 16, "put", false),
            "into the known epoch"
        );
        assert_eq!(s.violations.len(), 1);
        assert_eq!(s.stats.rollbacks, 0, "not a restore");
        assert!(!observe(&mut s, "w1", 5, 12, "put", false));
        assert_eq!(s.violations.len(), 2, "back again within the epoch");
    }
}
