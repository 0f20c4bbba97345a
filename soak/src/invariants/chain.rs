//! Continuous backups: the store must keep up with the cluster. The age of
//! the chain is how long ago the store last held every change of the
//! cluster (status.backup.continuous.syncedTime); it must never exceed the
//! bound. Before the store first held everything, the age counts from the
//! start of the run.

use std::time::Duration;

use super::{Check, Violation};
use crate::history::{Ms, Sample, rfc3339};

/// What the chain check found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Oldest the chain got, in ms.
    pub max_age_ms: u64,
    /// One violation per stretch of time the chain was too old.
    pub violations: Vec<Violation>,
}

/// Checks the samples of a run that started at `start`.
pub fn check(samples: &[Sample], start: Ms, bound: Duration) -> Outcome {
    let bound_ms = u64::try_from(bound.as_millis()).unwrap_or(u64::MAX);
    let mut out = Outcome::default();
    let mut stale = false;
    let mut synced = None;
    for s in samples {
        let published = s.published.as_ref();
        if let Some(t) = published.and_then(|p| p.chain_synced) {
            synced = Some(synced.map_or(t, |old: Ms| old.max(t)));
        }
        let age = s.at.saturating_sub(synced.unwrap_or(start));
        out.max_age_ms = out.max_age_ms.max(age);
        if age <= bound_ms {
            stale = false;
            continue;
        }
        if !stale {
            let why = published
                .and_then(|p| p.chain_problem.as_deref())
                .map(|e| format!("; status says: {e}"))
                .unwrap_or_default();
            let bound = humantime::format_duration(bound);
            let what = match synced {
                Some(t) => format!(
                    "the store held the cluster's changes only up to {}, more than {bound} ago",
                    rfc3339(t)
                ),
                None => format!("the store has not held the cluster's changes for {bound}"),
            };
            out.violations.push(Violation::new(
                s.at,
                Check::ChainAge,
                format!("{what}{why}"),
            ));
        }
        stale = true;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Published;

    fn sample(at: Ms, synced: Option<Ms>) -> Sample {
        let mut s = Sample::empty(at, 3);
        s.published = Some(Published {
            chain_synced: synced,
            ..Published::default()
        });
        s
    }

    #[test]
    fn a_current_chain_passes_and_a_stalled_one_is_caught_once_per_stretch() {
        let mut samples: Vec<Sample> = (0..30).map(|i| sample(i * 1000, Some(i * 1000))).collect();
        assert!(
            check(&samples, 0, Duration::from_secs(5))
                .violations
                .is_empty()
        );
        // The store stops at 30 s and catches up at 50 s; again at 70 s.
        samples.extend((30..50).map(|i| sample(i * 1000, Some(29_000))));
        samples.extend((50..70).map(|i| sample(i * 1000, Some(i * 1000))));
        samples.extend((70..80).map(|i| sample(i * 1000, Some(69_000))));
        let o = check(&samples, 0, Duration::from_secs(5));
        assert_eq!(o.violations.len(), 2, "{:?}", o.violations);
        assert_eq!(o.violations[0].at, 35_000);
        assert_eq!(o.violations[0].check, Check::ChainAge);
        assert_eq!(o.max_age_ms, 20_000);
        // A sample without the time (a status read that failed) keeps the last one.
        let o = check(
            &[sample(0, Some(0)), sample(1000, None)],
            0,
            Duration::from_secs(5),
        );
        assert!(o.violations.is_empty());
    }

    #[test]
    fn a_chain_never_synced_is_caught() {
        let samples: Vec<Sample> = (0..20).map(|i| sample(i * 1000, None)).collect();
        let o = check(&samples, 0, Duration::from_secs(10));
        assert_eq!(o.violations.len(), 1);
        assert!(
            o.violations[0].message.contains("has not held"),
            "{}",
            o.violations[0].message
        );
    }
}
