//! `spec.backup.continuous`: delta segments between full backups.

use std::time::Duration;

use crate::crd::ContinuousSpec;

/// Shortest time between two delta segments.
pub const MIN_SEGMENT_INTERVAL: Duration = Duration::from_millis(100);
/// Longest time between two delta segments.
pub const MAX_SEGMENT_INTERVAL: Duration = Duration::from_secs(3600);
/// Changes that make a segment due before its interval, by default.
pub const DEFAULT_MAX_EVENTS: usize = 10_000;
/// Fewest changes a segment may wait for.
pub const MIN_MAX_EVENTS: i64 = 1;
/// Most changes a segment may wait for.
pub const MAX_MAX_EVENTS: i64 = 1_000_000;

/// A checked `spec.backup.continuous`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContinuousPolicy {
    /// Time between two segments.
    pub segment_interval: Duration,
    /// A segment is written as soon as this many changes wait.
    pub max_events: usize,
}

/// Checks `spec.backup.continuous`; each problem is `(field, message)`.
pub fn check(spec: &ContinuousSpec) -> Result<ContinuousPolicy, Vec<(&'static str, String)>> {
    let mut errors = Vec::new();
    let interval = match super::parse_duration(&spec.segment_interval) {
        Ok(d) if (MIN_SEGMENT_INTERVAL..=MAX_SEGMENT_INTERVAL).contains(&d) => Some(d),
        Ok(d) => {
            errors.push((
                "spec.backup.continuous.segmentInterval",
                format!(
                    "must be between {} and {}, got {d:?}",
                    humantime::format_duration(MIN_SEGMENT_INTERVAL),
                    humantime::format_duration(MAX_SEGMENT_INTERVAL)
                ),
            ));
            None
        }
        Err(m) => {
            errors.push(("spec.backup.continuous.segmentInterval", m));
            None
        }
    };
    let max_events = match spec.max_events {
        None => Some(DEFAULT_MAX_EVENTS),
        Some(n) if (MIN_MAX_EVENTS..=MAX_MAX_EVENTS).contains(&n) => usize::try_from(n).ok(),
        Some(n) => {
            errors.push((
                "spec.backup.continuous.maxEvents",
                format!(
                    "must be between {MIN_MAX_EVENTS} and {MAX_MAX_EVENTS}, got {n}; leave it out \
                     for {DEFAULT_MAX_EVENTS}"
                ),
            ));
            None
        }
    };
    match (interval, max_events) {
        (Some(segment_interval), Some(max_events)) if errors.is_empty() => Ok(ContinuousPolicy {
            segment_interval,
            max_events,
        }),
        _ => Err(errors),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(interval: &str, max: Option<i64>) -> ContinuousSpec {
        ContinuousSpec {
            segment_interval: interval.into(),
            max_events: max,
        }
    }

    #[test]
    fn bounds_and_defaults() {
        let p = check(&spec("1s", None)).expect("valid");
        assert_eq!(p.segment_interval, Duration::from_secs(1));
        assert_eq!(p.max_events, DEFAULT_MAX_EVENTS);
        assert_eq!(check(&spec("250ms", Some(5))).expect("valid").max_events, 5);
        for bad in ["10ms", "2h", "soon", "", "-1s"] {
            let e = check(&spec(bad, None)).expect_err(bad);
            assert_eq!(e.len(), 1, "{bad}: {e:?}");
            assert_eq!(e[0].0, "spec.backup.continuous.segmentInterval");
        }
        for bad in [0, -3, MAX_MAX_EVENTS + 1] {
            let e = check(&spec("1s", Some(bad))).expect_err("bad max");
            assert_eq!(e[0].0, "spec.backup.continuous.maxEvents", "{e:?}");
        }
    }

    proptest::proptest! {
        /// Any interval in milliseconds is taken inside the bounds and
        /// refused, naming the field, outside.
        #[test]
        fn any_interval_is_judged(ms in 0u64..10_000_000) {
            let r = check(&spec(&format!("{ms}ms"), None));
            let inside = (100..=3_600_000).contains(&ms);
            proptest::prop_assert_eq!(r.is_ok(), inside);
            if let Ok(p) = r {
                proptest::prop_assert_eq!(p.segment_interval, Duration::from_millis(ms));
            }
        }
    }
}
