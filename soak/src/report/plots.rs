//! The report's plots, drawn with plotters as SVG: client throughput and
//! latency (p50/p99) per second, the availability timeline and recovery
//! time per fault, each with every fault marked (a line at its time) and
//! its recovery (the stretch until the cluster was healthy again shaded).

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::history::{Ms, Sample};
use crate::invariants::health::{Health, assess};
use crate::invariants::recovery::{Recovery, Span};
use crate::ops::series::Second;

const SIZE: (u32, u32) = (960, 360);
const FAULT: RGBColor = RGBColor(214, 39, 40);
const RECOVERY: RGBColor = RGBColor(255, 127, 14);
const OK: RGBColor = RGBColor(44, 160, 44);
const BLUE_: RGBColor = RGBColor(31, 119, 180);
const PURPLE: RGBColor = RGBColor(148, 103, 189);

/// The run's faults and recoveries, on the plots' time axis.
#[derive(Debug, Clone, Copy)]
pub struct Marks<'a> {
    /// Second 0 (unix ms).
    pub start: Ms,
    /// The end of the axis (unix ms).
    pub end: Ms,
    /// Each fault with its recovery.
    pub recoveries: &'a [Recovery],
}

impl Marks<'_> {
    fn x(&self, at: Ms) -> f64 {
        (at as f64 - self.start as f64) / 1000.0
    }

    fn x_max(&self) -> f64 {
        self.x(self.end).max(1.0)
    }
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Shades each recovery and draws a line at each fault.
fn mark(chart: &mut Chart<'_, '_>, m: &Marks<'_>, y_max: f64) -> Result<(), String> {
    let spans = m.recoveries.iter().filter(|r| !r.no_effect).map(|r| {
        let to = r.recovered_at.unwrap_or(m.end);
        Rectangle::new(
            [(m.x(r.start()), 0.0), (m.x(to), y_max)],
            RECOVERY.mix(0.15).filled(),
        )
    });
    chart
        .draw_series(spans)
        .map_err(err)?
        .label("recovering")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], RECOVERY.mix(0.3).filled()));
    let lines = m.recoveries.iter().map(|r| {
        let x = m.x(r.event.at);
        PathElement::new(vec![(x, 0.0), (x, y_max)], FAULT.mix(0.7).stroke_width(1))
    });
    chart
        .draw_series(lines)
        .map_err(err)?
        .label("fault")
        .legend(|(x, y)| PathElement::new(vec![(x, y - 6), (x, y + 6)], FAULT));
    Ok(())
}

fn finish<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(err)
}

fn frame<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    title: &str,
    x_max: f64,
    y_max: f64,
    y_desc: &str,
) -> Result<Chart<'a, 'b>, String> {
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the load started")
        .y_desc(y_desc)
        .y_labels(if y_desc.is_empty() { 0 } else { 10 })
        .light_line_style(BLACK.mix(0.05))
        .draw()
        .map_err(err)?;
    Ok(chart)
}

/// Operations answered and failed per second.
pub fn throughput(series: &[Second], m: &Marks<'_>) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        let y_max = series
            .iter()
            .map(|s| f64::from(s.ok.max(s.failed)))
            .fold(1.0, f64::max)
            * 1.15;
        let mut c = frame(
            &root,
            "client throughput",
            m.x_max(),
            y_max,
            "operations per second",
        )?;
        mark(&mut c, m, y_max)?;
        let at = |s: &Second| f64::from(s.t) + 0.5;
        c.draw_series(LineSeries::new(
            series.iter().map(|s| (at(s), f64::from(s.ok))),
            BLUE_.stroke_width(2),
        ))
        .map_err(err)?
        .label("answered")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLUE_.stroke_width(2)));
        c.draw_series(LineSeries::new(
            series.iter().map(|s| (at(s), f64::from(s.failed))),
            FAULT.stroke_width(1),
        ))
        .map_err(err)?
        .label("failed or unknown")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], FAULT));
        finish(&mut c)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// p50 and p99 latency of the answered operations per second.
pub fn latency(series: &[Second], m: &Marks<'_>) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        let y_max = series.iter().map(|s| s.p99_ms).fold(1.0, f64::max) * 1.15;
        let mut c = frame(&root, "client latency per second", m.x_max(), y_max, "ms")?;
        mark(&mut c, m, y_max)?;
        let busy = || series.iter().filter(|s| s.ok > 0);
        let at = |s: &Second| f64::from(s.t) + 0.5;
        c.draw_series(LineSeries::new(
            busy().map(|s| (at(s), s.p99_ms)),
            PURPLE.stroke_width(2),
        ))
        .map_err(err)?
        .label("p99")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], PURPLE.stroke_width(2)));
        c.draw_series(LineSeries::new(
            busy().map(|s| (at(s), s.p50_ms)),
            OK.stroke_width(2),
        ))
        .map_err(err)?
        .label("p50")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], OK.stroke_width(2)));
        finish(&mut c)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// Two bands over time: quorum write and read answered (upper), and the
/// cluster healthy (lower), green where yes and red where no.
pub fn availability(samples: &[Sample], m: &Marks<'_>) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (SIZE.0, 240)).into_drawing_area();
        let mut c = frame(&root, "availability", m.x_max(), 2.0, "")?;
        // The bands carry their names; the y axis means nothing here.
        type Good = fn(&Sample) -> bool;
        let bands: [(f64, Good); 2] = [
            (1.1, |s| s.write_ok && s.read_ok),
            (0.1, |s| matches!(assess(s), Health::Healthy)),
        ];
        for (y, good) in bands {
            let cells = samples.windows(2).map(|w| {
                let color = if good(&w[0]) {
                    OK.mix(0.8)
                } else {
                    FAULT.mix(0.9)
                };
                Rectangle::new([(m.x(w[0].at), y), (m.x(w[1].at), y + 0.8)], color.filled())
            });
            c.draw_series(cells).map_err(err)?;
        }
        let lines = m.recoveries.iter().map(|r| {
            let x = m.x(r.event.at);
            PathElement::new(vec![(x, 0.0), (x, 2.0)], BLACK.mix(0.6))
        });
        c.draw_series(lines).map_err(err)?;
        root.draw(&Text::new(
            "quorum write + read answered",
            (70, 60),
            ("sans-serif", 13),
        ))
        .map_err(err)?;
        root.draw(&Text::new(
            "membership healthy",
            (70, 140),
            ("sans-serif", 13),
        ))
        .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// Recovery time per fault, the bounds as dashed lines, unrecovered faults
/// as crosses at the top, unhealthy stretches shaded along the bottom.
pub fn recovery(
    title: &str,
    m: &Marks<'_>,
    spans: &[Span],
    bounds: &[(String, u64)],
) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        let worst = m
            .recoveries
            .iter()
            .filter_map(Recovery::millis)
            .chain(bounds.iter().map(|b| b.1))
            .max()
            .unwrap_or(1000) as f64
            / 1000.0;
        let y_max = (worst * 1.15).max(1.0);
        let mut c = frame(&root, title, m.x_max(), y_max, "recovery time (s)")?;
        let band = y_max * 0.02;
        c.draw_series(spans.iter().map(|s| {
            Rectangle::new(
                [(m.x(s.from), 0.0), (m.x(s.to.unwrap_or(m.end)), band)],
                FAULT.mix(0.4).filled(),
            )
        }))
        .map_err(err)?
        .label("unhealthy")
        .legend(|(x, y)| Rectangle::new([(x, y - 4), (x + 14, y + 4)], FAULT.mix(0.4).filled()));
        for (label, ms) in bounds {
            let y = *ms as f64 / 1000.0;
            c.draw_series(DashedLineSeries::new(
                vec![(0.0, y), (m.x_max(), y)],
                6,
                4,
                FAULT.stroke_width(1),
            ))
            .map_err(err)?;
            c.draw_series(std::iter::once(Text::new(
                label.clone(),
                (m.x_max() * 0.01, y + y_max * 0.01),
                ("sans-serif", 12).into_font().color(&FAULT),
            )))
            .map_err(err)?;
        }
        c.draw_series(m.recoveries.iter().filter_map(|r| {
            r.millis()
                .map(|ms| Circle::new((m.x(r.event.at), ms as f64 / 1000.0), 4, BLUE_.filled()))
        }))
        .map_err(err)?
        .label("recovered")
        .legend(|(x, y)| Circle::new((x + 6, y), 4, BLUE_.filled()));
        c.draw_series(
            m.recoveries
                .iter()
                .filter(|r| r.millis().is_none() && !r.no_effect)
                .map(|r| Cross::new((m.x(r.event.at), y_max * 0.97), 5, FAULT.stroke_width(2))),
        )
        .map_err(err)?
        .label("not recovered")
        .legend(|(x, y)| Cross::new((x + 6, y), 4, FAULT.stroke_width(2)));
        finish(&mut c)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Sample;
    use crate::invariants::recovery::FaultEvent;

    fn recoveries() -> Vec<Recovery> {
        let ev = |at: Ms| FaultEvent {
            at,
            fault: "kill".into(),
            members: vec!["m1".into()],
            roles: vec!["leader".into()],
            outcome: "injected".into(),
            operator: false,
        };
        vec![
            Recovery::logged(ev(10_000), Some(10_600)),
            Recovery::logged(ev(20_000), None),
        ]
    }

    #[test]
    fn every_plot_is_one_svg_with_its_marks() {
        let recs = recoveries();
        let m = Marks {
            start: 0,
            end: 30_000,
            recoveries: &recs,
        };
        let series: Vec<Second> = (0..30)
            .map(|t| Second {
                t,
                ok: 100,
                failed: u32::from(t == 10),
                p50_ms: 2.0,
                p99_ms: 9.0,
            })
            .collect();
        let samples: Vec<Sample> = (0..300).map(|i| Sample::empty(i * 100, 3)).collect();
        let spans = [Span {
            from: 20_000,
            to: None,
            reason: "m1 <down>".into(),
        }];
        for (svg, label) in [
            (throughput(&series, &m).expect("throughput"), "fault"),
            (latency(&series, &m).expect("latency"), "p99"),
            (
                availability(&samples, &m).expect("availability"),
                "quorum write",
            ),
        ] {
            assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
            assert_eq!(svg.matches("<svg").count(), 1);
            assert!(svg.contains(label), "{label}: {svg}");
        }
        let r = recovery(
            "smoke & co",
            &m,
            &spans,
            &[("recoveryMax 20s".into(), 20_000)],
        )
        .expect("r");
        assert!(r.contains("smoke &amp; co"), "the title is escaped");
        assert!(r.contains("recoveryMax 20s") && r.contains("not recovered"));
    }
}
