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

mod files;
pub mod hist;
mod markdown;
pub mod svg;

use std::collections::BTreeMap;
use std::path::Path;

use etcd_operator::faults::FaultRecord;
use serde::Serialize;

use crate::history::{Checkpoint, Ms, Sample, rfc3339};
use crate::invariants::recovery::{self, FaultEvent, Recovery, Span, Stats, fmt_ms};
use crate::invariants::{Check, Violation, backup, lost};
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

/// One row of the summary table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The check.
    pub check: String,
    /// What must hold.
    pub bound: String,
    /// What was measured.
    pub measured: String,
    /// Whether it held.
    pub pass: bool,
}

/// The verdict.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Scenario name.
    pub scenario: String,
    /// local or kube.
    pub platform: String,
    /// Every bound held and nothing was violated.
    pub pass: bool,
    /// Stopped early.
    pub interrupted: bool,
    /// Load start (RFC 3339).
    pub started: String,
    /// Seconds of load.
    pub run_seconds: f64,
    /// The table.
    pub bounds: Vec<Row>,
    /// Recovery figures.
    pub recovery: Stats,
    /// Availability (fraction).
    pub availability: Option<f64>,
    /// Faults injected.
    pub faults_injected: usize,
    /// Client operations.
    pub writes_ok: u64,
    /// Failed writes.
    pub writes_failed: u64,
    /// Reads answered.
    pub reads_ok: u64,
    /// Failed reads.
    pub reads_failed: u64,
    /// Client failures by category.
    pub errors_by_category: BTreeMap<String, u64>,
    /// Acknowledged writes lost.
    pub lost_writes: Option<usize>,
    /// Writes rolled back by a restore (accepted).
    pub rolled_back: Option<usize>,
    /// Violations per check.
    pub violation_counts: BTreeMap<String, usize>,
    /// Every violation, in time order.
    pub violations: Vec<Violation>,
    /// Runner notes.
    pub notes: Vec<String>,
}

/// What evaluation derives beyond the summary.
#[derive(Debug)]
pub struct Derived {
    /// Fault injections.
    pub events: Vec<FaultEvent>,
    /// Their recoveries.
    pub recoveries: Vec<Recovery>,
    /// Unhealthy stretches.
    pub spans: Vec<Span>,
}

fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// Judges a run against its scenario's bounds.
pub fn evaluate(d: &RunData) -> (Summary, Derived) {
    let s = &d.scenario;
    let b = &s.bounds;
    let end = d.samples.last().map(|x| x.at).unwrap_or(d.run_end);
    let events = recovery::group(&d.faults);
    let recs = recovery::recoveries(&events, &d.samples);
    let spans = recovery::unhealthy_spans(&d.samples);
    let (stats, mut v) = recovery::check(
        &recs,
        &spans,
        b.recovery_p99.get(),
        b.recovery_max.get(),
        end,
    );
    let mut rows = Vec::new();
    let count = |v: &[Violation], c: Check| v.iter().filter(|x| x.check == c).count();

    let n = stats.faults;
    rows.push(Row {
        check: "recovery p99".into(),
        bound: format!("<= {}", b.recovery_p99),
        measured: match stats.p99_ms {
            Some(p) => format!("{} ({n} faults, {} recovered)", fmt_ms(p), stats.recovered),
            None => "no faults measured".into(),
        },
        pass: count(&v, Check::RecoveryP99) == 0,
    });
    rows.push(Row {
        check: "recovery max".into(),
        bound: format!("<= {}", b.recovery_max),
        measured: stats.max_ms.map(fmt_ms).unwrap_or_else(|| "-".into()),
        pass: count(&v, Check::Recovery) == 0,
    });
    let longest = spans
        .iter()
        .map(|x| x.to.unwrap_or(end).saturating_sub(x.from))
        .max()
        .unwrap_or(0);
    rows.push(Row {
        check: "membership = spec".into(),
        bound: format!("back within {}", b.recovery_max),
        measured: format!("longest unhealthy stretch {}", fmt_ms(longest)),
        pass: count(&v, Check::Membership) == 0,
    });
    let availability = recovery::availability(&d.samples);
    let avail_ok = availability.is_some_and(|a| a >= b.availability);
    if !avail_ok {
        v.push(Violation::new(
            d.run_end,
            Check::Availability,
            format!(
                "availability {} is below the bound {}",
                availability.map(pct).unwrap_or_else(|| "unknown".into()),
                pct(b.availability)
            ),
        ));
    }
    rows.push(Row {
        check: "availability".into(),
        bound: format!(">= {}", pct(b.availability)),
        measured: availability.map(pct).unwrap_or_else(|| "no probes".into()),
        pass: avail_ok,
    });
    if let Some(bound) = b.max_backup_age {
        let o = backup::check(&d.samples, d.started, bound.get());
        rows.push(Row {
            check: "backup age".into(),
            bound: format!("<= {bound}"),
            measured: format!("max {} ({} backups seen)", fmt_ms(o.max_age_ms), o.backups),
            pass: o.violations.is_empty(),
        });
        v.extend(o.violations);
    }
    let (lost_n, rolled) = match &d.lost {
        Some(o) => {
            let ok = u64::try_from(o.lost).unwrap_or(u64::MAX) <= b.lost_writes;
            let extra = if o.rolled_back > 0 {
                format!(", {} rolled back by a restore (accepted)", o.rolled_back)
            } else {
                String::new()
            };
            rows.push(Row {
                check: "lost writes".into(),
                bound: format!("<= {}", b.lost_writes),
                measured: format!(
                    "{} of {} keys ({} writes acknowledged){extra}",
                    o.lost, o.keys, d.ledger_acked
                ),
                pass: ok,
            });
            if !ok {
                v.extend(o.violations.iter().cloned());
            }
            (Some(o.lost), Some(o.rolled_back))
        }
        None => {
            rows.push(Row {
                check: "lost writes".into(),
                bound: format!("<= {}", b.lost_writes),
                measured: "not checked (no final read-back)".into(),
                pass: false,
            });
            (None, None)
        }
    };
    v.extend(d.live_violations.iter().cloned());
    let live = |c: Check, name: &str, bound: &str, extra: String| Row {
        check: name.into(),
        bound: bound.into(),
        measured: format!("{} violations{extra}", count(&d.live_violations, c)),
        pass: count(&d.live_violations, c) == 0,
    };
    rows.push(live(
        Check::LeaderPerTerm,
        "one leader per term",
        "0 violations",
        format!(" ({} terms seen)", d.leader_terms),
    ));
    rows.push(live(
        Check::Revision,
        "revision never goes back",
        "0 violations",
        String::new(),
    ));
    rows.push(live(
        Check::StaleRead,
        "no stale reads",
        "0 violations",
        format!(" ({} reads)", d.load.reads_ok),
    ));
    let finals = d.checkpoints.iter().filter(|c| c.final_check).count();
    rows.push(live(
        Check::KvHash,
        "KV hashes equal",
        "0 violations",
        format!(" ({} checkpoints, {finals} final)", d.checkpoints.len()),
    ));
    if finals == 0 && !d.interrupted {
        v.push(Violation::new(
            d.run_end,
            Check::KvHash,
            "no final KV hash checkpoint was taken",
        ));
        if let Some(r) = rows.last_mut() {
            r.pass = false;
        }
    }
    let injected = events.iter().filter(|e| e.outcome == "injected").count();
    if b.min_faults > 0 || s.chaos.is_some() {
        let ok = u64::try_from(injected).unwrap_or(u64::MAX) >= b.min_faults;
        if !ok {
            v.push(Violation::new(
                d.run_end,
                Check::Faults,
                format!(
                    "{injected} faults injected, fewer than bounds.minFaults {}",
                    b.min_faults
                ),
            ));
        }
        rows.push(Row {
            check: "faults injected".into(),
            bound: format!(">= {}", b.min_faults),
            measured: format!("{injected} ({} fault-log records)", d.faults.len()),
            pass: ok,
        });
    }
    for e in &d.errors {
        v.push(Violation::new(d.run_end, Check::Run, e.clone()));
    }
    if d.interrupted {
        v.push(Violation::new(
            d.run_end,
            Check::Run,
            "the run was interrupted (Ctrl-C or SIGTERM)",
        ));
    }
    v.sort_by_key(|x| (x.at, x.check));
    let mut counts = BTreeMap::new();
    for x in &v {
        *counts.entry(x.check.as_str().to_string()).or_insert(0) += 1;
    }
    let pass = v.is_empty() && rows.iter().all(|r| r.pass);
    let summary = Summary {
        scenario: s.name.clone(),
        platform: format!("{:?}", d.platform).to_lowercase(),
        pass,
        interrupted: d.interrupted,
        started: rfc3339(d.started),
        run_seconds: d.run_end.saturating_sub(d.started) as f64 / 1000.0,
        bounds: rows,
        recovery: stats,
        availability,
        faults_injected: injected,
        writes_ok: d.load.writes_ok,
        writes_failed: d.load.writes_failed,
        reads_ok: d.load.reads_ok,
        reads_failed: d.load.reads_failed,
        errors_by_category: d.load.errors.clone(),
        lost_writes: lost_n,
        rolled_back: rolled,
        violation_counts: counts,
        violations: v,
        notes: d
            .notes
            .iter()
            .map(|(at, n)| format!("{}: {n}", rfc3339(*at)))
            .collect(),
    };
    (
        summary,
        Derived {
            events,
            recoveries: recs,
            spans,
        },
    )
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
    let recovery_hist = hist::of(
        &derived
            .recoveries
            .iter()
            .filter_map(Recovery::millis)
            .collect::<Vec<_>>(),
    );
    put("recovery-latency.hgrm", hist::hgrm(&recovery_hist, 1.0))?;
    put("write-latency.hgrm", hist::hgrm(&d.load.write_us, 1000.0))?;
    put("read-latency.hgrm", hist::hgrm(&d.load.read_us, 1000.0))?;
    put("events.csv", files::events(&derived, &d.notes))?;
    put("probes.csv", files::probes(&d.samples))?;
    put("checkpoints.csv", files::checkpoints(&d.checkpoints))?;
    let bounds = [
        ("recoveryP99", ms(d.scenario.bounds.recovery_p99.get())),
        ("recoveryMax", ms(d.scenario.bounds.recovery_max.get())),
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
mod tests {
    use std::path::Path;

    use etcd_operator::faults::{Fault, Role};

    use super::*;
    use crate::invariants::health::tests::healthy;
    use crate::load::ledger::{Ledger, WriteId};

    fn scenario() -> Scenario {
        crate::scenario::parse(
            Path::new("t.yaml"),
            "name: t\nduration: 10s\ncluster: {name: t, size: 3, version: \"3.4.23\"}\n\
             chaos: {killInterval: 5s}\n\
             bounds: {recoveryP99: 2s, recoveryMax: 5s, availability: 0.9, minFaults: 1}\n",
        )
        .expect("parses")
    }

    /// Ten seconds of healthy probes, one kill at 2 s healed at 2.5 s, a
    /// final checkpoint and a clean read-back.
    fn good_run() -> RunData {
        let mut d = RunData::new(scenario(), PlatformKind::Local, None);
        d.started = 0;
        d.run_end = 10_000;
        d.samples = (0..100)
            .map(|i| {
                let mut s = healthy(i * 100, 3, 2);
                if (2_000..2_500).contains(&s.at) {
                    s.views.pop();
                }
                s
            })
            .collect();
        d.faults = vec![FaultRecord {
            time: rfc3339(2_000),
            unix_ms: 2_000,
            fault: Fault::Kill,
            cluster: "t".into(),
            member: "m3".into(),
            role: Role::Leader,
            outcome: "injected".into(),
        }];
        d.checkpoints = vec![Checkpoint {
            at: 9_900,
            revision: 5,
            hashes: vec![("a".into(), Ok((1, 0))), ("b".into(), Ok((1, 0)))],
            final_check: true,
        }];
        d.lost = Some(lost::Outcome {
            keys: 10,
            ..lost::Outcome::default()
        });
        d
    }

    #[test]
    fn a_good_run_passes_with_its_recovery_measured() {
        let (s, derived) = evaluate(&good_run());
        assert!(s.pass, "{:#?}", s.violations);
        assert_eq!(s.recovery.p99_ms, Some(500));
        assert_eq!(derived.recoveries.len(), 1);
        assert!(s.bounds.iter().all(|r| r.pass));
    }

    #[test]
    fn each_broken_bound_fails_the_run_and_is_listed() {
        let mut d = good_run();
        let mut l = Ledger::new();
        l.ack(1, WriteId { writer: 0, seq: 1 }, 3, 100);
        d.lost = Some(lost::check(&l, |_| None, false, 9_999));
        let (s, _) = evaluate(&d);
        assert!(!s.pass);
        assert_eq!(s.lost_writes, Some(1));
        assert_eq!(s.violation_counts.get("lost-writes"), Some(&1));

        let mut d = good_run();
        for x in d.samples.iter_mut().skip(10).take(20) {
            x.write_ok = false;
        }
        let (s, _) = evaluate(&d);
        assert!(
            s.violation_counts.contains_key("availability"),
            "{:?}",
            s.violation_counts
        );

        let mut d = good_run();
        d.faults.clear();
        let (s, _) = evaluate(&d);
        assert!(s.violation_counts.contains_key("faults"));

        let mut d = good_run();
        d.interrupted = true;
        assert!(!evaluate(&d).0.pass);
    }

    #[test]
    fn the_files_are_written_and_the_table_can_be_cut_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = write(dir.path(), &good_run()).expect("written");
        assert!(s.pass);
        let md = std::fs::read_to_string(dir.path().join("report.md")).expect("report");
        let table = summary_table(&md).expect("table");
        assert!(
            table.starts_with("| check | bound | measured | result |"),
            "{table}"
        );
        assert!(table.contains("| recovery p99 | <= 2s | 0.500s"), "{table}");
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("summary.json")).expect("json"),
        )
        .expect("valid");
        assert_eq!(json["pass"], true);
        let events = std::fs::read_to_string(dir.path().join("events.csv")).expect("events");
        assert!(
            events
                .lines()
                .any(|l| l.contains(",recovered,kill,m3,leader,injected,500,")),
            "{events}"
        );
    }
}
