//! A client that writes to a cluster through every endpoint while a test
//! or a benchmark changes the cluster, and a watcher of raft terms: what
//! "no downtime" means, measured.
//!
//! The writer keeps to one endpoint, as etcd's own client does, and
//! retries the same write (an idempotent put) on the next endpoint when
//! the attempt did not reach etcd's log: the connection failed (a member
//! restarted or removed), etcd said it dropped the proposal, or no answer
//! came within [`ATTEMPT`]. The last is needed because etcd drops, without
//! a word, a proposal a follower forwards to a leader that is handing its
//! leadership over (etcd issue 8975): the follower would answer "request
//! timed out" only after 5 s plus two election timeouts. A write that etcd
//! refuses otherwise ("no leader", "leader changed", "request timed out",
//! any other error), or that is not acknowledged within [`DEADLINE`], is
//! a failed write. Every retry is noted with its reason, and the longest
//! time between two acknowledgements is the gap a user felt.
//!
//! Both run on a thread of their own and stop when dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use etcd_client::{Client, ConnectOptions};

/// How long one attempt of a write may take before it is retried.
pub const ATTEMPT: Duration = Duration::from_millis(300);
/// How long a write may take over all its attempts before it failed.
pub const DEADLINE: Duration = Duration::from_secs(10);
/// A write acknowledged after this long is put on the timeline.
pub const SLOW: Duration = Duration::from_millis(20);
/// Entries the timeline keeps (the first ones).
const TIMELINE_MAX: usize = 200;

/// What the writer saw.
#[derive(Clone, Debug, Default)]
pub struct WriteReport {
    /// Writes etcd acknowledged.
    pub acked: u64,
    /// Attempts retried on the next endpoint (connection failures,
    /// dropped proposals, no answer within [`ATTEMPT`]).
    pub failovers: u64,
    /// Why the first few retries happened, and when.
    pub failover_notes: Vec<String>,
    /// Writes that failed, with why.
    pub failed: Vec<String>,
    /// The longest time between two acknowledgements (or from the start
    /// to the first).
    pub longest_gap: Duration,
    /// When the longest gap ended (wall clock, to line it up with logs),
    /// and through which endpoint the write that ended it went.
    pub longest_gap_end: Option<(SystemTime, String)>,
    /// Every retry and every write slower than [`SLOW`], stamped with the
    /// wall clock in the operator log's format (the first
    /// [`TIMELINE_MAX`]): where a gap went.
    pub timeline: Vec<String>,
    /// When the writer started (wall clock).
    pub started_at: Option<SystemTime>,
}

impl WriteReport {
    fn mark(&mut self, what: impl std::fmt::Display) {
        if self.timeline.len() < TIMELINE_MAX {
            let now = humantime::format_rfc3339_micros(SystemTime::now());
            self.timeline.push(format!("{now} {what}"));
        }
    }
}

/// A running writer; [`Writer::stop`] returns its report.
#[derive(Debug)]
pub struct Writer(Background<WriteReport>);

/// A thread of its own running a task on a runtime of its own until told
/// to stop (by the flag the task is given); told and joined also when
/// dropped.
#[derive(Debug)]
struct Background<T> {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<T>>,
}

impl<T: Default + Send + 'static> Background<T> {
    /// Starts `task` (`what` names it in a panic).
    fn start<F>(
        what: &'static str,
        task: impl FnOnce(Arc<AtomicBool>) -> F + Send + 'static,
    ) -> Self
    where
        F: Future<Output = T>,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap_or_else(|e| panic!("a runtime for the {what}: {e}"));
            rt.block_on(task(flag))
        });
        Background {
            stop,
            thread: Some(thread),
        }
    }

    /// Tells the task to stop; returns what it returned (the default if
    /// it panicked).
    fn stop(mut self) -> T {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl<T> Drop for Background<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Whether the attempt never reached etcd's log: the connection failed, or
/// etcd dropped the proposal (a leader handing over, a candidate).
fn retryable(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::GRpcStatus(s) => {
            let m = s.message();
            m.contains("raft proposal dropped") || !m.starts_with("etcdserver")
        }
        _ => true,
    }
}

async fn connect(url: &str) -> Option<Client> {
    let opts = ConnectOptions::new()
        .with_connect_timeout(ATTEMPT)
        .with_timeout(ATTEMPT);
    tokio::time::timeout(ATTEMPT, Client::connect([url], Some(opts)))
        .await
        .ok()?
        .ok()
}

fn note(report: &mut WriteReport, what: String, since: Instant) {
    let at = since.elapsed();
    report.mark(format_args!("retry: {what} ({at:?} into the write)"));
    if report.failover_notes.len() < 20 {
        report
            .failover_notes
            .push(format!("{what} ({at:?} into the write)"));
    }
}

async fn write_loop(endpoints: Vec<String>, stop: Arc<AtomicBool>) -> WriteReport {
    let mut report = WriteReport {
        started_at: Some(SystemTime::now()),
        ..WriteReport::default()
    };
    let mut clients: Vec<Option<Client>> = vec![None; endpoints.len()];
    let mut pinned = 0usize;
    let mut last_ack = Instant::now();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let key = format!("writer/{}", n % 1000);
        let started = Instant::now();
        loop {
            if started.elapsed() > DEADLINE {
                report
                    .failed
                    .push(format!("write {n}: not acknowledged within {DEADLINE:?}"));
                break;
            }
            let url = &endpoints[pinned];
            if clients[pinned].is_none() {
                clients[pinned] = connect(url).await;
            }
            let Some(client) = clients[pinned].as_mut() else {
                note(&mut report, format!("{url}: cannot connect"), started);
                pinned = (pinned + 1) % endpoints.len();
                report.failovers += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
                continue;
            };
            match tokio::time::timeout(ATTEMPT, client.put(key.as_str(), "v", None)).await {
                Ok(Ok(_)) => {
                    let gap = last_ack.elapsed();
                    if gap > report.longest_gap {
                        report.longest_gap = gap;
                        report.longest_gap_end = Some((SystemTime::now(), url.clone()));
                    }
                    let took = started.elapsed();
                    if took > SLOW || gap > SLOW {
                        report.mark(format_args!(
                            "ack via {url}: write took {took:?}, {gap:?} since the last ack"
                        ));
                    }
                    last_ack = Instant::now();
                    report.acked += 1;
                    break;
                }
                Ok(Err(e)) if retryable(&e) => {
                    note(&mut report, format!("{url}: {e}"), started);
                    clients[pinned] = None;
                    pinned = (pinned + 1) % endpoints.len();
                    report.failovers += 1;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                Ok(Err(e)) => {
                    report.failed.push(format!("write {n} via {url}: {e}"));
                    break;
                }
                Err(_) => {
                    note(
                        &mut report,
                        format!("{url}: no answer within {ATTEMPT:?}"),
                        started,
                    );
                    clients[pinned] = None;
                    pinned = (pinned + 1) % endpoints.len();
                    report.failovers += 1;
                }
            }
        }
    }
    report
}

impl Writer {
    /// Starts writing through `endpoints` (client URLs), first to the
    /// first one.
    pub fn start(endpoints: Vec<String>) -> Writer {
        assert!(!endpoints.is_empty(), "a writer needs an endpoint");
        Writer(Background::start("writer", |flag| {
            write_loop(endpoints, flag)
        }))
    }

    /// Stops writing and says what happened.
    pub fn stop(self) -> WriteReport {
        self.0.stop()
    }
}

/// Watches the raft terms members report (every 10 ms): every election,
/// a handover's included, starts a new term.
#[derive(Debug)]
pub struct TermWatch(Background<Vec<u64>>);

impl TermWatch {
    /// Starts watching the members at `endpoints`.
    pub fn start(endpoints: Vec<String>) -> TermWatch {
        TermWatch(Background::start("term watch", |flag| async move {
            let clients = crate::etcd::Clients::new(Duration::from_millis(200));
            let mut terms = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                for url in &endpoints {
                    if let Ok(s) = clients.status(url).await
                        && !terms.contains(&s.raft_term)
                    {
                        terms.push(s.raft_term);
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            terms.sort_unstable();
            terms
        }))
    }

    /// Stops watching; returns the distinct terms seen, lowest first.
    pub fn stop(self) -> Vec<u64> {
        self.0.stop()
    }
}
