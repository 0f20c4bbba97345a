//! Restore checks on Kubernetes (`spec.backup.restoreCheck`): a backup
//! Job ([`Op::Prove`]) restores the backup, in the claim, into a scratch
//! etcd member inside its own pod (on the pod's loopback, as the local
//! platform's check runs on the machine's), compares its `HashKV` at the
//! backup's revision with the live member's, records the result in the
//! backup's meta and prints it in its report. The Job runs the local
//! platform's check itself ([`crate::platform::local::restore_check`]),
//! so both platforms judge a backup by the same code and the same words.
//!
//! The Job, not the operator, asks the live member for its hash (by the
//! member's client URL, as a backup Job streams a snapshot from it): the
//! scratch member must be compacted to the live member's compaction
//! revision before it is hashed, so both hashes are read while the
//! scratch member runs.

use crate::backup::job::{JobTls, Op, Report};
use crate::backup::proof::RestoreCheck;
use crate::backup::{BackupMeta, Error, Result, Source};

/// The Job's order to check `backup` against `live` (over TLS with the
/// cluster's client certificate Secret mounted, when `live` has TLS).
pub fn prove(backup: &BackupMeta, live: &Source<'_>) -> Op {
    Op::Prove {
        backup: backup.name.clone(),
        member: live.member.into(),
        url: live.url.into(),
        tls: JobTls::of(live.tls),
    }
}

/// The check's result, from the Job's report.
pub fn result(report: Report) -> Result<RestoreCheck> {
    report
        .restore_check
        .ok_or_else(|| Error::Job("the restore check job reported no result".into()))
}
