//! What the local platform sets aside rather than deletes: the data of a
//! rebuilt cluster's old members (`lost-TAG/` in the cluster's folder) and
//! the whole folder of a deleted cluster ([`super::deleted`]).

use super::{LocalPlatform, Result, deleted, io_err, process};
use crate::platform::{Error, Platform};

impl LocalPlatform {
    /// Stops every member and moves its data to `lost-TAG/` in the
    /// cluster's folder (a rebuild keeps the old members' data); returns
    /// that folder.
    pub(super) async fn retire(&self, cluster: &str, tag: &str) -> Result<String> {
        let lost_name = format!("lost-{tag}");
        let lost = self.path(cluster, &[&lost_name])?;
        std::fs::create_dir_all(&lost)
            .map_err(io_err(format!("cannot create {}", lost.display())))?;
        for member in self.layout.member_names(cluster).unwrap_or_default() {
            if let Ok(record) = self.record(cluster, &member)
                && let Some(id) = record.process
            {
                process::kill(id)
                    .await
                    .map_err(io_err(format!("cannot stop {member}")))?;
            }
            let data = self.path(cluster, &["members", &member, "data"])?;
            if data.exists() {
                let moved = self.path(cluster, &[&lost_name, &member])?;
                let renamed = std::fs::rename(&data, moved);
                self.kept.forget_walks_under(&data);
                renamed.map_err(io_err(format!("cannot move {} aside", data.display())))?;
            }
            self.delete(cluster, &member).await?;
        }
        Ok(lost.display().to_string())
    }

    /// Stops every member and moves the cluster's folder whole, data
    /// included, to `STATE/deleted/` with its last manifest, where it is
    /// kept for `--keep-deleted` ([`deleted`]); nothing is erased here.
    pub(super) async fn set_cluster_aside(&self, cluster: &str) -> Result<()> {
        self.path(cluster, &[])?;
        for member in self.layout.member_names(cluster).unwrap_or_default() {
            if let Ok(record) = self.record(cluster, &member)
                && let Some(id) = record.process
            {
                process::kill(id)
                    .await
                    .map_err(io_err(format!("cannot stop {member}")))?;
            }
            self.kept.forget_member(cluster, &member);
        }
        let mut statuses = self.statuses.lock().unwrap_or_else(|e| e.into_inner());
        statuses.remove(cluster);
        drop(statuses);
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        written.remove(cluster);
        drop(written);
        let resource = self
            .resources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(cluster);
        let manifest = resource.map(|mut r| {
            r.status = None;
            serde_saphyr::to_string(&r).unwrap_or_default()
        });
        let dir = self.layout.cluster_dir(cluster);
        let kept = deleted::set_aside(
            &self.layout,
            cluster,
            manifest.as_deref(),
            self.keep_deleted,
            std::time::SystemTime::now(),
        );
        self.kept.forget_cluster(cluster, &dir);
        let kept = kept.map_err(|e| Error::Io {
            what: format!("cannot keep the folder of deleted cluster {cluster} aside"),
            source: std::io::Error::other(e.to_string()),
        })?;
        tracing::info!(%cluster, kept = %kept.display(), "the cluster's folder is kept aside");
        Ok(())
    }
}
