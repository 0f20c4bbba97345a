//! The chain of delta segments of a backup in an object store (continuous
//! backups, [`crate::backup::delta`]). The bucket is the truth; the
//! cluster's `segments/` folder is a staging area, never evidence:
//!
//! * a segment is written there, then uploaded, and counts (in status, in
//!   the loss bound, in a restore) only once the store holds it;
//! * [`ObjectBackups::chain`] reads the chain the store holds: it lists the
//!   bucket, downloads a segment whose staged copy is not the object the
//!   store holds now ([`super::object_backups::Seen`]), and uploads, in
//!   order, a staged segment the store never got (an upload cut off by a
//!   crash, or by a store that stopped answering) before anything newer is
//!   written: so an operator that restarts fills the hole it left instead
//!   of writing past it;
//! * a hole nothing can fill cuts the chain there, saying so: the follower
//!   then ends it and a full backup starts a new one
//!   ([`crate::backup::follow`]).
//!
//! Every segment is downloaded and checked again once [`RECHECK_CONTENT`]
//! passed since it was last found good, so a store that lost or changed a
//! segment behind an unchanged listing is found out too.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::object_backups::{ObjectBackups, Seen};
use crate::backup::chain::{self, Chain};
use crate::backup::{self, BackupMeta, Error, Location, Result, delta};

/// The cluster's staged delta segments, in the cluster's folder.
const SEGMENTS: &str = "segments";
/// How long a segment found good in the store is taken as good without
/// reading it again.
pub const RECHECK_CONTENT: Duration = Duration::from_secs(15 * 60);

impl ObjectBackups {
    /// The intact start of the chain of `base` as the store holds it.
    /// Walking it in order: a segment whose staged copy is not the object
    /// the store holds now is downloaded and checked; a segment the store
    /// lacks, or holds damaged, is uploaded from an intact staged copy
    /// that links (an upload cut off, a store that lost or changed it);
    /// otherwise the chain ends there, cut when the store holds segments
    /// after it.
    pub async fn chain(&self, location: &Location, base: &BackupMeta) -> Result<Chain> {
        self.chain_on(location, Chain::start(base)).await
    }

    /// [`Self::chain`] from `chain` on (a chain read before: only the
    /// segments numbered after its last one are walked).
    pub async fn chain_on(&self, location: &Location, chain: Chain) -> Result<Chain> {
        let (bucket, prefix) = self.bucket(location).await?;
        let dir = self.local_dir(location, SEGMENTS)?;
        // Another cluster's backups (a restore's, a standby's source) are
        // only read: what is staged here is only what was read from there.
        let read_only = location.source.is_some();
        let objects = bucket.list(&prefix).await?;
        let base_name = chain.base.clone();
        let stored: BTreeMap<u64, &backup::object::client::Object> = objects
            .iter()
            .filter_map(|o| {
                let (b, seq) = chain::parse_file_name(&o.name)?;
                (b == base_name).then_some((seq, o))
            })
            .collect();
        let mut chain = chain;
        chain.files = stored.len();
        let mut seq = chain.next_seq();
        loop {
            let file = chain::segment_file(&base_name, seq);
            let key = format!("{prefix}/{file}");
            let staged = dir.join(&file);
            let kept = tokio::fs::read(&staged).await.ok();
            let in_store = match stored.get(&seq) {
                Some(o) if kept.is_some() && self.known(&key, o, Some(RECHECK_CONTENT)) => {
                    kept.clone().map(|b| (b, None))
                }
                Some(_) => {
                    let tmp = dir.join(format!(".fetch-{file}"));
                    let got = bucket.download(&key, &tmp).await?;
                    let bytes = tokio::fs::read(&tmp)
                        .await
                        .map_err(backup::io_err(format!("cannot read {}", tmp.display())))?;
                    Some((bytes, Some((got, tmp))))
                }
                None => None,
            };
            let problem = match in_store {
                Some((bytes, fetched)) => match chain.link(seq, &file, &bytes) {
                    Ok(()) => {
                        if let Some((got, tmp)) = fetched {
                            tokio::fs::rename(&tmp, &staged)
                                .await
                                .map_err(backup::io_err(format!(
                                    "cannot keep {}",
                                    staged.display()
                                )))?;
                            self.remember(&key, Seen::downloaded(&got));
                        }
                        None
                    }
                    Err(p) => match fetched {
                        Some((_, tmp)) => {
                            let _ = tokio::fs::remove_file(&tmp).await;
                            Some(p)
                        }
                        None => {
                            // The staged copy taken for the store's is not:
                            // read the store's again.
                            self.forget(&key);
                            continue;
                        }
                    },
                },
                None => Some(format!(
                    "segment {seq} of {} is missing in {}",
                    base_name,
                    bucket.describe(&format!("{prefix}/"))
                )),
            };
            let Some(problem) = problem else {
                seq += 1;
                continue;
            };
            // The store lacks it, or holds it damaged: an intact staged
            // copy that links is uploaded, before anything newer (never
            // into another cluster's backups, which are only read).
            if let Some(bytes) = kept.filter(|_| !read_only)
                && chain.link(seq, &file, &bytes).is_ok()
            {
                let stored = bucket.upload(&staged, &key).await?;
                self.remember(&key, Seen::uploaded(&stored));
                tracing::warn!(
                    segment = seq, base = %base_name,
                    "{problem}: uploaded the copy staged here (an upload cut off, or a store that \
                     lost or changed it), before anything newer"
                );
                seq += 1;
                continue;
            }
            let after = stored.range(seq + 1..).count();
            if stored.contains_key(&seq) || after > 0 {
                chain.cut = Some(format!(
                    "the chain of {} is cut at {problem} ({after} segment files after it are \
                     not used)",
                    base_name
                ));
            }
            break;
        }
        // Staged segments past the end can never join the chain (the one
        // before them is nowhere): they go, so the follower can write
        // those numbers anew.
        for (b, n, path) in chain::segment_files(&dir) {
            if b == base_name && n >= seq && !stored.contains_key(&n) && !read_only {
                let _ = std::fs::remove_file(path);
            }
        }
        Ok(chain)
    }

    /// The segments the store holds after `chain` (read before), each
    /// read by its name, with no listing: a standby polls with it, and a
    /// read of an object not there yet costs less than a listing and is
    /// as fresh. It stops at the first segment not there or not linking
    /// (the next [`Self::chain_on`], which lists, says what is wrong). The
    /// store is only read.
    pub async fn chain_next(&self, location: &Location, chain: Chain) -> Result<Chain> {
        let (bucket, prefix) = self.bucket(location).await?;
        let dir = self.local_dir(location, SEGMENTS)?;
        let mut chain = chain;
        loop {
            let seq = chain.next_seq();
            let file = chain::segment_file(&chain.base, seq);
            let key = format!("{prefix}/{file}");
            let tmp = dir.join(format!(".fetch-{file}"));
            let Some(got) = bucket.download_if_there(&key, &tmp).await? else {
                break;
            };
            let bytes = tokio::fs::read(&tmp)
                .await
                .map_err(backup::io_err(format!("cannot read {}", tmp.display())))?;
            if let Err(problem) = chain.link(seq, &file, &bytes) {
                let _ = tokio::fs::remove_file(&tmp).await;
                tracing::debug!("{problem}: left to the next listing of the store");
                break;
            }
            let staged = dir.join(&file);
            tokio::fs::rename(&tmp, &staged)
                .await
                .map_err(backup::io_err(format!("cannot keep {}", staged.display())))?;
            self.remember(&key, Seen::downloaded(&got));
            chain.files += 1;
        }
        Ok(chain)
    }

    /// Writes `segment` in `segments/`, then uploads it; it counts once the
    /// store holds it. When the upload fails, the staged copy stays: the
    /// next [`Self::chain`] uploads it before anything newer.
    pub async fn append(&self, location: &Location, segment: &delta::Segment) -> Result<()> {
        let (bucket, prefix) = self.bucket(location).await?;
        let dir = self.local_dir(location, SEGMENTS)?;
        let s = segment.clone();
        let path = tokio::task::spawn_blocking(move || chain::write(&dir, &s))
            .await
            .map_err(|e| Error::Tool(format!("writing a segment failed: {e}")))??;
        let key = format!(
            "{prefix}/{}",
            chain::segment_file(&segment.base, segment.seq)
        );
        let stored = bucket.upload(&path, &key).await?;
        self.remember(&key, Seen::uploaded(&stored));
        Ok(())
    }

    /// Downloads the segments of `base` the store holds into `dir` (a
    /// folder of the caller's: a restore's, the `backups` command's).
    pub async fn fetch_segments(
        &self,
        location: &Location,
        base: &BackupMeta,
        dir: &Path,
    ) -> Result<()> {
        let (bucket, prefix) = self.bucket(location).await?;
        for o in bucket.list(&prefix).await? {
            if chain::parse_file_name(&o.name).is_none_or(|(b, _)| b != base.name) {
                continue;
            }
            let local = dir.join(&o.name);
            if std::fs::metadata(&local).is_ok_and(|m| m.len() == o.size) {
                continue;
            }
            bucket
                .download(&format!("{prefix}/{}", o.name), &local)
                .await?;
        }
        Ok(())
    }

    /// Drops the staged segments of `base` (deleted from the store).
    pub(super) fn drop_staged(&self, location: &Location, base: &str) {
        if let Ok(dir) = self.local_dir(location, SEGMENTS) {
            let _ = chain::delete(&dir, base);
        }
    }
}
