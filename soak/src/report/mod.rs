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
//! | `seconds.csv` | client operations answered and failed, p50/p99 latency, per second |
//! | `throughput.svg`, `latency.svg`, `availability.svg`, `recovery.svg` | plots with faults and recoveries marked |
//! | `report.html` | one self-contained page: the plots and the tables |
//! | `junit.xml` | each bound a test case, for CI |
//! | `history.jsonl` | every client operation (written by the load) |
//! | `faults.jsonl`, `logs/` | the chaos monkey's fault log; operator, monkey and member logs |

mod checked;
pub mod compare;
mod evaluate;
mod files;
pub mod hist;
mod html;
pub mod junit;
mod markdown;
pub mod operator;
pub mod plots;
mod promotion;
mod standby;

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

/// The plots (file name, SVG text); a plot that cannot be drawn is left
/// out with a note.
pub fn plots(d: &RunData, derived: &Derived) -> (Vec<(&'static str, String)>, Vec<String>) {
    let end = d
        .samples
        .last()
        .map(|s| s.at)
        .unwrap_or(d.run_end)
        .max(d.run_end);
    let m = plots::Marks {
        start: d.started,
        end,
        recoveries: &derived.recoveries,
    };
    let bounds: Vec<(String, u64)> = [
        (
            "recoveryP99",
            evaluate::ms(d.scenario.bounds.recovery_p99.get()),
        ),
        (
            "recoveryMax",
            evaluate::ms(d.scenario.bounds.recovery_max.get()),
        ),
    ]
    .iter()
    .map(|(n, v)| (format!("{n} {}", fmt_ms(*v)), *v))
    .collect();
    let title = format!("{}: recovery time per fault", d.scenario.name);
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for (name, svg) in [
        ("throughput.svg", plots::throughput(&d.series, &m)),
        ("latency.svg", plots::latency(&d.series, &m)),
        ("availability.svg", plots::availability(&d.samples, &m)),
        (
            "recovery.svg",
            plots::recovery(&title, &m, &derived.spans, &bounds),
        ),
    ] {
        match svg {
            Ok(s) => out.push((name, s)),
            Err(e) => notes.push(format!("{name} could not be drawn: {e}")),
        }
    }
    (out, notes)
}

/// Evaluates and writes every output file into `out`.
pub fn write(out: &Path, d: &RunData) -> Result<Summary, Error> {
    let (summary, derived) = evaluate(d);
    let put = |name: &str, text: &str| {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|source| Error::Write {
            path: path.display().to_string(),
            source,
        })
    };
    // Unrecovered faults count up to the end, as in p99 and max.
    let recovery_hist = hist::of(&derived.recovery_times());
    put("recovery-latency.hgrm", &hist::hgrm(&recovery_hist, 1.0))?;
    put("write-latency.hgrm", &hist::hgrm(&d.load.write_us, 1000.0))?;
    put("read-latency.hgrm", &hist::hgrm(&d.load.read_us, 1000.0))?;
    put("events.csv", &files::events(&derived, &d.notes))?;
    put("probes.csv", &files::probes(&d.samples))?;
    put("checkpoints.csv", &files::checkpoints(&d.checkpoints))?;
    put("seconds.csv", &files::seconds(&d.series))?;
    if let Some(run) = &d.standby {
        let timeline = crate::invariants::standby::primary_timeline(&d.samples);
        put("standby.csv", &standby::csv(run, &timeline))?;
    }
    let (svgs, notes) = plots(d, &derived);
    for (name, svg) in &svgs {
        put(name, svg)?;
    }
    put(
        "summary.json",
        &(serde_json::to_string_pretty(&summary).unwrap_or_default() + "\n"),
    )?;
    if let Ok(text) = &d.operator_metrics {
        put("operator-metrics.txt", text)?;
    }
    let mut md = markdown::render(d, &summary, &derived, &recovery_hist, &notes);
    let scrape = d.operator_metrics.as_deref().map_err(String::as_str);
    md.push_str(&operator::section(scrape, &d.scenario.cluster.name));
    put("report.md", &md)?;
    put(
        "report.html",
        &html::render(d, &summary, &derived, &recovery_hist, &svgs),
    )?;
    put("junit.xml", &junit::render(&summary))?;
    Ok(summary)
}

#[cfg(test)]
mod tests;
