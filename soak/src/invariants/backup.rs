//! Backup age: the newest verified backup (status.backup.lastBackupTime)
//! must never get older than the bound. Before the first backup the age is
//! counted from the start of the run.

use std::time::Duration;

use super::{Check, Violation};
use crate::history::{Ms, Sample, rfc3339};

/// What the backup check found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Oldest the newest backup got, in ms.
    pub max_age_ms: u64,
    /// Backups seen (distinct lastBackupTime values).
    pub backups: usize,
    /// One violation per stretch of time the backup was too old.
    pub violations: Vec<Violation>,
}

/// Checks the samples of a run that started at `start`.
pub fn check(samples: &[Sample], start: Ms, bound: Duration) -> Outcome {
    let bound_ms = u64::try_from(bound.as_millis()).unwrap_or(u64::MAX);
    let mut out = Outcome::default();
    let mut stale = false;
    let mut last_time = None;
    for s in samples {
        let published = s.published.as_ref();
        let time = published.and_then(|p| p.backup_time);
        if time.is_some() && time != last_time {
            out.backups += 1;
            last_time = time;
        }
        let since = last_time.unwrap_or(start);
        let age = s.at.saturating_sub(since);
        out.max_age_ms = out.max_age_ms.max(age);
        if age > bound_ms {
            if !stale {
                let error = published
                    .and_then(|p| p.backup_error.as_deref())
                    .map(|e| format!("; last error: {e}"))
                    .unwrap_or_default();
                let what = match last_time {
                    Some(t) => format!("the newest backup ({}) is older than", rfc3339(t)),
                    None => "no backup has been taken in".to_string(),
                };
                out.violations.push(Violation::new(
                    s.at,
                    Check::BackupAge,
                    format!("{what} {}{error}", humantime::format_duration(bound)),
                ));
            }
            stale = true;
        } else {
            stale = false;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Published;

    fn sample(at: Ms, backup: Option<Ms>) -> Sample {
        let mut s = Sample::empty(at, 3);
        s.published = Some(Published {
            backup_time: backup,
            ..Published::default()
        });
        s
    }

    #[test]
    fn fresh_backups_pass() {
        let samples: Vec<Sample> = (0..100)
            .map(|i| sample(i * 1000, Some((i / 10) * 10_000)))
            .collect();
        let o = check(&samples, 0, Duration::from_secs(15));
        assert!(o.violations.is_empty(), "{:?}", o.violations);
        assert_eq!(o.backups, 10);
        assert_eq!(o.max_age_ms, 9000);
    }

    #[test]
    fn a_stale_backup_is_caught_once_per_stretch() {
        let mut samples: Vec<Sample> = (0..40).map(|i| sample(i * 1000, Some(0))).collect();
        samples.push(sample(41_000, Some(40_000)));
        samples.extend((42..70).map(|i| sample(i * 1000, Some(40_000))));
        let o = check(&samples, 0, Duration::from_secs(25));
        assert_eq!(o.violations.len(), 2, "{:?}", o.violations);
        assert_eq!(o.violations[0].at, 26_000);
        assert_eq!(o.violations[0].check, Check::BackupAge);
        assert_eq!(o.violations[1].at, 66_000);
    }

    #[test]
    fn no_backup_at_all_is_caught() {
        let samples: Vec<Sample> = (0..40).map(|i| sample(i * 1000, None)).collect();
        let o = check(&samples, 0, Duration::from_secs(25));
        assert_eq!(o.violations.len(), 1);
        assert!(
            o.violations[0].message.contains("no backup"),
            "{}",
            o.violations[0].message
        );
    }
}
