//! The follower of continuous backups run inside a Kubernetes workload
//! (`etcd-operator backup-follow`): the backup claim, mounted at `/state`,
//! is the state folder of a [`LocalBackups`], and the very follower the
//! local platform runs ([`crate::backup::follow`]) writes delta segments
//! into it beside the newest good full backup. A restart resumes after the
//! last revision written (the chain in the claim says where).
//!
//! The workload cannot reach the operator's memory, so it says where the
//! chain stands on its output: a [`FollowLine`] as JSON after
//! [`FOLLOW_MARK`] whenever the chain's status changes, and once with
//! `wantFull` when the chain ended (etcd compacted the history it needs, or
//! a segment was found cut) and a full backup is needed to start a new one.
//! The operator reads the last of these lines from the pod's log.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, watch};

use super::backups::LocalBackups;
use super::binaries::Binaries;
use crate::backup::job::JobTls;
use crate::backup::object::client::StoreEnv;
use crate::backup::{Candidate, Location};
use crate::crd::{BackupStatus, ChainStatus};
use crate::validate::ContinuousPolicy;

/// What precedes a status line.
pub const FOLLOW_MARK: &str = "etcd-operator-backup-follow: ";
/// How often the chain's status is looked at for a change to print.
const STATUS_EVERY: Duration = Duration::from_millis(500);
/// How far the store's sync time moves before a line says so.
const SYNCED_EVERY: Duration = Duration::from_secs(2);
/// How often the client certificate's files are read again.
const TLS_EVERY: Duration = Duration::from_secs(30);

/// One status line of the follower.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FollowLine {
    /// Where the chain stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<ChainStatus>,
    /// The chain ended: a full backup is needed to start a new one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub want_full: bool,
}

impl FollowLine {
    /// The line as printed.
    pub fn line(&self) -> String {
        // Strings and numbers always serialize.
        format!(
            "{FOLLOW_MARK}{}",
            serde_json::to_string(self).unwrap_or_default()
        )
    }

    /// The last status line in `log` that parses, and whether any line
    /// since the last status asked for a full backup.
    pub fn last(log: &str) -> (Option<ChainStatus>, bool) {
        let lines: Vec<FollowLine> = log
            .lines()
            .filter_map(|l| l.trim().strip_prefix(FOLLOW_MARK))
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let chain = lines.iter().rev().find_map(|l| l.chain.clone());
        let want_full = lines.last().is_some_and(|l| l.want_full);
        (chain, want_full)
    }
}

/// How the follower reaches the cluster: client URLs tried in turn, and
/// for `https://` ones the client certificate in a folder (the mounted
/// Secret, whose files the kubelet updates when it is renewed).
#[derive(Clone, Debug, Default)]
pub struct Members {
    /// Client URLs (the client Service).
    pub urls: Vec<String>,
    /// The client certificate's folder, when the cluster's clients use TLS.
    pub tls: JobTls,
}

impl Members {
    /// The candidates to follow, with the client certificate as the folder
    /// holds it now (`None` when it cannot be read: said once by the caller).
    async fn candidates(&self, cluster: &str) -> Result<Vec<Candidate>, String> {
        let tls = self.tls.load().await?;
        let offered = self.urls.iter().map(|u| {
            let name = format!("{cluster} ({u})");
            (name, u.clone(), tls.clone())
        });
        Ok(offered.collect())
    }
}

/// Follows `location`'s cluster through `members` into delta segments
/// beside its backups (in the state folder `state`, the claim's mount, or
/// in the location's object store, reached with the environment and `env`
/// over it), printing status lines with `emit`; runs until aborted (the
/// process is stopped). A client certificate is read again every
/// [`TLS_EVERY`]: a renewed one is used from the next connection.
pub async fn run(
    state: &Path,
    location: Location,
    members: Members,
    policy: ContinuousPolicy,
    binaries: Arc<Binaries>,
    env: StoreEnv,
    emit: &(dyn Fn(&str) + Sync),
) {
    let store = Arc::new(LocalBackups::new(state, binaries).with_store_env(env));
    let cluster = location.cluster.clone();
    let mut offered = members.candidates(&cluster).await.unwrap_or_else(|e| {
        tracing::error!(%cluster, "{e}");
        Vec::new()
    });
    let (offer, candidates) = watch::channel(offered.clone());
    let status = Arc::new(Mutex::new(BackupStatus::default()));
    let want_full = Arc::new(Notify::new());
    let follower = tokio::spawn(crate::backup::follow::run(
        policy,
        location,
        store,
        candidates,
        status.clone(),
        want_full.clone(),
    ));
    let _stop = AbortOnDrop(follower);
    let mut printed: Option<ChainStatus> = None;
    let mut tls_read = tokio::time::Instant::now();
    loop {
        if members.tls.tls_dir.is_some() && tls_read.elapsed() >= TLS_EVERY {
            tls_read = tokio::time::Instant::now();
            match members.candidates(&cluster).await {
                Ok(now) if now != offered => {
                    tracing::info!(%cluster, "the client certificate changed: used from the next connection");
                    offered = now;
                    let _ = offer.send(offered.clone());
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(%cluster, "{e}; the certificate read before is kept"),
            }
        }
        let ended = tokio::select! {
            () = want_full.notified() => true,
            () = tokio::time::sleep(STATUS_EVERY) => false,
        };
        let now = status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .continuous
            .clone();
        if ended || worth_printing(printed.as_ref(), now.as_ref()) {
            let line = FollowLine {
                chain: now.clone(),
                want_full: ended,
            };
            emit(&line.line());
            printed = now;
        }
    }
}

/// Whether `now` says something `printed` did not: any change, but for
/// [`ChainStatus::synced_time`] (which moves every segment interval) only
/// once it moved [`SYNCED_EVERY`] or more, to keep the log small.
fn worth_printing(printed: Option<&ChainStatus>, now: Option<&ChainStatus>) -> bool {
    let (Some(p), Some(n)) = (printed, now) else {
        return printed != now;
    };
    let strip = |c: &ChainStatus| ChainStatus {
        synced_time: None,
        ..c.clone()
    };
    if strip(p) != strip(n) {
        return true;
    }
    let ms = |c: &ChainStatus| {
        c.synced_time
            .as_deref()
            .and_then(|t| humantime::parse_rfc3339(t).ok())
    };
    match (ms(p), ms(n)) {
        (Some(a), Some(b)) => b.duration_since(a).is_ok_and(|d| d >= SYNCED_EVERY),
        (a, b) => a != b,
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_status_and_a_pending_full_backup_are_read_from_a_log() {
        let chain = ChainStatus {
            base: "b1".into(),
            segments: 2,
            last_revision: 9,
            ..ChainStatus::default()
        };
        let first = FollowLine {
            chain: Some(chain.clone()),
            want_full: false,
        };
        let ended = FollowLine {
            chain: None,
            want_full: true,
        };
        let log = format!("INFO x\n{}\n{}\n", first.line(), ended.line());
        assert_eq!(FollowLine::last(&log), (Some(chain.clone()), true));
        let log = format!("{}\n{}\n{FOLLOW_MARK}{{bad\n", ended.line(), first.line());
        assert_eq!(FollowLine::last(&log), (Some(chain), false));
        assert_eq!(FollowLine::last("nothing"), (None, false));
    }

    #[test]
    fn a_moving_sync_time_is_printed_every_two_seconds_other_changes_at_once() {
        let at = |t: &str| ChainStatus {
            base: "b1".into(),
            synced_time: Some(t.into()),
            ..ChainStatus::default()
        };
        let a = at("2026-12-06T10:00:00.000Z");
        assert!(!worth_printing(
            Some(&a),
            Some(&at("2026-12-06T10:00:01.500Z"))
        ));
        assert!(worth_printing(
            Some(&a),
            Some(&at("2026-12-06T10:00:02.000Z"))
        ));
        let mut b = at("2026-12-06T10:00:00.500Z");
        b.segments = 1;
        assert!(worth_printing(Some(&a), Some(&b)));
        assert!(worth_printing(None, Some(&a)));
        assert!(!worth_printing(Some(&a), Some(&a)));
    }
}
