//! The rest of one cluster's screen under its members (`status NAME`
//! locally, `kubectl etcd status NAME` on Kubernetes, both from an
//! `EtcdCluster`): the revision, backups and their age, the continuous
//! chain, the last restore check, the last recovery or restore, and the
//! conditions.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use super::table::{printable, render};
use crate::crd::{EtcdCluster, EtcdClusterStatus};

/// What a cluster's status says beyond its members, a line (or a table)
/// per subject; empty for a cluster with no status yet.
pub fn details(cluster: &EtcdCluster, now: SystemTime) -> String {
    let Some(s) = cluster.status.as_ref() else {
        return String::new();
    };
    let mut out = String::new();
    if let Some(r) = s.revision {
        let _ = writeln!(out, "revision: {r}");
    }
    backups(&mut out, s, now);
    if let Some(r) = &s.restore {
        let _ = writeln!(
            out,
            "restored from: {} at {} ({} segments replayed, revision {}){}",
            printable(&r.backup),
            when(&r.restored_at, now),
            r.replayed_segments,
            r.replayed_revision,
            r.replay_problem
                .as_deref()
                .map_or(String::new(), |p| format!(
                    "; replay stopped: {}",
                    printable(p)
                ))
        );
    }
    if let Some(sb) = &s.standby {
        let at = |t: &Option<String>| t.as_deref().map_or("?".into(), |t| when(t, now));
        let _ = writeln!(
            out,
            "standby of {}{}: {}, at revision {} (written by the source {}); {} revisions \
             known and not applied{}{}",
            printable(&sb.source),
            match sb.via.as_deref() {
                Some(crate::standby::VIA_STREAM) => " (live, from its members)",
                Some(crate::standby::VIA_STORE) => " (from its backups)",
                _ => "",
            },
            printable(&sb.state),
            sb.applied_revision,
            at(&sb.applied_time),
            sb.lag_revisions,
            if sb.lag_ms > 0 {
                format!(", the first written {:.1} s ago", sb.lag_ms as f64 / 1000.0)
            } else {
                String::new()
            },
            sb.message
                .as_deref()
                .map_or(String::new(), |m| format!("; {}", printable(m)))
        );
        if let Some(r) = &sb.rebootstrapped {
            let _ = writeln!(
                out,
                "  created again {} from {} at revision {}: revisions {} to {} never applied \
                 one by one; old data in {}",
                when(&r.at, now),
                printable(&r.backup),
                r.revision,
                r.skipped.from,
                r.skipped.to,
                printable(&r.old_data)
            );
        }
    }
    if let Some(r) = &s.last_recovery {
        let _ = writeln!(
            out,
            "last recovery: rebuilt from {:?} at {}: {} revisions lost",
            r.source,
            when(&r.recovered_at, now),
            r.lost_revisions
        );
    }
    if !s.conditions.is_empty() {
        let mut rows = vec![vec![
            "CONDITION".to_string(),
            "STATUS".into(),
            "REASON".into(),
            "SINCE".into(),
            "MESSAGE".into(),
        ]];
        for c in &s.conditions {
            rows.push(vec![
                printable(&c.type_),
                printable(&c.status),
                printable(&c.reason),
                c.last_transition_time
                    .as_deref()
                    .map_or("-".into(), |t| when(t, now)),
                printable(&c.message),
            ]);
        }
        out.push('\n');
        out.push_str(&render(&rows));
    }
    out
}

/// What a status says of the backups ([`backups`]); empty without.
pub fn backup_lines(status: Option<&EtcdClusterStatus>, now: SystemTime) -> String {
    let mut out = String::new();
    if let Some(s) = status {
        backups(&mut out, s, now);
    }
    out
}

/// The backups' lines: the newest and its age, how many are kept, the
/// next one due, what fails, the chain, the last restore check.
fn backups(out: &mut String, s: &EtcdClusterStatus, now: SystemTime) {
    let Some(b) = s.backup.as_ref() else {
        return;
    };
    if let Some(w) = &b.waiting {
        let _ = writeln!(out, "backups: waiting: {}", printable(w));
        return;
    }
    let newest = match (&b.last_backup, &b.last_backup_time) {
        (Some(name), Some(t)) => format!(
            "newest {} taken {}{}",
            printable(name),
            when(t, now),
            b.last_backup_revision
                .map_or(String::new(), |r| format!(", revision {r}"))
        ),
        _ => "none taken yet".into(),
    };
    let next = b
        .next_backup_time
        .as_deref()
        .map_or(String::new(), |t| format!("; next due {}", when(t, now)));
    let _ = writeln!(out, "backups: {newest}; {} kept{next}", b.kept);
    if let Some(e) = &b.last_error {
        let _ = writeln!(out, "  failing: {}", printable(e));
    }
    if !b.damaged.is_empty() {
        let _ = writeln!(out, "  damaged: {}", printable(&b.damaged.join(", ")));
    }
    if let Some(c) = &b.continuous {
        let synced = c
            .synced_time
            .as_deref()
            .map_or("never".into(), |t| when(t, now));
        let _ = writeln!(
            out,
            "  continuous: {} segments after {}, last revision {}, store holds every change up to {synced}",
            c.segments,
            printable(&c.base),
            c.last_revision
        );
        for (what, text) in [("problem", &c.problem), ("failing", &c.last_error)] {
            if let Some(t) = text {
                let _ = writeln!(out, "    {what}: {}", printable(t));
            }
        }
    }
    if let Some(c) = &b.last_restore_check {
        let _ = writeln!(
            out,
            "restore check of {}: {} {}: {}",
            printable(&c.backup),
            printable(&c.result),
            when(&c.time, now),
            printable(&c.message)
        );
    }
}

/// An RFC 3339 time with how long ago (or in how long) it is.
pub fn when(rfc3339: &str, now: SystemTime) -> String {
    let Ok(t) = humantime::parse_rfc3339_weak(rfc3339) else {
        return printable(rfc3339);
    };
    let whole = |d: Duration| humantime::format_duration(Duration::from_secs(d.as_secs()));
    match now.duration_since(t) {
        Ok(ago) => format!("{rfc3339} ({} ago)", whole(ago)),
        Err(e) => format!("{rfc3339} (in {})", whole(e.duration())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{
        BackupStatus, ChainStatus, Condition, EtcdClusterSpec, Phase, RestoreCheckStatus,
    };

    fn at(t: &str) -> SystemTime {
        humantime::parse_rfc3339_weak(t).expect("a time")
    }

    #[test]
    fn one_screen_says_revision_backups_their_age_checks_and_conditions() {
        let mut c = EtcdCluster::new("demo", EtcdClusterSpec::minimal(3, "3.5.1"));
        c.status = Some(EtcdClusterStatus {
            phase: Phase::Running,
            revision: Some(4242),
            backup: Some(BackupStatus {
                last_backup: Some("demo.u-20261206-100000-000".into()),
                last_backup_time: Some("2026-12-06T10:00:00Z".into()),
                last_backup_revision: Some(4000),
                kept: 3,
                next_backup_time: Some("2026-12-06T10:30:00Z".into()),
                last_error: Some("store refused: 403".into()),
                continuous: Some(ChainStatus {
                    base: "demo.u-20261206-100000-000".into(),
                    segments: 12,
                    last_revision: 4240,
                    synced_time: Some("2026-12-06T10:11:58Z".into()),
                    ..ChainStatus::default()
                }),
                last_restore_check: Some(RestoreCheckStatus {
                    backup: "demo.u-20261206-100000-000".into(),
                    time: "2026-12-06T10:05:00Z".into(),
                    result: "verified".into(),
                    message: "hash 1 = 1".into(),
                }),
                ..BackupStatus::default()
            }),
            conditions: vec![Condition {
                type_: "Available".into(),
                status: "True".into(),
                reason: "QuorumAvailable".into(),
                message: "3 of 3 members serve".into(),
                last_transition_time: Some("2026-12-06T09:00:00Z".into()),
            }],
            ..EtcdClusterStatus::default()
        });
        let text = details(&c, at("2026-12-06T10:12:00Z"));
        for line in [
            "revision: 4242",
            "backups: newest demo.u-20261206-100000-000 taken 2026-12-06T10:00:00Z (12m ago), \
             revision 4000; 3 kept; next due 2026-12-06T10:30:00Z (in 18m)",
            "  failing: store refused: 403",
            "  continuous: 12 segments after demo.u-20261206-100000-000, last revision 4240, \
             store holds every change up to 2026-12-06T10:11:58Z (2s ago)",
            "restore check of demo.u-20261206-100000-000: verified 2026-12-06T10:05:00Z (7m ago): \
             hash 1 = 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line:?} missing in\n{text}"
            );
        }
        let available = text
            .lines()
            .find(|l| l.starts_with("Available"))
            .unwrap_or_default();
        assert!(
            available.contains("QuorumAvailable")
                && available.contains("(1h 12m ago)")
                && available.contains("3 of 3 members serve"),
            "{text}"
        );
    }

    #[test]
    fn a_cluster_without_status_or_backups_says_only_what_it_has() {
        let mut c = EtcdCluster::new("demo", EtcdClusterSpec::minimal(1, "3.5.1"));
        assert_eq!(details(&c, SystemTime::now()), "");
        c.status = Some(EtcdClusterStatus {
            backup: Some(BackupStatus::default()),
            ..EtcdClusterStatus::default()
        });
        let text = details(&c, SystemTime::now());
        assert_eq!(text, "backups: none taken yet; 0 kept\n");
        c.status = Some(EtcdClusterStatus {
            backup: Some(BackupStatus {
                waiting: Some("until promoted".into()),
                ..BackupStatus::default()
            }),
            ..EtcdClusterStatus::default()
        });
        let text = details(&c, SystemTime::now());
        assert_eq!(text, "backups: waiting: until promoted\n");
    }

    #[test]
    fn a_standby_says_whose_where_and_how_far_behind() {
        let mut c = EtcdCluster::new("dr", EtcdClusterSpec::minimal(1, "3.5.1"));
        c.status = Some(EtcdClusterStatus {
            standby: Some(crate::crd::StandbyStatus {
                state: "Following".into(),
                source: "prod".into(),
                applied_revision: 120,
                applied_time: Some("2026-12-06T10:00:00.000Z".into()),
                lag_revisions: 4,
                lag_ms: 1500,
                ..Default::default()
            }),
            ..EtcdClusterStatus::default()
        });
        let text = details(&c, at("2026-12-06T10:00:02Z"));
        assert_eq!(
            text,
            "standby of prod: Following, at revision 120 (written by the source 2026-12-06T10:00:00.000Z \
             (2s ago)); 4 revisions known and not applied, the first written 1.5 s ago\n"
        );
        if let Some(sb) = c.status.as_mut().and_then(|s| s.standby.as_mut()) {
            sb.rebootstrapped = Some(crate::crd::StandbyRebootstrap {
                at: "2026-12-06T09:59:00Z".into(),
                skipped: crate::crd::RevisionRange { from: 90, to: 110 },
                backup: "prod.u-1".into(),
                revision: 110,
                old_data: "/s/clusters/dr/lost-1".into(),
            });
        }
        let text = details(&c, at("2026-12-06T10:00:02Z"));
        assert!(
            text.ends_with(
                "\n  created again 2026-12-06T09:59:00Z (1m 2s ago) from prod.u-1 at revision 110: \
                 revisions 90 to 110 never applied one by one; old data in /s/clusters/dr/lost-1\n"
            ),
            "{text}"
        );
    }
}
