//! What a run shows while it runs: on a terminal one status line redrawn
//! every second (elapsed, faults, recoveries, violations so far); otherwise
//! a plain log line every 10 seconds and whenever a count changes.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// The counts shown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// The newest probe found the cluster healthy.
    pub healthy: bool,
}

impl Tally {
    /// One line.
    pub fn line(&self) -> String {
        format!(
            "[{phase}] {el}/{dur}  faults {f}  recovered {r}  violations {v}  writes {w}  cluster {h}",
            phase = self.phase,
            el = hms(self.elapsed),
            dur = hms(self.duration),
            f = self.faults,
            r = self.recovered,
            v = self.violations,
            w = self.writes,
            h = if self.healthy { "healthy" } else { "UNHEALTHY" },
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
    tty: bool,
    drawn: bool,
    last: Option<(Instant, Tally)>,
}

impl Progress {
    /// A display; `tty` when stderr is a terminal and asked for.
    pub fn new(tty: bool) -> Self {
        Progress {
            tty: tty && std::io::stderr().is_terminal(),
            drawn: false,
            last: None,
        }
    }

    /// A message on a line of its own.
    pub fn say(&mut self, msg: &str) {
        let mut err = std::io::stderr().lock();
        if self.drawn {
            let _ = write!(err, "\r\x1b[2K");
            self.drawn = false;
        }
        let _ = writeln!(err, "{msg}");
    }

    /// Shows the counts.
    pub fn update(&mut self, t: &Tally) {
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{}", t.line());
            let _ = err.flush();
            self.drawn = true;
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
            let _ = writeln!(err, "{}", t.line());
            self.last = Some((Instant::now(), t.clone()));
        }
    }

    /// Ends the status line.
    pub fn finish(&mut self) {
        if self.drawn {
            let _ = writeln!(std::io::stderr());
            self.drawn = false;
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
            healthy: false,
        };
        assert_eq!(
            t.line(),
            "[run] 0:01:15/1:00:00  faults 3  recovered 2  violations 0  writes 1234  cluster UNHEALTHY"
        );
    }
}
