//! The summary rows of the checks over what the clients saw (the
//! linearizability of the history, the watch guarantees), and the top of
//! each latency histogram as summary.json carries it.

use serde::Serialize;

use super::{Row, RunData};
use crate::invariants::{Check, Violation};

/// The top of a latency histogram, ms.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Percentiles {
    /// Values counted.
    pub count: u64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

impl Percentiles {
    /// Of a histogram whose values are divided by `scale` (1000: µs to ms).
    pub fn of(h: &hdrhistogram::Histogram<u64>, scale: f64) -> Option<Percentiles> {
        let t = super::hist::top(h, scale)?;
        Some(Percentiles {
            count: h.len(),
            p50: t[0].1,
            p90: t[1].1,
            p99: t[2].1,
            p999: t[3].1,
            max: t[4].1,
        })
    }
}

/// The rows and violations of the linearizability and watch checks.
pub(super) fn rows(d: &RunData, rows: &mut Vec<Row>, v: &mut Vec<Violation>) {
    let us_to_ms = |us: u64| us / 1000;
    match &d.linearizability {
        Some(l) => {
            let c = &l.counts;
            let unknown = if l.unknown_keys.is_empty() {
                String::new()
            } else {
                format!(
                    "; UNKNOWN for {} keys (search time bound)",
                    l.unknown_keys.len()
                )
            };
            rows.push(Row {
                check: "linearizable".into(),
                bound: "0 violations".into(),
                measured: format!(
                    "{} violations in {} operations over {} keys ({} unknown outcomes: {} seen applied, {} never applied){unknown}, checked in {:.1}s",
                    l.violations,
                    c.ops,
                    l.keys,
                    c.unknown_writes,
                    c.seen_applied,
                    c.never_applied,
                    l.elapsed_ms as f64 / 1000.0
                ),
                pass: l.pass(),
            });
            for f in &l.findings {
                v.push(Violation::new(
                    us_to_ms(f.at),
                    Check::Linearizability,
                    f.message.clone(),
                ));
            }
            if l.violations > l.findings.len() {
                v.push(Violation::new(
                    d.run_end,
                    Check::Linearizability,
                    format!(
                        "{} more linearizability violations (not listed)",
                        l.violations - l.findings.len()
                    ),
                ));
            }
            if !l.unknown_keys.is_empty() {
                let keys: Vec<&str> = l.unknown_keys.iter().take(5).map(String::as_str).collect();
                v.push(Violation::new(
                    d.run_end,
                    Check::Linearizability,
                    format!(
                        "unknown: the search did not finish within its time bound for {} keys ({}{}); \
                         they are neither passed nor failed (`soak lincheck` with a longer --timeout)",
                        l.unknown_keys.len(),
                        keys.join(", "),
                        if l.unknown_keys.len() > 5 { ", ..." } else { "" }
                    ),
                ));
            }
        }
        None => rows.push(Row {
            check: "linearizable".into(),
            bound: "0 violations".into(),
            measured: "not checked (no history)".into(),
            pass: false,
        }),
    }
    match &d.watch {
        Some(w) => {
            let events: usize = w.watchers.iter().map(|x| x.events).sum();
            let resumes: usize = w.watchers.iter().map(|x| x.resumes).sum();
            rows.push(Row {
                check: "watch guarantees".into(),
                bound: "0 violations".into(),
                measured: format!(
                    "{} violations ({} watchers, {events} events, {resumes} resumptions)",
                    w.violations,
                    w.watchers.len()
                ),
                pass: w.violations == 0,
            });
            for p in &w.problems {
                v.push(Violation::new(
                    us_to_ms(p.at),
                    Check::Watch,
                    format!("{}: {}", p.watcher, p.message),
                ));
            }
            if w.violations > w.problems.len() {
                v.push(Violation::new(
                    d.run_end,
                    Check::Watch,
                    format!(
                        "{} more watch violations (not listed)",
                        w.violations - w.problems.len()
                    ),
                ));
            }
        }
        None => rows.push(Row {
            check: "watch guarantees".into(),
            bound: "0 violations".into(),
            measured: "not checked (no watch ran)".into(),
            pass: false,
        }),
    }
}
