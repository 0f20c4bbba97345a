//! Rebuilding a cluster whose quorum is lost for good from its most
//! advanced surviving member (the plan chose it, see
//! [`crate::plan::lost`]): the member is restarted alone with
//! `--force-new-cluster`, through the platform so both platforms do it the
//! same way, and the flag is cleared once it serves, before the plan adds
//! members back. The record notes the seed first, so an operator restart
//! in between finishes the same rebuild.

use std::time::SystemTime;

use super::Cluster;
use super::act::Error;
use crate::crd::{RecoverySource, RecoveryStatus};
use crate::platform::Platform;

impl<P: Platform> Cluster<P> {
    /// The highest revision the operator saw before a loss.
    pub(super) fn last_seen_revision(&self) -> i64 {
        self.record.last_revision
    }

    /// Restarts `member` alone with `--force-new-cluster`, and reports the
    /// rebuild (status, log, an Event on Kubernetes).
    pub(super) async fn rebuild_from_survivor(
        &mut self,
        member: &str,
        revision: i64,
    ) -> Result<(), Error> {
        let now = SystemTime::now();
        let last_seen = self.last_seen_revision();
        let lost = (last_seen - revision).max(0);
        let message = format!(
            "quorum lost for good: rebuilding the cluster from member {member}, the most advanced \
             survivor, at revision {revision}; the last revision seen before the loss was \
             {last_seen} ({lost} revisions seen are not on it); it restarts alone with \
             --force-new-cluster and new members join it one at a time"
        );
        tracing::error!(cluster = %self.name, "{message}");
        let fresh = self.record.reseeding.as_deref() != Some(member);
        if fresh {
            self.record.last_recovery = Some(RecoveryStatus {
                source: RecoverySource::Survivor,
                member: Some(member.to_string()),
                seed_revision: revision,
                last_seen_revision: last_seen,
                lost_revisions: lost,
                recovered_at: humantime::format_rfc3339_seconds(now).to_string(),
                ..RecoveryStatus::default()
            });
            self.record.reseeding = Some(member.to_string());
            self.lost = Some(super::facts::Lost::Quorum {
                from: format!("member {member}, the most advanced survivor"),
            });
            // The rebuilt cluster goes on from the survivor's revision: a
            // later loss is measured from there.
            self.record.last_revision = revision;
            self.save_record().await;
        }
        self.crashes.started(member);
        self.platform.force_new_cluster(&self.name, member).await?;
        if fresh {
            let notice = crate::platform::Notice::warning("RebuiltFromSurvivor", message);
            self.platform.announce(&self.name, &notice).await;
            self.new_backup_chain();
        }
        Ok(())
    }

    /// The seed serves alone: later starts of it no longer force a new
    /// cluster, and members may join it.
    pub(super) async fn finish_reseed(&mut self, member: &str) -> Result<(), Error> {
        self.platform
            .end_force_new_cluster(&self.name, member)
            .await?;
        tracing::info!(
            cluster = %self.name, %member,
            "the rebuilt cluster serves from its seed; members are added back one at a time"
        );
        self.record.reseeding = None;
        self.save_record().await;
        Ok(())
    }
}
