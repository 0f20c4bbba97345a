//! The report of a run: the bounds with what was measured and whether each
//! held, every violation with its time, and the output files.
//!
//! | file | what |
//! |---|---|
//! | `summary.json` | the verdict, bounds, measured values, violations |
//! | `report.md` | the same for people, with the top of each histogram |
//! | `events.csv` | faults, recoveries and runner notes |
//! | `probes.csv` | every probe tick |
//! | `checkpoints.csv` | every KV hash checkpoint |
//! | `recovery-latency.hgrm`, `write-latency.hgrm`, `read-latency.hgrm` | HdrHistogram percentile distributions (ms) |
//! | `recovery.svg` | recovery latency over the run |
//! | `faults.jsonl`, `logs/` | the chaos monkey's fault log; operator, monkey and member logs |

mod evaluate;
mod files;
pub mod hist;
mod markdown;
pub mod svg;

use std::path::Path;

use etcd_operator::faults::FaultRecord;

use crate::history::{Checkpoint, Ms, Sample};
use crate::invariants::recovery::{FaultEvent, fmt_ms};
use crate::invariants::{Violation, lost};
use crate::load;
use crate::runner::PlatformKind;
use crate::scenario::Scenario;

/// Why the report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

pub use evaluate::{Derived, Row, Summary, evaluate};

/// Everything a run recorded.
#[derive(Debug)]
pub struct RunData {
    /// The scenario.
    pub scenario: Scenario,
    /// Where it ran.
    pub platform: PlatformKind,
    /// Seed override.
    pub seed: Option<u64>,
    /// Load started (unix ms).
    pub started: Ms,
    /// Load and chaos stopped.
    pub run_end: Ms,
    /// Everything torn down.
    pub ended: Ms,
    /// Stopped early by Ctrl-C or SIGTERM.
    pub interrupted: bool,
    /// The chaos monkey was started.
    pub chaos_started: bool,
    /// Probe samples.
    pub samples: Vec<Sample>,
    /// KV hash checkpoints.
    pub checkpoints: Vec<Checkpoint>,
    /// The fault log.
    pub faults: Vec<FaultRecord>,
    /// Spec changes the runner made.
    pub changes: Vec<FaultEvent>,
    /// What the runner noticed (operator restarts, the monkey's exit).
    pub notes: Vec<(Ms, String)>,
    /// Violations found while running (leaders, revisions, stale reads, hashes).
    pub live_violations: Vec<Violation>,
    /// Distinct raft terms seen.
    pub leader_terms: usize,
    /// Load counters and latencies.
    pub load: load::Stats,
    /// Writes acknowledged and uncertain.
    pub ledger_acked: u64,
    /// Writes whose outcome is unknown.
    pub ledger_uncertain: u64,
    /// The final read-back, when done.
    pub lost: Option<lost::Outcome>,
    /// Things that made the run itself fail.
    pub errors: Vec<String>,
}

impl RunData {
    /// Nothing recorded yet.
    pub fn new(scenario: Scenario, platform: PlatformKind, seed: Option<u64>) -> Self {
        let now = crate::history::now_ms();
        RunData {
            scenario,
            platform,
            seed,
            started: now,
            run_end: now,
            ended: now,
            interrupted: false,
            chaos_started: false,
            samples: Vec::new(),
            checkpoints: Vec::new(),
            faults: Vec::new(),
            changes: Vec::new(),
            notes: Vec::new(),
            live_violations: Vec::new(),
            leader_terms: 0,
            load: load::Stats::default(),
            ledger_acked: 0,
            ledger_uncertain: 0,
            lost: None,
            errors: Vec::new(),
        }
    }
}

/// The summary table of a report.md (between its markers).
pub fn summary_table(report_md: &str) -> Option<&str> {
    let start = report_md.find(markdown::BEGIN)? + markdown::BEGIN.len();
    let end = report_md[start..].find(markdown::END)? + start;
    Some(report_md[start..end].trim())
}

/// Evaluates and writes every output file into `out`.
pub fn write(out: &Path, d: &RunData) -> Result<Summary, Error> {
    let (summary, derived) = evaluate(d);
    let put = |name: &str, text: String| {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|source| Error::Write {
            path: path.display().to_string(),
            source,
        })
    };
    // Unrecovered faults count up to the end, as in p99 and max.
    let recovery_hist = hist::of(&derived.recovery_times());
    put("recovery-latency.hgrm", hist::hgrm(&recovery_hist, 1.0))?;
    put("write-latency.hgrm", hist::hgrm(&d.load.write_us, 1000.0))?;
    put("read-latency.hgrm", hist::hgrm(&d.load.read_us, 1000.0))?;
    put("events.csv", files::events(&derived, &d.notes))?;
    put("probes.csv", files::probes(&d.samples))?;
    put("checkpoints.csv", files::checkpoints(&d.checkpoints))?;
    let bounds = [
        (
            "recoveryP99",
            evaluate::ms(d.scenario.bounds.recovery_p99.get()),
        ),
        (
            "recoveryMax",
            evaluate::ms(d.scenario.bounds.recovery_max.get()),
        ),
    ];
    let labels: Vec<(String, u64)> = bounds
        .iter()
        .map(|(n, v)| (format!("{n} {}", fmt_ms(*v)), *v))
        .collect();
    let label_refs: Vec<(&str, u64)> = labels.iter().map(|(l, v)| (l.as_str(), *v)).collect();
    let title = format!("{}: recovery time per fault", d.scenario.name);
    put(
        "recovery.svg",
        svg::render(&svg::Plot {
            title: &title,
            start: d.started,
            end: d
                .samples
                .last()
                .map(|s| s.at)
                .unwrap_or(d.run_end)
                .max(d.run_end),
            recoveries: &derived.recoveries,
            spans: &derived.spans,
            bounds: &label_refs,
        }),
    )?;
    put(
        "summary.json",
        serde_json::to_string_pretty(&summary).unwrap_or_default() + "\n",
    )?;
    put(
        "report.md",
        markdown::render(d, &summary, &derived, &recovery_hist),
    )?;
    Ok(summary)
}

#[cfg(test)]
mod tests;
