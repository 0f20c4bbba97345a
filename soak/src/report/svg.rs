//! An SVG plot of recovery latency over the run: one point per fault (x:
//! when it was injected, y: how long recovery took), colored by fault,
//! unrecovered faults as crosses at the top, the bounds as dashed lines,
//! and the stretches the cluster was unhealthy shaded along the bottom.

use std::fmt::Write as _;

use crate::history::Ms;
use crate::invariants::recovery::{Recovery, Span};

const W: f64 = 900.0;
const H: f64 = 420.0;
const L: f64 = 70.0;
const R: f64 = 20.0;
const T: f64 = 40.0;
const B: f64 = 60.0;

/// What the plot shows.
#[derive(Debug)]
pub struct Plot<'a> {
    /// Title.
    pub title: &'a str,
    /// Start of the run (x = 0).
    pub start: Ms,
    /// End of the plot.
    pub end: Ms,
    /// The faults.
    pub recoveries: &'a [Recovery],
    /// Unhealthy stretches.
    pub spans: &'a [Span],
    /// Bounds, in ms: (label, value).
    pub bounds: &'a [(&'a str, u64)],
}

fn color(fault: &str) -> &'static str {
    match fault {
        "kill" => "#1f77b4",
        "destroy" => "#d62728",
        "resume" => "#ff7f0e",
        _ => "#2ca02c",
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A "nice" tick step for a range.
fn step(range: f64) -> f64 {
    let raw = (range / 6.0).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

/// Renders the plot.
pub fn render(p: &Plot<'_>) -> String {
    let span_s = (p.end.saturating_sub(p.start) as f64 / 1000.0).max(1.0);
    let worst = p
        .recoveries
        .iter()
        .filter_map(Recovery::millis)
        .chain(p.bounds.iter().map(|(_, b)| *b))
        .max()
        .unwrap_or(1000) as f64
        / 1000.0;
    let ymax = (worst * 1.15).max(1.0);
    let x = |ms: Ms| L + (ms.saturating_sub(p.start) as f64 / 1000.0) / span_s * (W - L - R);
    let y = |s: f64| H - B - (s / ymax).min(1.0) * (H - T - B);
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        W / 2.0,
        esc(p.title)
    );
    // Unhealthy stretches.
    for s in p.spans {
        let (x0, x1) = (x(s.from), x(s.to.unwrap_or(p.end)));
        let _ = writeln!(
            o,
            r##"<rect x="{x0:.1}" y="{}" width="{:.1}" height="8" fill="#f4a6a6"><title>unhealthy: {}</title></rect>"##,
            H - B + 2.0,
            (x1 - x0).max(1.0),
            esc(&s.reason)
        );
    }
    // Axes and grid.
    let ys = step(ymax);
    let mut v = 0.0;
    while v <= ymax + 1e-9 {
        let yy = y(v);
        let _ = writeln!(
            o,
            r##"<line x1="{L}" y1="{yy:.1}" x2="{}" y2="{yy:.1}" stroke="#e5e5e5"/><text x="{}" y="{:.1}" text-anchor="end">{v}</text>"##,
            W - R,
            L - 6.0,
            yy + 4.0
        );
        v += ys;
    }
    let xs = step(span_s);
    let mut t = 0.0;
    while t <= span_s + 1e-9 {
        let xx = L + t / span_s * (W - L - R);
        let _ = writeln!(
            o,
            r##"<line x1="{xx:.1}" y1="{}" x2="{xx:.1}" y2="{}" stroke="#999"/><text x="{xx:.1}" y="{}" text-anchor="middle">{t}</text>"##,
            H - B,
            H - B + 5.0,
            H - B + 22.0
        );
        t += xs;
    }
    let _ = writeln!(
        o,
        r##"<line x1="{L}" y1="{T}" x2="{L}" y2="{}" stroke="#333"/><line x1="{L}" y1="{}" x2="{}" y2="{}" stroke="#333"/>"##,
        H - B,
        H - B,
        W - R,
        H - B
    );
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle">time since start of load (s)</text>"#,
        (L + W - R) / 2.0,
        H - 18.0
    );
    let _ = writeln!(
        o,
        r#"<text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {})">recovery time (s)</text>"#,
        (T + H - B) / 2.0,
        (T + H - B) / 2.0
    );
    // Bounds.
    for (label, b) in p.bounds {
        let yy = y(*b as f64 / 1000.0);
        let _ = writeln!(
            o,
            r##"<line x1="{L}" y1="{yy:.1}" x2="{}" y2="{yy:.1}" stroke="#d62728" stroke-dasharray="6 4"/><text x="{}" y="{:.1}" text-anchor="end" fill="#d62728">{}</text>"##,
            W - R,
            W - R - 4.0,
            yy - 4.0,
            esc(label)
        );
    }
    // Faults.
    for r in p.recoveries {
        let xx = x(r.event.at);
        let what = esc(&r.event.describe());
        match r.millis() {
            Some(ms) => {
                let _ = writeln!(
                    o,
                    r#"<circle cx="{xx:.1}" cy="{:.1}" r="4" fill="{}"><title>{what}: {:.3}s</title></circle>"#,
                    y(ms as f64 / 1000.0),
                    color(&r.event.fault),
                    ms as f64 / 1000.0
                );
            }
            None => {
                let yy = y(ymax);
                let _ = writeln!(
                    o,
                    r##"<path d="M{:.1} {:.1} l8 8 m0 -8 l-8 8" stroke="#d62728" stroke-width="2"><title>{what}: not recovered</title></path>"##,
                    xx - 4.0,
                    yy - 4.0
                );
            }
        }
    }
    // Legend.
    let mut lx = L + 10.0;
    for (name, c) in [
        ("kill", "#1f77b4"),
        ("destroy", "#d62728"),
        ("resume (pause)", "#ff7f0e"),
    ] {
        let _ = writeln!(
            o,
            r#"<circle cx="{lx:.1}" cy="{}" r="4" fill="{c}"/><text x="{:.1}" y="{}">{name}</text>"#,
            T - 6.0,
            lx + 8.0,
            T - 2.0
        );
        lx += 110.0;
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invariants::recovery::FaultEvent;

    #[test]
    fn plots_points_crosses_bounds_and_spans() {
        let ev = |at: Ms, fault: &str| FaultEvent {
            at,
            fault: fault.into(),
            members: vec!["m1".into()],
            roles: vec!["leader".into()],
            outcome: "injected".into(),
        };
        let recs = vec![
            Recovery {
                event: ev(10_000, "kill"),
                recovered_at: Some(10_600),
            },
            Recovery {
                event: ev(20_000, "destroy"),
                recovered_at: None,
            },
        ];
        let spans = vec![Span {
            from: 20_000,
            to: None,
            reason: "m1 <down>".into(),
        }];
        let svg = render(&Plot {
            title: "smoke & co",
            start: 0,
            end: 90_000,
            recoveries: &recs,
            spans: &spans,
            bounds: &[("recoveryMax 20s", 20_000)],
        });
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("kill of m1 (leader): 0.600s"));
        assert!(svg.contains("not recovered"));
        assert!(svg.contains("recoveryMax 20s"));
        assert!(svg.contains("smoke &amp; co") && svg.contains("m1 &lt;down&gt;"));
        assert_eq!(svg.matches("<svg").count(), 1);
    }

    #[test]
    fn tick_steps_are_round() {
        assert_eq!(step(90.0), 20.0);
        assert_eq!(step(3600.0), 1000.0);
        assert_eq!(step(6.0), 1.0);
    }
}
