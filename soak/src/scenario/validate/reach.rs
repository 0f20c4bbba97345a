//! What a run of the scenario's length can reach: the most faults it can
//! inject (the ceiling of `bounds.minFaults`) and the restore checks it
//! can see (`bounds.restoreChecks`).

use etcd_operator::validate as spec_check;

use crate::scenario::{Chaos, Scenario, Target};

/// The most faults (injections, as `bounds.minFaults` counts them) a run of
/// `s` can have. The runner starts the monkey with the load, for the whole
/// `duration`; the monkey's first tick comes `startAfter` plus one
/// `killInterval` after its start, then one per interval, and a tick due
/// when its duration ends does not happen. A tick is one injection, except
/// that the several members a minority or majority tick hits may be logged
/// far enough apart to count as up to that many (capped by `maxKill`).
/// `chaos.maxFaults` caps the records and so the injections.
pub(super) fn fault_ceiling(s: &Scenario, c: &Chaos) -> u64 {
    let after = c.start_after;
    let window = s.duration.get().saturating_sub(after).as_nanos();
    let interval = c.kill_interval.as_nanos().max(1);
    // Ticks at k * interval < window, k >= 1.
    let ticks = u64::try_from(window.saturating_sub(1) / interval).unwrap_or(u64::MAX);
    let largest = s
        .changes
        .iter()
        .filter_map(|ch| ch.size)
        .chain([s.cluster.spec.size])
        .max()
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0);
    let group = match c.target {
        Target::Minority => largest.saturating_sub(1) / 2,
        Target::Majority => largest / 2 + 1,
        _ => 1,
    };
    let per_tick = group
        .min(
            c.max_kill
                .map_or(u64::MAX, |n| u64::try_from(n).unwrap_or(u64::MAX)),
        )
        .max(1);
    let mut most = ticks.saturating_mul(per_tick);
    if let Some(m) = c.max_faults {
        most = most.min(u64::try_from(m).unwrap_or(u64::MAX));
    }
    if c.probability == 0.0 {
        most = 0;
    }
    most
}

/// `bounds.restoreChecks`: needs the checks turned on, and a `min` the
/// run can reach. The operator checks the newest backup at once when it
/// was never checked, else one `restoreCheck.interval` after its last
/// check: a check per interval, or per new backup when backups come more
/// often. A run of `duration` sees at most `duration` over the shorter of
/// the two intervals checks, plus the first.
pub(super) fn restore_checks(s: &Scenario, min: u64, err: &mut impl FnMut(&str, String)) {
    let backup = s.cluster.spec.backup.as_ref();
    let backups = backup.and_then(|b| spec_check::parse_duration(&b.interval).ok());
    let every = backup
        .and_then(|b| b.restore_check.as_ref())
        .map(|c| spec_check::parse_duration(&c.interval));
    let every = match every {
        None => {
            return err(
                "bounds.restoreChecks",
                "needs cluster.backup.restoreCheck (e.g. restoreCheck: {interval: 30s}): \
                 without it the operator runs no restore check"
                    .into(),
            );
        }
        // The operator's own checks name the interval's problem.
        Some(Err(_)) => return,
        Some(Ok(d)) => d,
    };
    if min == 0 {
        return err(
            "bounds.restoreChecks.min",
            "must be at least 1 (remove bounds.restoreChecks to ask for none)".into(),
        );
    }
    let often = backups.map_or(every, |b| b.min(every));
    let most = u64::try_from(s.duration.get().as_nanos() / often.as_nanos().max(1))
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    if min > most {
        err(
            "bounds.restoreChecks.min",
            format!(
                "must be at most {most}, the most checks a run of duration ({}) can see with \
                 cluster.backup.restoreCheck.interval ({}) and cluster.backup.interval ({}) \
                 (one per interval or per new backup, whichever comes more often): lower min \
                 or an interval, got {min}",
                s.duration,
                humantime::format_duration(every),
                backups.map_or("-".to_string(), |b| humantime::format_duration(b)
                    .to_string()),
            ),
        );
    }
}
