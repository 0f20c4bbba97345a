//! The local platform's event log: what the controller announced about a
//! cluster ([`Platform::announce`](crate::platform::Platform::announce)),
//! in the words `kubectl describe` shows as Events on Kubernetes. Kept in
//! memory and in `STATE/clusters/NAME/events.json` (the last
//! [`KEEP_EVENTS`], oldest first), where `etcd-operator status NAME` reads
//! them; a repeat of the newest event counts on it, any other event is an
//! entry of its own.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::layout::{read_json, write_json};
use crate::platform::{Notice, NoticeType};

pub use super::layout::EVENTS_FILE as FILE;

/// How many events a cluster's log keeps.
pub const KEEP_EVENTS: usize = 100;

/// One event (or a run of identical ones) as the log keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterEvent {
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: NoticeType,
    /// A CamelCase word for what happened.
    pub reason: String,
    /// What happened.
    pub message: String,
    /// When it first happened (RFC 3339).
    pub first_time: String,
    /// When it last happened (RFC 3339).
    pub last_time: String,
    /// How many times in a row it happened.
    pub count: u32,
}

/// Adds `notice`, which happened at `now`, to `log` (oldest first): a
/// repeat of the newest entry counts on it; the log keeps the last
/// [`KEEP_EVENTS`].
pub fn record(log: &mut Vec<ClusterEvent>, notice: &Notice, now: SystemTime) {
    let at = humantime::format_rfc3339_millis(now).to_string();
    match log.last_mut() {
        Some(e)
            if e.type_ == notice.type_
                && e.reason == notice.reason
                && e.message == notice.message =>
        {
            e.count = e.count.saturating_add(1);
            e.last_time = at;
        }
        _ => log.push(ClusterEvent {
            type_: notice.type_,
            reason: notice.reason.to_string(),
            message: notice.message.clone(),
            first_time: at.clone(),
            last_time: at,
            count: 1,
        }),
    }
    let over = log.len().saturating_sub(KEEP_EVENTS);
    log.drain(..over);
}

/// Every cluster's log, in memory, written through to its file.
#[derive(Debug, Default)]
pub struct EventLogs {
    logs: Mutex<HashMap<String, Vec<ClusterEvent>>>,
}

impl EventLogs {
    /// Adds `notice` to `cluster`'s log kept at `path` (read from it the
    /// first time), and writes the log back; a write that fails is logged
    /// and the log stays in memory.
    pub fn announce(&self, cluster: &str, path: &Path, notice: &Notice) {
        let mut logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        let log = logs
            .entry(cluster.to_string())
            .or_insert_with(|| load(path));
        record(log, notice, SystemTime::now());
        let copy = log.clone();
        drop(logs);
        if let Err(e) = write_json(path, &copy) {
            tracing::warn!(%cluster, "cannot write {}: {e} (the event is kept in memory)", path.display());
        }
    }

    /// `cluster`'s log (read from `path` when not in memory).
    pub fn get(&self, cluster: &str, path: &Path) -> Vec<ClusterEvent> {
        let logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        match logs.get(cluster) {
            Some(log) => log.clone(),
            None => load(path),
        }
    }

    /// Drops what is kept in memory of `cluster` (it was deleted).
    pub fn forget(&self, cluster: &str) {
        let mut logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        logs.remove(cluster);
    }
}

/// The log in `path`; empty when there is none or it cannot be read (a
/// damaged log loses its history, not the cluster's next events).
pub fn load(path: &Path) -> Vec<ClusterEvent> {
    match read_json::<Vec<ClusterEvent>>(path) {
        Ok(log) => log.unwrap_or_default(),
        Err(e) => {
            tracing::warn!(
                "{}: unreadable event log, starting a new one: {e}",
                path.display()
            );
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_repeat_counts_on_the_newest_and_distinct_events_stay_distinct() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut log = Vec::new();
        let added = Notice::normal("MemberAdded", "member demo-3 added");
        record(&mut log, &added, t0);
        record(&mut log, &added, t0 + Duration::from_secs(1));
        assert_eq!(log.len(), 1);
        assert_eq!(log[0].count, 2);
        assert_ne!(log[0].first_time, log[0].last_time);
        record(
            &mut log,
            &Notice::normal("MemberAdded", "member demo-4 added"),
            t0,
        );
        record(
            &mut log,
            &Notice::warning("MemberAdded", "member demo-4 added"),
            t0,
        );
        record(&mut log, &added, t0);
        assert_eq!(log.len(), 4, "{log:#?}");
        for i in 0..2 * KEEP_EVENTS {
            record(
                &mut log,
                &Notice::normal("BackupTaken", format!("backup {i}")),
                t0,
            );
        }
        assert_eq!(log.len(), KEEP_EVENTS);
        assert_eq!(
            log[KEEP_EVENTS - 1].message,
            format!("backup {}", 2 * KEEP_EVENTS - 1)
        );
    }

    #[test]
    fn the_log_outlives_the_operator_in_its_file() {
        let dir = tempfile::tempdir().expect("a folder");
        let path = dir.path().join("events.json");
        let logs = EventLogs::default();
        logs.announce(
            "demo",
            &path,
            &Notice::normal("ScalingUp", "scaling up from 3 to 5"),
        );
        let again = EventLogs::default();
        let log = again.get("demo", &path);
        assert_eq!(log.len(), 1);
        assert_eq!(
            (log[0].type_, log[0].reason.as_str()),
            (NoticeType::Normal, "ScalingUp")
        );
        std::fs::write(&path, "not json").expect("write");
        assert!(EventLogs::default().get("demo", &path).is_empty());
    }
}
