//! report.md: verdict, the summary table (between markers, so `make
//! soak-smoke` can print it), definitions, the top of each histogram, the
//! faults and every violation with its time.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

use super::{Derived, RunData, Summary, hist};
use crate::history::rfc3339;
use crate::invariants::recovery::fmt_ms;

/// Violations listed in full; the rest are counted.
const LIST: usize = 200;

/// Marks the start of the summary table.
pub const BEGIN: &str = "<!-- summary -->";
/// Marks its end.
pub const END: &str = "<!-- /summary -->";

fn top_row(o: &mut String, name: &str, h: &Histogram<u64>, scale: f64) {
    match hist::top(h, scale) {
        Some(t) => {
            let cells: Vec<String> = t.iter().map(|(_, v)| format!("{v:.1}")).collect();
            let _ = writeln!(o, "| {name} | {} | {} |", h.len(), cells.join(" | "));
        }
        None => {
            let _ = writeln!(o, "| {name} | 0 | - | - | - | - | - |");
        }
    }
}

/// The whole report; `notes` are problems of the report itself (a plot
/// that could not be drawn).
pub fn render(
    d: &RunData,
    s: &Summary,
    derived: &Derived,
    recovery: &Histogram<u64>,
    notes: &[String],
) -> String {
    let sc = &d.scenario;
    let mut o = String::new();
    let verdict = if s.pass { "PASS" } else { "FAIL" };
    let _ = writeln!(o, "# Soak report: {} — {verdict}\n", sc.name);
    if !sc.description.is_empty() {
        let _ = writeln!(o, "{}\n", sc.description);
    }
    for e in &d.errors {
        let _ = writeln!(o, "**Run error**: {e}\n");
    }
    let chaos = sc
        .chaos
        .as_ref()
        .map(|c| {
            format!(
                "{} of {} every {}",
                c.fault.as_str(),
                c.target.as_str(),
                crate::scenario::Dur(c.kill_interval)
            )
        })
        .unwrap_or_else(|| "none".into());
    let _ = writeln!(
        o,
        "Platform {}, started {}, {:.0}s of load; cluster {} ({} members, etcd {}); \
         load {} writers + {} readers at {} ops/s over {} keys; chaos: {chaos}.\n",
        s.platform,
        s.started,
        s.run_seconds,
        sc.cluster.name,
        sc.cluster.spec.size,
        sc.cluster.spec.version,
        sc.load.writers,
        sc.load.readers,
        sc.load.rate,
        sc.load.keys
    );
    let _ = writeln!(o, "## Summary\n\n{BEGIN}");
    let _ = writeln!(
        o,
        "| check | bound | measured | result |\n|---|---|---|---|"
    );
    for r in &s.bounds {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} |",
            r.check,
            r.bound,
            r.measured,
            if r.pass { "pass" } else { "**FAIL**" }
        );
    }
    let _ = writeln!(
        o,
        "\n**{verdict}**: {} violations.\n{END}\n",
        s.violations.len()
    );

    let _ = writeln!(
        o,
        "Definitions: *recovery time* runs {}. A healthy probe finds every member of the spec \
         in the member list, voting, answering with the same leader, and a quorum write and a \
         quorum read answered (resolution: one probe interval, {}); a pause counts from its \
         resume; a fault never recovered counts up to the end of probing (in p99, max and the \
         histogram). *Availability* is the fraction of the run covered by probe ticks whose \
         quorum write and quorum read were both answered within {} (each tick covers the time \
         to the next). Lost writes: at the end every key must hold its newest acknowledged \
         write or one whose outcome was unknown.\n",
        if s.recovery.measured_from.is_empty() {
            "from a fault's time in the fault log to the first healthy probe"
        } else {
            s.recovery.measured_from.as_str()
        },
        sc.probe.interval,
        sc.probe.timeout
    );

    let _ = writeln!(o, "## Latency (ms)\n");
    let _ = writeln!(
        o,
        "| histogram | count | p50 | p90 | p99 | p99.9 | max |\n|---|---|---|---|---|---|---|"
    );
    top_row(&mut o, "recovery", recovery, 1.0);
    top_row(&mut o, "client write", &d.load.write_us, 1000.0);
    top_row(&mut o, "client read", &d.load.read_us, 1000.0);
    let _ = writeln!(
        o,
        "\nClient operations: {} writes acknowledged, {} failed; {} reads answered, {} failed.",
        s.writes_ok, s.writes_failed, s.reads_ok, s.reads_failed
    );
    if !s.errors_by_category.is_empty() {
        let parts: Vec<String> = s
            .errors_by_category
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let _ = writeln!(o, "Failures by kind: {}.", parts.join(", "));
    }

    let _ = writeln!(
        o,
        "\n## Plots\n\n![client throughput](throughput.svg)\n\n![client latency](latency.svg)\n\n\
         ![availability](availability.svg)\n\n![recovery time per fault](recovery.svg)"
    );
    for n in notes {
        let _ = writeln!(o, "\n*{n}*");
    }
    checks(&mut o, s);

    let _ = writeln!(o, "\n## Faults\n");
    if derived.recoveries.is_empty() {
        let _ = writeln!(o, "No measured faults.");
    } else {
        let _ = writeln!(o, "| time | fault | recovery |\n|---|---|---|");
        for r in &derived.recoveries {
            let t = match (r.no_effect, r.millis(), r.effect_at) {
                (true, _, _) => "no effect seen by any probe (not counted)".into(),
                (_, None, _) => "**not recovered**".into(),
                (_, Some(t), Some(seen)) => format!(
                    "{} (from its effect, seen {} after the log)",
                    fmt_ms(t),
                    fmt_ms(seen.saturating_sub(r.event.at))
                ),
                (_, Some(t), None) => fmt_ms(t),
            };
            let _ = writeln!(
                o,
                "| {} | {} | {t} |",
                rfc3339(r.event.at),
                r.event.describe()
            );
        }
    }
    let other: Vec<_> = derived.events.iter().filter(|e| !e.measured()).collect();
    if !other.is_empty() {
        let _ = writeln!(
            o,
            "\nNot measured: {} records (pauses, dry runs, failed injections).",
            other.len()
        );
    }

    let _ = writeln!(o, "\n## Violations\n");
    if s.violations.is_empty() {
        let _ = writeln!(o, "None.");
    }
    for v in s.violations.iter().take(LIST) {
        let _ = writeln!(
            o,
            "- {} **{}**: {}",
            rfc3339(v.at),
            v.check.as_str(),
            v.message
        );
    }
    if s.violations.len() > LIST {
        let _ = writeln!(
            o,
            "- ... and {} more (all in summary.json)",
            s.violations.len() - LIST
        );
    }
    if !s.notes.is_empty() {
        let _ = writeln!(o, "\n## Runner notes\n");
        for n in &s.notes {
            let _ = writeln!(o, "- {n}");
        }
    }
    let _ = writeln!(
        o,
        "\n## Files\n\n`report.html` (this report as one page), `junit.xml`, `summary.json`, \
         `history.jsonl` (every client operation), `events.csv`, `probes.csv`, `checkpoints.csv`, \
         `seconds.csv`, `recovery-latency.hgrm`, `write-latency.hgrm`, `read-latency.hgrm`, \
         `throughput.svg`, `latency.svg`, `availability.svg`, `recovery.svg`, `faults.jsonl`, `logs/`."
    );
    o
}

/// The linearizability and watch checks: counts, each finding with its
/// smallest failing sub-history on a time line, each watcher.
fn checks(o: &mut String, s: &Summary) {
    let _ = writeln!(o, "\n## Linearizability and watches\n");
    match &s.linearizability {
        Some(l) => {
            let c = &l.counts;
            let _ = writeln!(
                o,
                "{} operations in `history.jsonl` over {} keys, checked per key (porcupine's \
                 search, the revision as an extra constraint) in {:.1}s: **{} violations**. \
                 {} writes had an unknown outcome ({} seen applied by a read or a watch, {} \
                 never applied per a complete watch); {} reads failed (not checked).",
                c.ops,
                l.keys,
                l.elapsed_ms as f64 / 1000.0,
                l.violations,
                c.unknown_writes,
                c.seen_applied,
                c.never_applied,
                c.failed_reads
            );
            if !l.unknown_keys.is_empty() {
                let _ = writeln!(
                    o,
                    "\n**Unknown** (the search hit its time bound) for {} keys: {}.",
                    l.unknown_keys.len(),
                    l.unknown_keys.join(", ")
                );
            }
            for f in &l.findings {
                let _ = writeln!(
                    o,
                    "\n### {} {} ({})\n\n{}\n\n```text\n{}```",
                    f.key,
                    rfc3339(f.at / 1000),
                    serde_json::to_value(f.kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    f.message,
                    f.timeline
                );
            }
            if l.violations > l.findings.len() {
                let _ = writeln!(
                    o,
                    "\n... and {} more (`soak lincheck history.jsonl` lists them).",
                    l.violations - l.findings.len()
                );
            }
        }
        None => {
            let _ = writeln!(o, "The history was not checked (see the run errors).");
        }
    }
    if let Some(w) = &s.watch {
        let _ = writeln!(
            o,
            "\n| watcher | start | revisions checked | events | resumptions | violations |\n|---|---|---|---|---|---|"
        );
        for x in &w.watchers {
            let _ = writeln!(
                o,
                "| {} | {} | {}..{} | {} | {} | {} |",
                x.name,
                match x.start {
                    crate::watch::Start::First => "revision 1",
                    crate::watch::Start::Now => "now (revision 0)",
                },
                x.range.0,
                x.range.1,
                x.events,
                x.resumes,
                x.violations
            );
        }
    }
}
