//! HdrHistogram percentile files (the `.hgrm` text format HdrHistogram's
//! own tools print and plot) and the top of each histogram for report.md.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

/// A histogram of values from 1 to one hour in ms (or µs), 3 significant
/// digits.
pub fn new() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// A histogram of `values`.
pub fn of(values: &[u64]) -> Histogram<u64> {
    let mut h = new();
    for v in values {
        let _ = h.record((*v).max(1));
    }
    h
}

/// The percentile distribution, values divided by `scale` (1000 to show
/// microseconds as milliseconds).
pub fn hgrm(h: &Histogram<u64>, scale: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    if h.is_empty() {
        let _ = writeln!(
            out,
            "#[Mean    = {:>12}, StdDeviation   = {:>12}]",
            "-", "-"
        );
        let _ = writeln!(out, "#[Max     = {:>12}, Total count    = {:>12}]", "-", 0);
        return out;
    }
    let mut total = 0u64;
    for v in h.iter_quantiles(5) {
        total += v.count_since_last_iteration();
        let q = v.quantile_iterated_to();
        let inv = if q < 1.0 {
            format!("{:>14.2}", 1.0 / (1.0 - q))
        } else {
            format!("{:>14}", "inf")
        };
        let _ = writeln!(
            out,
            "{:>12.3} {:>14.12} {:>10} {inv}",
            v.value_iterated_to() as f64 / scale,
            q,
            total
        );
    }
    let _ = writeln!(
        out,
        "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]",
        h.mean() / scale,
        h.stdev() / scale
    );
    let _ = writeln!(
        out,
        "#[Max     = {:>12.3}, Total count    = {:>12}]",
        h.max() as f64 / scale,
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        h.distinct_values()
    );
    out
}

/// p50, p90, p99, p99.9 and max, divided by `scale`; `None` when empty.
pub fn top(h: &Histogram<u64>, scale: f64) -> Option<[(&'static str, f64); 5]> {
    if h.is_empty() {
        return None;
    }
    let q = |x: f64| h.value_at_quantile(x) as f64 / scale;
    Some([
        ("p50", q(0.5)),
        ("p90", q(0.9)),
        ("p99", q(0.99)),
        ("p99.9", q(0.999)),
        ("max", h.max() as f64 / scale),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_file_and_top() {
        let h = of(&(1..=1000).collect::<Vec<u64>>());
        let text = hgrm(&h, 1.0);
        assert!(text.starts_with("       Value"), "{text}");
        assert!(text.contains("Total count    =         1000"), "{text}");
        let last = text
            .lines()
            .rfind(|l| !l.starts_with('#'))
            .unwrap_or_default();
        assert!(last.trim_start().starts_with("1000.000"), "{last}");
        let t = top(&h, 1.0).expect("some");
        assert_eq!(t[2].0, "p99");
        assert!((t[2].1 - 990.0).abs() <= 1.0, "{t:?}");
        assert!(top(&new(), 1.0).is_none());
        assert!(hgrm(&new(), 1.0).contains("Total count"));
    }
}
