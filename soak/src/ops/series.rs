//! Per-second client figures from the history: operations answered and
//! failed, and the p50/p99 latency of the answered ones, for the report's
//! throughput and latency plots.

use serde::Serialize;

use super::{Record, Status, Us};

/// One second of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Second {
    /// Seconds since the load started.
    pub t: u32,
    /// Operations answered (completed in this second).
    pub ok: u32,
    /// Operations that failed or whose outcome is unknown.
    pub failed: u32,
    /// Median latency of the answered ones, ms (0 when none).
    pub p50_ms: f64,
    /// Their 99th percentile, ms.
    pub p99_ms: f64,
}

/// Collects latencies per second, then sums them up.
#[derive(Debug)]
pub struct Builder {
    start: Us,
    latencies: Vec<Vec<u32>>,
    failed: Vec<u32>,
}

impl Builder {
    /// Seconds counted from `start` (unix µs).
    pub fn new(start: Us) -> Self {
        Builder {
            start,
            latencies: Vec::new(),
            failed: Vec::new(),
        }
    }

    fn slot(&mut self, at: Us) -> usize {
        let s = usize::try_from(at.saturating_sub(self.start) / 1_000_000).unwrap_or(usize::MAX);
        // Bounded: a record from a broken clock must not allocate the world.
        let s = s.min(400 * 86_400);
        if self.latencies.len() <= s {
            self.latencies.resize_with(s + 1, Vec::new);
            self.failed.resize(s + 1, 0);
        }
        s
    }

    /// Counts one operation in the second it completed.
    pub fn add(&mut self, r: &Record) {
        let s = self.slot(r.ret);
        if r.status == Status::Ok {
            let us = u32::try_from(r.ret.saturating_sub(r.call)).unwrap_or(u32::MAX);
            self.latencies[s].push(us);
        } else {
            self.failed[s] += 1;
        }
    }

    /// The seconds, in order.
    pub fn finish(self) -> Vec<Second> {
        let q = |v: &[u32], p: f64| {
            let i = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
            f64::from(v[i]) / 1000.0
        };
        self.latencies
            .into_iter()
            .zip(self.failed)
            .enumerate()
            .map(|(t, (mut l, failed))| {
                l.sort_unstable();
                let (p50_ms, p99_ms) = if l.is_empty() {
                    (0.0, 0.0)
                } else {
                    (q(&l, 0.5), q(&l, 0.99))
                };
                Second {
                    t: u32::try_from(t).unwrap_or(u32::MAX),
                    ok: u32::try_from(l.len()).unwrap_or(u32::MAX),
                    failed,
                    p50_ms,
                    p99_ms,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Kind;

    #[test]
    fn seconds_count_and_rank_latencies() {
        let mut b = Builder::new(1_000_000);
        for i in 0..100u64 {
            let mut r = Record::new("w0", Kind::Put, "k", 1_000_000 + i * 1000);
            r.ret = r.call + (i + 1) * 100; // 0.1 .. 10 ms
            r.status = Status::Ok;
            b.add(&r);
        }
        let mut lost = Record::new("w0", Kind::Put, "k", 2_500_000);
        lost.ret = 3_200_000;
        b.add(&lost);
        let s = b.finish();
        assert_eq!(s.len(), 3);
        assert_eq!((s[0].ok, s[0].failed), (100, 0));
        assert!((s[0].p50_ms - 5.0).abs() < 1e-9, "{:?}", s[0]);
        assert!((s[0].p99_ms - 9.9).abs() < 1e-9, "{:?}", s[0]);
        assert_eq!((s[1].ok, s[1].failed), (0, 0));
        assert_eq!((s[2].ok, s[2].failed), (0, 1));
    }
}
