//! The checks of a scenario's `standby` section: what the standby needs of
//! the primary (continuous backups, a history that never goes back), what
//! the second monkey can do to it, and its durations; and the loss of the
//! primary (`standby.losePrimaryAt`, `bounds.lostOnPromotion`).

use std::time::Duration;

use etcd_operator::validate as spec_check;

use crate::scenario::{DataLoss, FaultKind, Scenario, Standby, Target};

/// Longest `standby.maxLag` and `standby.catchUp` (a week, as every
/// duration of a scenario).
const WEEK: Duration = Duration::from_secs(7 * 86_400);

/// Reports each problem of `s.standby` through `err(field, message)`.
pub(super) fn check(s: &Scenario, sb: &Standby, err: &mut impl FnMut(&str, String)) {
    let name = Standby::name(&s.cluster.name);
    if let Err(e) = spec_check::check_name(&name) {
        err(
            "cluster.name",
            format!("the standby is named {name:?} (cluster.name and -standby): {e}"),
        );
    }
    let (lo, hi) = etcd_operator::crd::spec_field_bounds("size");
    let (lo, hi) = (lo.unwrap_or(1), hi.unwrap_or(9));
    if !(lo..=hi).contains(&i128::from(sb.size)) {
        err(
            "standby.size",
            format!(
                "must be between {lo} and {hi} (as a cluster's size), got {}",
                sb.size
            ),
        );
    }
    let continuous = s
        .cluster
        .spec
        .backup
        .as_ref()
        .is_some_and(|b| b.continuous.is_some());
    if !continuous {
        err(
            "standby",
            "follows the cluster's continuous backups: set cluster.backup.continuous \
             (segmentInterval: 1s, say)"
                .into(),
        );
    }
    if s.bounds.data_loss == DataLoss::SinceBackup {
        err(
            "bounds.dataLoss",
            "sinceBackup lets the cluster be rebuilt from a backup (its revisions go back), \
             which a standby cannot follow: drop it, or drop standby"
                .into(),
        );
    }
    if !s.operator_healing {
        err(
            "operatorHealing",
            "must be true with a standby: a paused cluster takes no backups to follow".into(),
        );
    }
    if sb.stream
        && s.cluster
            .spec
            .tls
            .as_ref()
            .is_some_and(|t| t.client.is_some())
    {
        err(
            "standby.stream",
            "a cluster with client TLS needs the standby to hold a client certificate \
             (spec.standby.stream.tlsPath), which the soak does not set up: set stream: false \
             or drop cluster.tls.client"
                .into(),
        );
    }
    for (field, d) in [
        ("standby.maxLag", sb.max_lag),
        ("standby.catchUp", sb.catch_up),
    ] {
        if d.get().is_zero() {
            err(field, "must be more than 0s".into());
        } else if d.get() > WEEK {
            err(field, format!("must be at most 168h (a week), got {d}"));
        }
    }
    match (&s.chaos, sb.chaos) {
        (None, Some(true)) => err(
            "standby.chaos",
            "true needs a chaos section (its options are the standby's monkey's): add one, \
             or drop standby.chaos"
                .into(),
        ),
        (Some(c), _) if sb.chaos_on(true) => {
            if c.fault != FaultKind::Kill {
                err(
                    "chaos.fault",
                    format!(
                        "{} cannot hit the standby (its second monkey kills members only): use \
                         kill, or set standby.chaos: false",
                        c.fault.as_str()
                    ),
                );
            }
            if !matches!(c.target, Target::Random | Target::Leader) {
                err(
                    "chaos.target",
                    format!(
                        "{} cannot aim at the standby's members: use random or leader, or set \
                         standby.chaos: false",
                        c.target.as_str()
                    ),
                );
            }
            if let Some(n) = c.max_kill
                && n > sb.members()
            {
                err(
                    "chaos.maxKill",
                    format!(
                        "must be at most standby.size ({}) when the monkey hits the standby too, \
                         got {n}",
                        sb.size
                    ),
                );
            }
        }
        _ => {}
    }
}

/// Reports each problem of the primary's loss through `err(field,
/// message)`: `standby.losePrimaryAt` inside the run, before no spec change
/// (those are the primary's), and with its bound; `bounds.lostOnPromotion`
/// only with it.
pub(super) fn check_loss(s: &Scenario, err: &mut impl FnMut(&str, String)) {
    let at = s.standby.as_ref().and_then(|sb| sb.lose_primary_at);
    let bound = s.bounds.lost_on_promotion;
    let Some(at) = at else {
        if bound.is_some() {
            err(
                "bounds.lostOnPromotion",
                "applies only when the primary is lost: set standby.losePrimaryAt, or remove it"
                    .into(),
            );
        }
        return;
    };
    if at.get().is_zero() {
        err(
            "standby.losePrimaryAt",
            "must be more than 0s (the standby must follow the primary first)".into(),
        );
    } else if at >= s.duration {
        err(
            "standby.losePrimaryAt",
            format!(
                "must be before the end of the run (duration {}), got {at}",
                s.duration
            ),
        );
    }
    if bound.is_none() {
        err(
            "bounds.lostOnPromotion",
            "must be set when standby.losePrimaryAt is: 0 (a standby streaming live loses \
             nothing) or lastSegment (one following the store: at most the writes of the last \
             segment interval)"
                .into(),
        );
    }
    if let Some(c) = s.changes.iter().find(|c| c.after >= at) {
        err(
            "changes",
            format!(
                "a change after {} comes at or after standby.losePrimaryAt ({at}), when the \
                 primary it would change is gone: move it before, or drop it",
                c.after
            ),
        );
    }
}
