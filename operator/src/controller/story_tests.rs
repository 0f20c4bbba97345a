//! The story's words for backup milestones and failures.

use std::time::Instant;

use super::{Story, backup_milestones};
use crate::controller::facts::{Failed, Failure};
use crate::crd::{BackupStatus, RestoreCheckStatus};
use crate::plan::Step;
use crate::platform::NoticeType;

fn taken(name: &str) -> BackupStatus {
    BackupStatus {
        last_backup: Some(name.into()),
        last_backup_time: Some("2026-12-06T10:00:00Z".into()),
        last_backup_revision: Some(42),
        kept: 2,
        next_backup_time: Some("2026-12-06T10:30:00Z".into()),
        ..BackupStatus::default()
    }
}

fn said(old: Option<&BackupStatus>, new: &BackupStatus) -> Vec<(NoticeType, &'static str)> {
    backup_milestones(old, new)
        .into_iter()
        .map(|n| (n.type_, n.reason))
        .collect()
}

#[test]
fn backups_taken_failing_and_checked_are_told_once_each() {
    // What is there at start (or when the schedule starts again) is no
    // news.
    assert!(said(None, &taken("b1")).is_empty());
    let none = BackupStatus::default();
    assert!(
        said(Some(&none), &taken("b1")).is_empty(),
        "listed, not taken"
    );
    assert_eq!(
        said(Some(&taken("b1")), &taken("b2")),
        [(NoticeType::Normal, "BackupTaken")]
    );
    assert!(said(Some(&taken("b2")), &taken("b2")).is_empty());
    let failing = |e: &str| BackupStatus {
        last_error: Some(e.into()),
        ..taken("b2")
    };
    assert_eq!(
        said(Some(&taken("b2")), &failing("attempt 1")),
        [(NoticeType::Warning, "BackupFailed")]
    );
    assert!(
        said(Some(&failing("attempt 1")), &failing("attempt 2")).is_empty(),
        "a failure streak is told once"
    );
    let checked = |result: &str, time: &str| BackupStatus {
        last_restore_check: Some(RestoreCheckStatus {
            backup: "b2".into(),
            time: time.into(),
            result: result.into(),
            message: "hashes".into(),
        }),
        ..taken("b2")
    };
    let t1 = "2026-12-06T11:00:00Z";
    assert_eq!(
        said(Some(&taken("b2")), &checked("verified", t1)),
        [(NoticeType::Normal, "RestoreCheckPassed")]
    );
    assert!(said(Some(&checked("verified", t1)), &checked("verified", t1)).is_empty());
    let t2 = "2026-12-06T12:00:00Z";
    assert_eq!(
        said(Some(&checked("verified", t1)), &checked("mismatch", t2)),
        [(NoticeType::Warning, "RestoreCheckMismatch")]
    );
}

#[test]
fn a_failed_step_is_told_once_and_a_refusal_not_at_all() {
    let mut story = Story::default();
    let now = Instant::now();
    let upgrade = Step::Upgrade {
        member: "demo-1".into(),
        to: "3.9.9".parse().expect("a version"),
    };
    let failure = |refused| {
        Failure::new(
            Failed::Step(upgrade.clone()),
            "upgrade member demo-1 to 3.9.9 failed: no etcd 3.9.9 binary".into(),
            refused,
            None,
            now,
        )
    };
    assert_eq!(story.failed(&failure(true)), None);
    let told = story.failed(&failure(false)).expect("a warning");
    assert_eq!(
        (told.type_, told.reason),
        (NoticeType::Warning, "UpgradeFailed")
    );
    assert_eq!(story.failed(&failure(false)), None, "said once");
}
