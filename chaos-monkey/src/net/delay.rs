//! Latency and jitter for the marked packets, without tc netem (which this
//! project's machines lack: their kernel has no netem, prio or fw): the
//! fault's iptables chain sends each marked packet to an NFQUEUE
//! (`--queue-bypass`: with nobody listening, packets pass), and a thread of
//! the monkey holds each one for `latency ± jitter` before it lets it go
//! on. Each packet is held once per direction, as netem on one interface
//! would; the jitter of each is drawn from `--seed` (the order in which
//! packets arrive is the network's). Held packets are let go at once when
//! the fault ends, and the kernel lets new ones pass as soon as the
//! monkey's queue closes, also when the monkey is killed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nfq::{Message, Queue, Verdict};

use super::Error;
use crate::rng::Rng;

/// Most packets held at once; past it the kernel lets packets through.
const MAX_HELD: u32 = 65_536;

/// The thread that holds packets of one queue.
#[derive(Debug)]
pub struct Delayer {
    /// The NFQUEUE number.
    pub queue: u16,
    stop: Arc<AtomicBool>,
    held: Arc<AtomicU64>,
    thread: std::sync::Mutex<Option<JoinHandle<()>>>,
}

struct Held {
    due: Instant,
    seq: u64,
    msg: Message,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.due, self.seq) == (o.due, o.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.due, self.seq).cmp(&(o.due, o.seq))
    }
}

/// How long packet number `n` is held: `latency` plus a uniform draw in
/// `[-jitter, +jitter]`, never below zero.
pub fn hold(latency: Duration, jitter: Duration, rng: &mut Rng) -> Duration {
    if jitter.is_zero() {
        return latency;
    }
    let u = rng.unit() * 2.0 - 1.0;
    let j = jitter.as_secs_f64() * u;
    Duration::from_secs_f64((latency.as_secs_f64() + j).max(0.0))
}

fn nl(what: &str) -> impl FnOnce(io::Error) -> Error {
    let what = what.to_string();
    move |source| Error::Io { what, source }
}

impl Delayer {
    /// Listens on NFQUEUE `queue` and holds each packet.
    pub fn start(
        queue: u16,
        latency: Duration,
        jitter: Duration,
        seed: u64,
    ) -> Result<Self, Error> {
        let mut q = Queue::open().map_err(nl("cannot open a netfilter queue socket"))?;
        q.bind(queue)
            .map_err(nl(&format!("cannot bind NFQUEUE {queue}")))?;
        q.set_copy_range(queue, 0)
            .map_err(nl("cannot set the NFQUEUE copy range"))?;
        q.set_fail_open(queue, true)
            .map_err(nl("cannot set NFQUEUE fail-open"))?;
        q.set_queue_max_len(queue, MAX_HELD)
            .map_err(nl("cannot set the NFQUEUE length"))?;
        q.set_nonblocking(true);
        let stop = Arc::new(AtomicBool::new(false));
        let held = Arc::new(AtomicU64::new(0));
        let (s, h) = (stop.clone(), held.clone());
        let thread = std::thread::Builder::new()
            .name(format!("delay-q{queue}"))
            .spawn(move || run(q, latency, jitter, Rng::new(seed), &s, &h))
            .map_err(nl("cannot start the delay thread"))?;
        Ok(Delayer {
            queue,
            stop,
            held,
            thread: std::sync::Mutex::new(Some(thread)),
        })
    }

    /// Packets held so far.
    pub fn packets(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    /// Lets every held packet go and closes the queue.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let t = self.thread.lock().map(|mut t| t.take()).unwrap_or(None);
        if let Some(t) = t {
            let _ = t.join();
        }
    }
}

impl Drop for Delayer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(
    mut q: Queue,
    latency: Duration,
    jitter: Duration,
    mut rng: Rng,
    stop: &AtomicBool,
    count: &AtomicU64,
) {
    let mut heap: BinaryHeap<Reverse<Held>> = BinaryHeap::new();
    let mut seq = 0u64;
    let release = |q: &mut Queue, mut msg: Message| {
        msg.set_verdict(Verdict::Accept);
        if let Err(e) = q.verdict(msg) {
            tracing::warn!("cannot let a delayed packet go: {e}");
        }
    };
    while !stop.load(Ordering::Relaxed) {
        loop {
            match q.recv() {
                Ok(msg) => {
                    seq += 1;
                    count.fetch_add(1, Ordering::Relaxed);
                    let due = Instant::now() + hold(latency, jitter, &mut rng);
                    heap.push(Reverse(Held { due, seq, msg }));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::warn!("NFQUEUE receive failed: {e}");
                    break;
                }
            }
        }
        let now = Instant::now();
        while heap.peek().is_some_and(|Reverse(h)| h.due <= now) {
            if let Some(Reverse(h)) = heap.pop() {
                release(&mut q, h.msg);
            }
        }
        let wait = heap
            .peek()
            .map(|Reverse(h)| h.due.saturating_duration_since(now))
            .unwrap_or(Duration::from_millis(1))
            .min(Duration::from_millis(1));
        std::thread::sleep(wait);
    }
    tracing::debug!("NFQUEUE: letting {} held packets go", heap.len());
    while let Some(Reverse(h)) = heap.pop() {
        release(&mut q, h.msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_stay_within_latency_and_jitter_and_replay() {
        let (l, j) = (Duration::from_millis(200), Duration::from_millis(50));
        let mut a = Rng::new(3);
        let mut b = Rng::new(3);
        for _ in 0..1000 {
            let h = hold(l, j, &mut a);
            assert!(
                h >= Duration::from_millis(150) && h <= Duration::from_millis(250),
                "{h:?}"
            );
            assert_eq!(h, hold(l, j, &mut b));
        }
        assert_eq!(hold(l, Duration::ZERO, &mut a), l);
        let big = hold(
            Duration::from_millis(1),
            Duration::from_secs(1),
            &mut Rng::new(9),
        );
        assert!(big <= Duration::from_millis(1001));
    }
}
