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

mod checked;
mod evaluate;
mod files;
pub mod hist;
mod markdown;
pub mod svg;

use std::path::Path;

use crate::invariants::recovery::fmt_ms;

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

pub use crate::data::RunData;
pub use evaluate::{Derived, Row, Summary, evaluate};

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
