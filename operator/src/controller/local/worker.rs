//! A cluster's task in the local controller, and the messages it takes:
//! spec changes, member exits and the order to delete the cluster.

use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::controller::alarm_poll::{ALARM_POLL, Seen, after_still_stamp, next_alarm_poll};
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
    /// The database file of the member looked at, as last seen: its name,
    /// size and modification time.
    stamp: Option<(String, u64, SystemTime)>,
}

/// Sleeps `next`, cut short when etcd raises an alarm.
///
/// Each look first reads the size and time of the database file of the
/// member asked ([`LocalPlatform::db_stamp`], one `stat`): while they stand
/// still etcd committed nothing, so no alarm can have been raised (it is
/// stored there too, with etcd's next batch, up to 100 ms after it is
/// raised) and the look ends there; the next comes after
/// [`crate::controller::alarm_poll::DB_STAMP_POLL`], sooner just after
/// fast looks ([`after_still_stamp`]). Otherwise it asks etcd
/// ([`Cluster::look_for_alarms`]), and the next look comes as
/// [`next_alarm_poll`] says: soon while writes fill a database near its
/// quota.
async fn idle(cluster: &Cluster<LocalPlatform>, next: Duration, poll: &mut AlarmPoll) {
    let until = tokio::time::Instant::now() + next;
    loop {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        if left < poll.every {
            tokio::time::sleep(left).await;
            return;
        }
        tokio::time::sleep(poll.every).await;
        let now = tokio::time::Instant::now();
        let stamp = cluster.alarm_member().and_then(|m| {
            let (size, at) = cluster.platform.db_stamp(cluster.name(), m)?;
            Some((m.to_string(), size, at))
        });
        if stamp.is_some() && stamp == poll.stamp {
            // Nothing committed since the last look: nothing grew either.
            poll.every = after_still_stamp(poll.every);
            poll.last = poll.last.map(|(seen, _)| (seen, now));
            continue;
        }
        poll.stamp = stamp;
        let look = cluster.look_for_alarms().await;
        if look.raised {
            tracing::debug!(cluster = %cluster.name(), "an alarm was raised: a pass now");
            poll.every = ALARM_POLL;
            return;
        }
        let (before, elapsed) = match poll.last {
            Some((seen, at)) => (Some(seen), now.duration_since(at)),
            None => (None, Duration::ZERO),
        };
        poll.every = next_alarm_poll(poll.every, before, look.seen, elapsed, cluster.quota());
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
