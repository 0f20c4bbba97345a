//! A cluster's task in the local controller, and the messages it takes:
//! spec changes, member exits and the order to delete the cluster.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::controller::alarm_poll::{
    ALARM_POLL, DB_STAMP_POLL, Seen, after_still_stamp, near_quota, next_alarm_poll,
    still_file_ends_look,
};
use crate::controller::{Cluster, SpecState};
use crate::platform::local::LocalPlatform;

/// What the controller tells a cluster's task.
pub(super) enum Msg {
    Spec(Box<SpecState>),
    Exited { member: String, crashed: bool },
    Delete,
}

pub(super) struct Worker {
    pub(super) tx: mpsc::UnboundedSender<Msg>,
    pub(super) task: JoinHandle<()>,
    /// Fingerprint of the last spec sent.
    pub(super) sent: String,
}

/// What a spec says, to send it to a cluster's task only when it changed.
pub(super) fn fingerprint(spec: &SpecState) -> String {
    match spec {
        SpecState::Valid {
            resource, source, ..
        } => format!(
            "valid {} {:?}",
            serde_json::to_string(resource).unwrap_or_default(),
            source
        ),
        SpecState::Invalid { resource, message } => format!(
            "invalid {} {message}",
            serde_json::to_string(resource).unwrap_or_default()
        ),
    }
}

/// The cadence of the looks at a cluster's alarms between passes: kept
/// across passes.
#[derive(Debug)]
struct AlarmPoll {
    every: Duration,
    /// What the last look through etcd saw, and when.
    last: Option<(Seen, tokio::time::Instant)>,
    /// When the next look through etcd is due (`every` after the last).
    due: Option<tokio::time::Instant>,
    /// The database file of the member looked at, as last seen: its name,
    /// size and modification time.
    stamp: Option<(String, u64, SystemTime)>,
}

/// The grid the looks between passes fall on, shared by every cluster's
/// task: tasks that wake at the same instant wake the runtime once
/// together, not once each (with many idle clusters the wakes, not the
/// looks, were most of the operator's CPU).
pub(super) const GRID: Duration = DB_STAMP_POLL;

/// The last point of the shared grid (spacing `grid`, from the first time
/// any task asked) at or before `at`.
pub(super) fn on_grid(at: tokio::time::Instant, grid: Duration) -> tokio::time::Instant {
    static ORIGIN: OnceLock<tokio::time::Instant> = OnceLock::new();
    let origin = *ORIGIN.get_or_init(|| at);
    let since = at.saturating_duration_since(origin).as_nanos();
    let grid_ns = grid.as_nanos().max(1);
    let steps = u64::try_from(since / grid_ns * grid_ns).unwrap_or(u64::MAX);
    origin + Duration::from_nanos(steps)
}

/// When to wake for something due `after` from `now`: on the shared grid
/// ([`on_grid`]) when that is at least a grid step away (so a little
/// sooner, never later), exactly otherwise.
pub(super) fn wake_at(now: tokio::time::Instant, after: Duration) -> tokio::time::Instant {
    if after < GRID {
        return now + after;
    }
    on_grid(now + after, GRID).max(now + Duration::from_millis(1))
}

/// Sleeps `next` (or a little less, see [`wake_at`]), cut short when etcd
/// raises an alarm.
///
/// Each look first reads the size and time of the database file of the
/// member asked ([`LocalPlatform::db_stamp`], one `stat`): while they stand
/// still etcd committed nothing, so no alarm can have been raised (it is
/// stored there too, with etcd's next batch, up to 100 ms after it is
/// raised) and the look ends there; the next comes after
/// [`crate::controller::alarm_poll::DB_STAMP_POLL`], sooner just after
/// fast looks ([`after_still_stamp`]). Not while writes fill a database
/// near its quota ([`still_file_ends_look`]): there etcd is asked every
/// look, as it holds an alarm before its file does. Otherwise it asks etcd
/// ([`Cluster::look_for_alarms`]) when that look is due, and the next look
/// through etcd comes as [`next_alarm_poll`] says: soon while writes fill
/// a database near its quota. The file is looked at at least every
/// [`DB_STAMP_POLL`] even while a look through etcd is not due, and a file
/// grown near the quota ([`near_quota`]) has etcd asked at once: a flood
/// that starts just after etcd was asked (its database far from the
/// quota) is seen within a look at the file, not after the whole wait
/// (up to [`ALARM_POLL`], or more while the raft index stood still). A
/// still file costs a `stat`, so an idle cluster makes no more calls.
async fn idle(cluster: &Cluster<LocalPlatform>, next: Duration, poll: &mut AlarmPoll) {
    let until = wake_at(tokio::time::Instant::now(), next);
    loop {
        // With a file to look at, it is looked at at least every
        // DB_STAMP_POLL (a `stat`), and etcd only when due or near the quota.
        let wait = match poll.stamp {
            Some(_) => poll.every.min(DB_STAMP_POLL),
            None => poll.every,
        };
        let look = wake_at(tokio::time::Instant::now(), wait);
        if look >= until {
            tokio::time::sleep_until(until).await;
            return;
        }
        tokio::time::sleep_until(look).await;
        let now = tokio::time::Instant::now();
        let stamp = cluster.alarm_member().and_then(|m| {
            let (size, at) = cluster.platform.db_stamp(cluster.name(), m)?;
            Some((m.to_string(), size, at))
        });
        if stamp.is_some() && stamp == poll.stamp && still_file_ends_look(poll.every) {
            // Nothing committed since the last look: nothing grew either.
            poll.every = after_still_stamp(poll.every);
            poll.last = poll.last.map(|(seen, _)| (seen, now));
            continue;
        }
        // The file moved: etcd is asked when its look is due (or would be
        // before the next look at the file), or at once when the file has
        // grown near the quota (a flood started since etcd was asked).
        let due = poll.due.is_none_or(|d| now + DB_STAMP_POLL > d);
        let near = stamp
            .as_ref()
            .is_some_and(|(_, size, _)| near_quota(*size, cluster.quota()));
        if !due && !near {
            continue;
        }
        poll.stamp = stamp;
        let look = cluster.look_for_alarms().await;
        if look.raised {
            tracing::info!(cluster = %cluster.name(), "an alarm was raised: a pass now");
            poll.every = ALARM_POLL;
            return;
        }
        let (before, elapsed) = match poll.last {
            Some((seen, at)) => (Some(seen), now.duration_since(at)),
            None => (None, Duration::ZERO),
        };
        poll.every = next_alarm_poll(poll.every, before, look.seen, elapsed, cluster.quota());
        poll.due = Some(now + poll.every);
        poll.last = look.seen.map(|s| (s, now));
    }
}

/// One cluster's task: reconcile at once on every message or a new alarm,
/// else when the last pass asked to come back.
pub(super) async fn work(
    mut cluster: Cluster<LocalPlatform>,
    mut rx: mpsc::UnboundedReceiver<Msg>,
) {
    let mut next = Duration::ZERO;
    let mut poll = AlarmPoll {
        every: ALARM_POLL,
        last: None,
        due: None,
        stamp: None,
    };
    loop {
        let msg = tokio::select! {
            m = rx.recv() => Some(m),
            () = idle(&cluster, next, &mut poll) => None,
        };
        let mut pending = Vec::new();
        match msg {
            Some(Some(m)) => pending.push(m),
            Some(None) => return,
            None => {}
        }
        while let Ok(m) = rx.try_recv() {
            pending.push(m);
        }
        for m in pending {
            match m {
                Msg::Spec(s) => {
                    if let Err(e) = cluster.set_spec(*s).await {
                        tracing::error!(cluster = %cluster.name(), "cannot take the new spec: {e}");
                    }
                }
                Msg::Exited { member, crashed } => cluster.member_exited(&member, crashed),
                Msg::Delete => {
                    let name = cluster.name().to_string();
                    if let Err(e) = cluster.delete().await {
                        tracing::error!(cluster = %name, "cannot delete the cluster: {e}");
                    }
                    return;
                }
            }
        }
        // The pass logs its outcome inside its span.
        next = cluster.reconcile().await.next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wakes for anything a grid step or more away fall on the shared
    /// grid, never later than asked and less than a step sooner; shorter
    /// waits are kept exact.
    #[test]
    fn wakes_fall_on_one_grid_never_late() {
        let t0 = tokio::time::Instant::now();
        let base = on_grid(t0, GRID);
        for offset_ms in [0u64, 1, 37, 249, 250, 251, 999] {
            let now = t0 + Duration::from_millis(offset_ms);
            for after in [GRID, Duration::from_millis(500), Duration::from_secs(5)] {
                let at = wake_at(now, after);
                assert!(at <= now + after, "never later than asked");
                assert!(at > now + after - GRID, "less than a step sooner");
                let from_base = at.duration_since(base).as_nanos();
                assert_eq!(from_base % GRID.as_nanos(), 0, "on the grid");
            }
            let short = Duration::from_millis(50);
            assert_eq!(wake_at(now, short), now + short, "exact");
            assert_eq!(wake_at(now, Duration::ZERO), now);
        }
        // Two tasks that started apart wake together.
        let a = wake_at(t0 + Duration::from_millis(3), Duration::from_secs(2));
        let b = wake_at(t0 + Duration::from_millis(101), Duration::from_secs(2));
        assert_eq!(a, b);
    }
}
