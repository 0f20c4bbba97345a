//! Where the continuous-backup follower's chain stands
//! ([`super::follow`]): read from what the follower last printed on its
//! pod's log, for `status.backup.continuous`, and a full backup asked for
//! when it says its chain ended.

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{ListParams, LogParams};
use tokio::sync::Notify;

use super::jobs::{FOLLOW_KIND, Jobs, LABEL_JOB};
use crate::crd::{BackupStatus, LABEL_CLUSTER};
use crate::platform::local::follow_job::FollowLine;

/// The container of the follower.
pub const FOLLOW_CONTAINER: &str = "follow";

/// How often the follower's log is read for the chain's status.
const READ_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Keeps `status.continuous` to what the follower of `cluster` last printed
/// on its log, and asks for a full backup through `want_full` when it says
/// its chain ended; until aborted (the schedule stops).
pub(super) async fn report(
    jobs: Jobs,
    cluster: String,
    status: Arc<Mutex<BackupStatus>>,
    want_full: Arc<Notify>,
) {
    let lp = ListParams::default().labels(&format!(
        "{LABEL_CLUSTER}={cluster},{LABEL_JOB}={FOLLOW_KIND}"
    ));
    let mut asked = false;
    loop {
        let pods = jobs.api::<Pod>().list(&lp).await;
        let running = pods.ok().and_then(|l| {
            l.items
                .into_iter()
                .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        });
        if let Some(pod) = running {
            let lp = LogParams {
                container: Some(FOLLOW_CONTAINER.into()),
                tail_lines: Some(50),
                ..LogParams::default()
            };
            let log = jobs
                .api::<Pod>()
                .logs(&pod.name_any(), &lp)
                .await
                .unwrap_or_default();
            let (chain, want) = FollowLine::last(&log);
            if let Some(chain) = chain {
                status.lock().unwrap_or_else(|e| e.into_inner()).continuous = Some(chain);
            }
            if want && !asked {
                want_full.notify_one();
            }
            asked = want;
        }
        tokio::time::sleep(READ_EVERY).await;
    }
}
