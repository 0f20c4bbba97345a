//! A cluster's task in the local controller, and the messages it takes:
//! spec changes, member exits and the order to delete the cluster.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::controller::maintenance::{ALARM_POLL, next_alarm_poll};
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
/// across passes, so a cluster idle for long is looked at every
/// [`ALARM_POLL_STILL`](crate::controller::maintenance::ALARM_POLL_STILL).
#[derive(Debug)]
struct AlarmPoll {
    every: Duration,
    raft_index: Option<u64>,
}

/// Sleeps `next`, cut short when etcd raises an alarm
/// ([`Cluster::look_for_alarms`], asked every [`ALARM_POLL`] while the
/// cluster's log moves, further apart while it stands still, see
/// [`next_alarm_poll`]).
async fn idle(cluster: &Cluster<LocalPlatform>, next: Duration, poll: &mut AlarmPoll) {
    let until = tokio::time::Instant::now() + next;
    loop {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        if left < poll.every {
            tokio::time::sleep(left).await;
            return;
        }
        tokio::time::sleep(poll.every).await;
        let look = cluster.look_for_alarms().await;
        if look.raised {
            tracing::debug!(cluster = %cluster.name(), "an alarm was raised: a pass now");
            poll.every = ALARM_POLL;
            return;
        }
        poll.every = next_alarm_poll(poll.every, poll.raft_index, look.raft_index);
        poll.raft_index = look.raft_index;
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
        raft_index: None,
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
