//! The conditions of a cluster's backups, and of a standby (fed by its
//! source's backups): `StandbyBehind` ([`standby_behind`]). Computed on each pass from
//! `status.backup` (what the schedule and the follower found in the store)
//! and the time: never remembered from an earlier pass, so each clears as
//! soon as its cause is gone. Neither ever makes the cluster `Degraded`: a
//! store that is down does not make the cluster less healthy.
//!
//! * `BackupsFailing`: full backups fail (`status.backup.lastError`), the
//!   follower of continuous backups cannot write its segments, or a backup
//!   in the store no longer checks out (`status.backup.damaged`).
//! * `BackupChainBehind` (continuous backups only): the store does not hold
//!   the cluster's recent changes: the chain ended (cut, or its history
//!   compacted away) until a new full backup, or the store last held every
//!   change longer ago than [`stale_after`] (five segment intervals, at
//!   least 15 s): a store that hangs, a follower that cannot connect.

use std::time::{Duration, SystemTime};

use crate::crd::{BackupStatus, ChainStatus, Condition, StandbyStatus};
use crate::standby::state;

/// How long the store may go without holding every change before the
/// chain counts as behind: five segment intervals, at least 15 s (the
/// follower's status reaches the operator within a few seconds on
/// Kubernetes, where it is read from the follower's log).
pub fn stale_after(segment_interval: Duration) -> Duration {
    (segment_interval * 5).max(Duration::from_secs(15))
}

fn cond(type_: &str, status: bool, reason: &str, message: String) -> Condition {
    Condition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        last_transition_time: None,
    }
}

/// `BackupsFailing`, True while backups fail or a backup is damaged.
pub fn backups_failing(b: &BackupStatus) -> Condition {
    let segments = b.continuous.as_ref().and_then(|c| c.last_error.as_ref());
    match (&b.last_error, segments) {
        (Some(e), _) => cond("BackupsFailing", true, "BackupFailed", e.clone()),
        (None, Some(e)) => cond(
            "BackupsFailing",
            true,
            "SegmentsFailing",
            format!("continuous backups cannot be written: {e}"),
        ),
        (None, None) if !b.damaged.is_empty() => cond(
            "BackupsFailing",
            true,
            "BackupDamaged",
            format!(
                "backups in the store no longer check out (not counted as kept): {}",
                b.damaged.join(", ")
            ),
        ),
        (None, None) if b.waiting.is_some() => cond(
            "BackupsFailing",
            false,
            "BackupsWaiting",
            b.waiting.clone().unwrap_or_default(),
        ),
        (None, None) => cond(
            "BackupsFailing",
            false,
            "BackupsTaken",
            match &b.last_backup {
                Some(name) => format!("the last backup, {name}, was taken and verified"),
                None => "no backup taken yet".into(),
            },
        ),
    }
}

/// When the store last held every change of `c`, if it said.
fn synced(c: &ChainStatus) -> Option<SystemTime> {
    humantime::parse_rfc3339(c.synced_time.as_deref()?).ok()
}

/// `BackupChainBehind` at `now`, for continuous backups written every
/// `segment_interval` (none before the follower said anything).
pub fn chain_behind(
    b: &BackupStatus,
    segment_interval: Duration,
    now: SystemTime,
) -> Option<Condition> {
    const TYPE: &str = "BackupChainBehind";
    let c = b.continuous.as_ref()?;
    if let Some(problem) = &c.problem {
        return Some(cond(TYPE, true, "ChainEnded", problem.clone()));
    }
    let limit = stale_after(segment_interval);
    let error = c
        .last_error
        .as_ref()
        .map(|e| format!(": {e}"))
        .unwrap_or_default();
    let Some(at) = synced(c) else {
        return Some(match &c.last_error {
            Some(_) => cond(
                TYPE,
                true,
                "FollowerFailing",
                format!("continuous backups have not reached the store yet{error}"),
            ),
            None => cond(
                TYPE,
                false,
                "Starting",
                "the follower of continuous backups is starting".into(),
            ),
        });
    };
    let age = now.duration_since(at).unwrap_or_default();
    let age_s = format!("{:.1} s", age.as_secs_f64());
    Some(if age > limit {
        cond(
            TYPE,
            true,
            "StoreBehind",
            format!(
                "the store holds the cluster's changes only up to {} ({age_s} ago; at most \
                 {limit:?}, five segment intervals, expected): changes since are not protected{error}",
                c.synced_time.as_deref().unwrap_or_default()
            ),
        )
    } else {
        cond(
            TYPE,
            false,
            "ChainCurrent",
            format!(
                "the store holds every change up to {age_s} ago (chain of {}: {} segments, \
                 revision {})",
                c.base, c.segments, c.last_revision
            ),
        )
    })
}

/// How far a standby may lag its source (the time since the source wrote
/// the first revision not applied) before it counts as behind.
pub const STANDBY_LAG: std::time::Duration = std::time::Duration::from_secs(60);

/// `StandbyBehind`, computed from `s` on each pass: True while the standby
/// is stopped, diverged or lags its source by more than [`STANDBY_LAG`];
/// False while it follows (or once promoted, saying what it applied).
pub fn standby_behind(s: &StandbyStatus) -> crate::crd::Condition {
    const TYPE: &str = "StandbyBehind";
    let applied = format!(
        "revision {} of {} (written {})",
        s.applied_revision,
        s.source,
        s.applied_time.as_deref().unwrap_or("at an unknown time")
    );
    let why = s.message.clone().unwrap_or_default();
    match s.state.as_str() {
        state::STOPPED => cond(TYPE, true, "Stopped", why),
        state::DIVERGED => cond(TYPE, true, "Diverged", why),
        state::PROMOTED => cond(
            TYPE,
            false,
            "Promoted",
            format!(
                "promoted at {}: a cluster of its own; the last change applied was {applied}",
                s.promoted_at.as_deref().unwrap_or("?")
            ),
        ),
        state::PROMOTING => cond(
            TYPE,
            false,
            "Promoting",
            format!("applying what the store still holds before it goes on alone; at {applied}"),
        ),
        _ if u64::try_from(s.lag_ms).unwrap_or(0) > STANDBY_LAG.as_millis() as u64 => cond(
            TYPE,
            true,
            "Lagging",
            format!(
                "{} source revisions not applied, the first written {:.1} s ago; at {applied}{}",
                s.lag_revisions,
                s.lag_ms as f64 / 1000.0,
                if why.is_empty() {
                    String::new()
                } else {
                    format!("; {why}")
                }
            ),
        ),
        _ => cond(
            TYPE,
            false,
            "Following",
            format!(
                "at {applied}; {} source revisions known and not applied yet",
                s.lag_revisions
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> SystemTime {
        humantime::parse_rfc3339(s).expect("time")
    }

    fn chain(synced: Option<&str>) -> BackupStatus {
        BackupStatus {
            continuous: Some(ChainStatus {
                base: "b1".into(),
                segments: 4,
                last_revision: 40,
                synced_time: synced.map(str::to_string),
                ..ChainStatus::default()
            }),
            ..BackupStatus::default()
        }
    }

    #[test]
    fn a_chain_is_behind_once_the_store_lags_five_intervals_and_clears_when_it_catches_up() {
        let second = Duration::from_secs(1);
        let now = at("2026-12-06T10:00:30Z");
        let fresh = chain(Some("2026-12-06T10:00:29Z"));
        let c = chain_behind(&fresh, second, now).expect("a condition");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "ChainCurrent")
        );
        let mut hung = chain(Some("2026-12-06T10:00:10Z"));
        if let Some(c) = &mut hung.continuous {
            c.last_error = Some("cannot write segment 5 of b1: timed out".into());
        }
        let c = chain_behind(&hung, second, now).expect("a condition");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "StoreBehind")
        );
        assert!(
            c.message.contains("20.0 s ago") && c.message.contains("timed out"),
            "{}",
            c.message
        );
        // A longer interval allows longer.
        let c = chain_behind(&hung, Duration::from_secs(10), now).expect("a condition");
        assert_eq!(c.status, "False");
        // Caught up: the same status, fresh, clears it.
        assert_eq!(
            chain_behind(&fresh, second, now).map(|c| c.status),
            Some("False".into())
        );
        assert_eq!(chain_behind(&BackupStatus::default(), second, now), None);
    }

    #[test]
    fn an_ended_chain_and_a_follower_that_never_reached_the_store_are_behind() {
        let now = at("2026-12-06T10:00:30Z");
        let mut ended = chain(Some("2026-12-06T10:00:29Z"));
        if let Some(c) = &mut ended.continuous {
            c.problem = Some("segment 9 of b1 is missing".into());
        }
        let c = chain_behind(&ended, Duration::from_secs(1), now).expect("a condition");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "ChainEnded")
        );
        let mut never = chain(None);
        let c = chain_behind(&never, Duration::from_secs(1), now).expect("a condition");
        assert_eq!(c.reason, "Starting");
        if let Some(c) = &mut never.continuous {
            c.last_error = Some("cannot list the backups: refused".into());
        }
        let c = chain_behind(&never, Duration::from_secs(1), now).expect("a condition");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "FollowerFailing")
        );
    }

    #[test]
    fn failing_segments_and_damaged_backups_are_backups_failing() {
        let mut b = chain(Some("2026-12-06T10:00:29Z"));
        assert_eq!(backups_failing(&b).status, "False");
        b.damaged = vec!["b0".into()];
        assert_eq!(backups_failing(&b).reason, "BackupDamaged");
        if let Some(c) = &mut b.continuous {
            c.last_error = Some("store down".into());
        }
        assert_eq!(backups_failing(&b).reason, "SegmentsFailing");
        b.last_error = Some("backup failed".into());
        assert_eq!(backups_failing(&b).reason, "BackupFailed");
    }

    fn status(state: &str, lag_ms: i64) -> StandbyStatus {
        StandbyStatus {
            state: state.into(),
            source: "p".into(),
            applied_revision: 40,
            lag_revisions: 3,
            lag_ms,
            message: Some("why".into()),
            ..StandbyStatus::default()
        }
    }

    #[test]
    fn a_standby_is_behind_when_stopped_diverged_or_lagging_and_clears_when_it_follows() {
        let reason = |s: &StandbyStatus| {
            let c = standby_behind(s);
            (c.status, c.reason)
        };
        let t = |r: &str| ("True".to_string(), r.to_string());
        let f = |r: &str| ("False".to_string(), r.to_string());
        assert_eq!(reason(&status(state::FOLLOWING, 500)), f("Following"));
        assert_eq!(reason(&status(state::FOLLOWING, 61_000)), t("Lagging"));
        assert_eq!(reason(&status(state::STOPPED, 0)), t("Stopped"));
        assert_eq!(reason(&status(state::DIVERGED, 0)), t("Diverged"));
        assert_eq!(reason(&status(state::PROMOTING, 0)), f("Promoting"));
        let promoted = standby_behind(&status(state::PROMOTED, 0));
        assert!(
            promoted.message.contains("revision 40 of p"),
            "{}",
            promoted.message
        );
    }
}
