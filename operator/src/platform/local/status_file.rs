//! When a cluster's `status.json` is written.
//!
//! The status each pass builds is kept in memory at once (the running
//! operator serves it to `etcd-operator status`, see
//! [`crate::controller::live`]); the file is only what `status` reads when
//! no operator answers. Writing it (a temporary file, fsync, rename) at
//! every pass of every cluster was most of an idle operator's disk work,
//! so it is written when what it says changes, and otherwise only every
//! [`STATUS_FILE_REFRESH`], so that its `observedAt` still tells a stale
//! file (a stopped operator) from a live one. It is also written whenever
//! the disk under it is nearly full: the write failing is how the
//! operator learns the state folder is full.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::crd::EtcdCluster;

/// A status file that says the same is rewritten this often (for its
/// `observedAt`); `status` reading the files counts a file older than
/// this (plus a margin) as stale. With a pass every 5 s a file is at most
/// 25 s old, within the 30 s the chaos monkey trusts a published leader.
pub const STATUS_FILE_REFRESH: Duration = Duration::from_secs(20);
/// Below this much free space under the state folder every status is
/// written, so a full disk shows up as a failed write at once.
pub const LOW_SPACE: u64 = 1 << 20;

/// Whether `new` must be written, the file holding `written` (written at
/// the time given), at `now`, with `free` bytes free under it (`None`
/// when unknown).
pub fn due(
    written: Option<&(EtcdCluster, Instant)>,
    new: &EtcdCluster,
    now: Instant,
    free: Option<u64>,
) -> bool {
    let Some((old, at)) = written else {
        return true;
    };
    now.duration_since(*at) >= STATUS_FILE_REFRESH
        || free.is_none_or(|f| f < LOW_SPACE)
        || !same(old, new)
}

/// Whether two resources say the same, apart from when they were observed.
fn same(a: &EtcdCluster, b: &EtcdCluster) -> bool {
    let strip = |c: &EtcdCluster| {
        let mut c = c.clone();
        if let Some(s) = c.status.as_mut() {
            s.observed_at = None;
        }
        c
    };
    a.spec == b.spec && a.metadata == b.metadata && strip(a).status == strip(b).status
}

/// Bytes free under `dir` for an unprivileged writer (`None` when unknown).
pub fn free_under(dir: &Path) -> Option<u64> {
    let s = rustix::fs::statvfs(dir).ok()?;
    Some(s.f_bavail.saturating_mul(s.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{EtcdClusterSpec, EtcdClusterStatus, Phase};

    fn resource(phase: Phase, observed_at: &str) -> EtcdCluster {
        let mut c = EtcdCluster::new("demo", EtcdClusterSpec::minimal(1, "3.4.23"));
        c.status = Some(EtcdClusterStatus {
            phase,
            observed_at: Some(observed_at.into()),
            ..EtcdClusterStatus::default()
        });
        c
    }

    const ROOM: Option<u64> = Some(1 << 30);

    #[test]
    fn the_same_status_is_written_again_only_after_the_refresh() {
        let t0 = Instant::now();
        let first = resource(Phase::Running, "2026-12-04T05:00:00.000Z");
        assert!(due(None, &first, t0, ROOM), "never written");
        let written = (first, t0);
        let later = resource(Phase::Running, "2026-12-04T05:00:05.000Z");
        assert!(
            !due(Some(&written), &later, t0 + Duration::from_secs(5), ROOM),
            "only observedAt moved"
        );
        assert!(due(Some(&written), &later, t0 + STATUS_FILE_REFRESH, ROOM));
    }

    #[test]
    fn a_changed_status_or_spec_is_written_at_once() {
        let t0 = Instant::now();
        let written = (resource(Phase::Running, "2026-12-04T05:00:00.000Z"), t0);
        let soon = t0 + Duration::from_millis(10);
        let degraded = resource(Phase::Degraded, "2026-12-04T05:00:00.000Z");
        assert!(due(Some(&written), &degraded, soon, ROOM));
        let mut resized = resource(Phase::Running, "2026-12-04T05:00:00.000Z");
        resized.spec.size = 3;
        assert!(due(Some(&written), &resized, soon, ROOM));
    }

    #[test]
    fn a_nearly_full_disk_gets_every_write() {
        let t0 = Instant::now();
        let written = (resource(Phase::Running, "2026-12-04T05:00:00.000Z"), t0);
        let same = resource(Phase::Running, "2026-12-04T05:00:05.000Z");
        let soon = t0 + Duration::from_secs(5);
        assert!(due(Some(&written), &same, soon, Some(LOW_SPACE - 1)));
        assert!(due(Some(&written), &same, soon, None), "unknown space");
        assert!(!due(Some(&written), &same, soon, Some(LOW_SPACE)));
    }
}
