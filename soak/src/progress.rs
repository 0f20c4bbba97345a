//! What a run shows while it runs. On a terminal, a live view (indicatif):
//! a bar of the run's duration with elapsed time, faults and recoveries,
//! client operations per second and their p99 latency over the last
//! seconds, violations so far and the cluster's health, redrawn every
//! second, with messages printed above it. Otherwise a plain log line every
//! 10 seconds and whenever a count changes.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The counts shown.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    /// run, settle or done.
    pub phase: &'static str,
    /// Time since load started.
    pub elapsed: Duration,
    /// The scenario's duration.
    pub duration: Duration,
    /// Faults injected.
    pub faults: usize,
    /// Of which recovered.
    pub recovered: usize,
    /// Violations so far.
    pub violations: usize,
    /// Writes acknowledged.
    pub writes: u64,
    /// Client operations answered per second, lately.
    pub ops_per_s: f64,
    /// Their p99 latency lately, ms.
    pub p99_ms: Option<f64>,
    /// The newest probe found the cluster healthy.
    pub healthy: bool,
}

impl Tally {
    /// The counts, without the time.
    pub fn counts(&self) -> String {
        format!(
            "faults {f}  recovered {r}  {ops:.0} ops/s  p99 {p99}  violations {v}  writes {w}  cluster {h}",
            f = self.faults,
            r = self.recovered,
            ops = self.ops_per_s,
            p99 = self
                .p99_ms
                .map(|p| format!("{p:.1}ms"))
                .unwrap_or_else(|| "-".into()),
            v = self.violations,
            w = self.writes,
            h = if self.healthy { "healthy" } else { "UNHEALTHY" },
        )
    }

    /// One line.
    pub fn line(&self) -> String {
        format!(
            "[{phase}] {el}/{dur}  {counts}",
            phase = self.phase,
            el = hms(self.elapsed),
            dur = hms(self.duration),
            counts = self.counts()
        )
    }
}

fn hms(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// The display.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    last: Option<(Instant, Tally)>,
}

impl Progress {
    /// A display for a run of `duration`; live when `tty` is asked for and
    /// stderr is a terminal.
    pub fn new(tty: bool, duration: Duration) -> Self {
        let bar = (tty && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::with_draw_target(
                Some(duration.as_secs().max(1)),
                ProgressDrawTarget::stderr_with_hz(2),
            );
            b.set_style(
                ProgressStyle::with_template(
                    "{spinner:.green} [{prefix}] {elapsed_precise} {wide_bar:.cyan/blue} {pos}/{len}s\n  {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            b.set_prefix("start");
            b
        });
        Progress { bar, last: None }
    }

    /// A message on a line of its own.
    pub fn say(&mut self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(msg),
            None => {
                let _ = writeln!(std::io::stderr().lock(), "{msg}");
            }
        }
    }

    /// Shows the counts.
    pub fn update(&mut self, t: &Tally) {
        if let Some(b) = &self.bar {
            b.set_prefix(t.phase);
            b.set_position(t.elapsed.as_secs().min(t.duration.as_secs()));
            b.set_message(t.counts());
            b.tick();
            return;
        }
        let due = match &self.last {
            None => true,
            Some((at, prev)) => {
                at.elapsed() >= Duration::from_secs(10)
                    || (prev.faults, prev.recovered, prev.violations, prev.phase)
                        != (t.faults, t.recovered, t.violations, t.phase)
            }
        };
        if due {
            let _ = writeln!(std::io::stderr().lock(), "{}", t.line());
            self.last = Some((Instant::now(), t.clone()));
        }
    }

    /// Ends the live view (its last state stays on screen).
    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.abandon();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_shows_the_counts() {
        let t = Tally {
            phase: "run",
            elapsed: Duration::from_secs(75),
            duration: Duration::from_secs(3600),
            faults: 3,
            recovered: 2,
            violations: 0,
            writes: 1234,
            ops_per_s: 199.6,
            p99_ms: Some(12.34),
            healthy: false,
        };
        assert_eq!(
            t.line(),
            "[run] 0:01:15/1:00:00  faults 3  recovered 2  200 ops/s  p99 12.3ms  violations 0  writes 1234  cluster UNHEALTHY"
        );
        let mut p = Progress::new(false, Duration::from_secs(10));
        assert!(p.bar.is_none(), "no live view without a terminal");
        p.update(&t);
        p.finish();
    }
}
