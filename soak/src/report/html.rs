//! report.html: the report as one self-contained page (no file or network
//! it needs besides itself): the verdict, the summary table, the plots
//! inline, latency, every fault with its recovery, the linearizability
//! findings with their timelines, the watchers, and every violation.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

use super::junit::esc;
use super::{Derived, RunData, Summary, hist};
use crate::history::rfc3339;
use crate::invariants::recovery::fmt_ms;

/// Violations listed in full; the rest are counted.
const LIST: usize = 200;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1000px;color:#222}\
h1 .pass{color:#2ca02c}h1 .fail{color:#d62728}table{border-collapse:collapse;margin:.5em 0}\
td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}\
th{background:#f4f4f4}tr.fail td{background:#fde8e8}pre{background:#f7f7f7;padding:.6em;\
overflow-x:auto;font-size:12px}figure{margin:1em 0}.muted{color:#777}";

/// The page; `svgs` are the plots (name, SVG text).
pub fn render(
    d: &RunData,
    s: &Summary,
    derived: &Derived,
    recovery: &Histogram<u64>,
    svgs: &[(&str, String)],
) -> String {
    let sc = &d.scenario;
    let mut o = String::new();
    let (verdict, class) = if s.pass {
        ("PASS", "pass")
    } else {
        ("FAIL", "fail")
    };
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>soak {}: {verdict}</title>\
         <style>{STYLE}</style></head><body>\n<h1>Soak report: {} <span class=\"{class}\">{verdict}</span></h1>\n",
        esc(&sc.name),
        esc(&sc.name)
    );
    if !sc.description.is_empty() {
        let _ = writeln!(o, "<p>{}</p>", esc(&sc.description));
    }
    for e in &d.errors {
        let _ = writeln!(o, "<p><strong>Run error</strong>: {}</p>", esc(e));
    }
    let _ = writeln!(
        o,
        "<p class=\"muted\">Platform {}, started {}, {:.0}s of load; cluster {} ({} members, etcd {}); \
         load {} writers + {} readers at {} ops/s over {} keys.</p>",
        esc(&s.platform),
        esc(&s.started),
        s.run_seconds,
        esc(&sc.cluster.name),
        sc.cluster.spec.size,
        esc(&sc.cluster.spec.version),
        sc.load.writers,
        sc.load.readers,
        sc.load.rate,
        sc.load.keys
    );
    let _ = writeln!(
        o,
        "<h2>Summary</h2>\n<table><tr><th>check</th><th>bound</th><th>measured</th><th>result</th></tr>"
    );
    for r in &s.bounds {
        let _ = writeln!(
            o,
            "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            if r.pass { "pass" } else { "fail" },
            esc(&r.check),
            esc(&r.bound),
            esc(&r.measured),
            if r.pass {
                "pass"
            } else {
                "<strong>FAIL</strong>"
            }
        );
    }
    let _ = writeln!(
        o,
        "</table>\n<p><strong>{verdict}</strong>: {} violations.</p>",
        s.violations.len()
    );
    let _ = writeln!(o, "<h2>Plots</h2>");
    for (name, svg) in svgs {
        let _ = writeln!(o, "<figure title=\"{}\">{svg}</figure>", esc(name));
    }
    let _ = writeln!(
        o,
        "<h2>Latency (ms)</h2>\n<table><tr><th>histogram</th><th>count</th><th>p50</th><th>p90</th>\
         <th>p99</th><th>p99.9</th><th>max</th></tr>"
    );
    for (name, h, scale) in [
        ("recovery", recovery, 1.0),
        ("client write", &d.load.write_us, 1000.0),
        ("client read", &d.load.read_us, 1000.0),
    ] {
        let cells = match hist::top(h, scale) {
            Some(t) => t
                .iter()
                .map(|(_, v)| format!("<td>{v:.1}</td>"))
                .collect::<String>(),
            None => "<td>-</td>".repeat(5),
        };
        let _ = writeln!(o, "<tr><td>{name}</td><td>{}</td>{cells}</tr>", h.len());
    }
    let _ = writeln!(o, "</table>\n<h2>Faults</h2>");
    if derived.recoveries.is_empty() {
        let _ = writeln!(o, "<p>No measured faults.</p>");
    } else {
        let _ = writeln!(
            o,
            "<table><tr><th>time</th><th>fault</th><th>recovery</th></tr>"
        );
        for r in &derived.recoveries {
            let t = r
                .millis()
                .map(fmt_ms)
                .unwrap_or_else(|| "<strong>not recovered</strong>".into());
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{t}</td></tr>",
                rfc3339(r.event.at),
                esc(&r.event.describe())
            );
        }
        let _ = writeln!(o, "</table>");
    }
    let _ = writeln!(o, "<h2>Linearizability and watches</h2>");
    match &s.linearizability {
        Some(l) => {
            let _ = writeln!(
                o,
                "<p>{} operations over {} keys checked in {:.1}s: <strong>{} violations</strong>; \
                 {} unknown outcomes ({} seen applied, {} never applied); {} keys unknown (time bound).</p>",
                l.counts.ops,
                l.keys,
                l.elapsed_ms as f64 / 1000.0,
                l.violations,
                l.counts.unknown_writes,
                l.counts.seen_applied,
                l.counts.never_applied,
                l.unknown_keys.len()
            );
            for f in &l.findings {
                let _ = writeln!(
                    o,
                    "<h3>{} at {}</h3>\n<p>{}</p>\n<pre>{}</pre>",
                    esc(&f.key),
                    rfc3339(f.at / 1000),
                    esc(&f.message),
                    esc(&f.timeline)
                );
            }
        }
        None => {
            let _ = writeln!(
                o,
                "<p>The history was not checked (see the run errors).</p>"
            );
        }
    }
    if let Some(w) = &s.watch {
        let _ = writeln!(
            o,
            "<table><tr><th>watcher</th><th>start</th><th>revisions checked</th><th>events</th>\
             <th>resumptions</th><th>violations</th></tr>"
        );
        for x in &w.watchers {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{:?}</td><td>{}..{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&x.name),
                x.start,
                x.range.0,
                x.range.1,
                x.events,
                x.resumes,
                x.violations
            );
        }
        let _ = writeln!(o, "</table>");
    }
    let _ = writeln!(o, "<h2>Violations</h2>");
    if s.violations.is_empty() {
        let _ = writeln!(o, "<p>None.</p>");
    } else {
        let _ = writeln!(o, "<ul>");
        for v in s.violations.iter().take(LIST) {
            let _ = writeln!(
                o,
                "<li>{} <strong>{}</strong>: {}</li>",
                rfc3339(v.at),
                v.check.as_str(),
                esc(&v.message)
            );
        }
        let _ = writeln!(o, "</ul>");
        if s.violations.len() > LIST {
            let _ = writeln!(
                o,
                "<p>... and {} more (all in summary.json)</p>",
                s.violations.len() - LIST
            );
        }
    }
    if !s.notes.is_empty() {
        let _ = writeln!(o, "<h2>Runner notes</h2><ul>");
        for n in &s.notes {
            let _ = writeln!(o, "<li>{}</li>", esc(n));
        }
        let _ = writeln!(o, "</ul>");
    }
    o.push_str("</body></html>\n");
    o
}
