//! Uploading a file to a bucket so that readers see the object only once
//! it is whole: one request up to [`PART`] bytes; past it a multipart
//! upload, completed last. A multipart upload that is never completed (the
//! operator killed mid-upload, a store that stopped answering) holds its
//! parts in the bucket, invisible and billed, until it is aborted. So
//! before its first part, an upload writes a marker beside its object,
//! `KEY.upload` ([`MARK`]), naming the upload and the process that runs
//! it; the marker goes when the upload completes or is aborted.
//! [`Bucket::abort_leftovers`] aborts the uploads whose marker another
//! process wrote (one that ended: one operator runs a cluster's backups at
//! a time) or that are older than [`LEFTOVER_AGE`], and deletes their
//! markers. Only a bucket lifecycle rule (`AbortIncompleteMultipartUpload`,
//! see the backup docs) catches an upload whose process died between
//! starting it and writing its marker.

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::stream::{FuturesOrdered, StreamExt};
use object_store::multipart::PartId;
use object_store::path::Path as Key;
use object_store::{MultipartId, PutPayload};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

use super::client::{Bucket, Object, REQUEST, RETRIES, SMALL_OP, Stored, bounded};
use crate::backup::{Error, Result};

/// Size of each part of a multipart upload (and the size below which a
/// file goes up in one request).
pub const PART: usize = 16 << 20;
/// Parts uploaded at once.
const PARTS_IN_FLIGHT: usize = 4;
/// What the marker of an upload to `KEY` adds to its key.
pub const MARK: &str = ".upload";
/// An upload this process started is aborted by a sweep only once its
/// marker is this old (one this long is stuck: a part takes at most
/// [`REQUEST`] plus [`RETRIES`]).
pub const LEFTOVER_AGE: Duration = Duration::from_secs(60 * 60);

/// What a marker holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Marker {
    /// The object being uploaded (its whole key).
    pub key: String,
    /// The store's id of the multipart upload.
    pub upload_id: String,
    /// The process that started it ([`instance`]).
    pub instance: String,
    /// When it started, ms since the Unix epoch.
    pub started_ms: u64,
}

/// This process's identity in markers: random, new at every start.
pub fn instance() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        use rand::Rng as _;
        format!("{:016x}", rand::rng().random::<u64>())
    })
}

fn now_ms() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH);
    u64::try_from(since.unwrap_or_default().as_millis()).unwrap_or(u64::MAX)
}

/// The key of the object a marker `name` stands for (`None`: not one).
pub fn marked(name: &str) -> Option<&str> {
    name.strip_suffix(MARK).filter(|k| !k.is_empty())
}

/// Whether a sweep of process `me` aborts the upload of `marker` at
/// `now_ms`: another process's, or one of its own stuck for
/// [`LEFTOVER_AGE`].
pub fn abandoned(marker: &Marker, me: &str, now_ms: u64) -> bool {
    let age = Duration::from_millis(now_ms.saturating_sub(marker.started_ms));
    marker.instance != me || age >= LEFTOVER_AGE
}

impl Bucket {
    /// Uploads `file` to `key`: readers see the object only once the whole
    /// file is up. Every part is bounded as every request is
    /// ([`super::client`]); a failure aborts the upload.
    pub async fn upload(&self, file: &Path, key: &str) -> Result<Stored> {
        let fail = |e: &dyn std::fmt::Display| {
            Error::Store(self.scrub(&format!(
                "cannot upload {} to {}: {e}",
                file.display(),
                self.describe(key)
            )))
        };
        let mut src = tokio::fs::File::open(file).await.map_err(|e| fail(&e))?;
        let size = src.metadata().await.map_err(|e| fail(&e))?.len();
        if size <= PART as u64 {
            let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(PART));
            src.read_to_end(&mut buf).await.map_err(|e| fail(&e))?;
            return self.put(key, buf).await;
        }
        let k = Key::from(key);
        let id = match bounded(SMALL_OP, self.multipart.create_multipart(&k)).await {
            Some(Ok(id)) => id,
            Some(Err(e)) => return Err(fail(&e)),
            None => return Err(fail(&"the store did not answer")),
        };
        let marker = Marker {
            key: key.to_string(),
            upload_id: id.clone(),
            instance: instance().to_string(),
            started_ms: now_ms(),
        };
        let mark_key = format!("{key}{MARK}");
        let body = serde_json::to_vec(&marker).map_err(|e| fail(&e))?;
        let result = match self.put(&mark_key, body).await {
            Ok(_) => self.parts(&k, &id, &mut src).await.map_err(|e| fail(&e)),
            Err(e) => Err(e),
        };
        match result {
            Ok(e_tag) => {
                let _ = self.delete(&mark_key).await;
                Ok(Stored { size, e_tag })
            }
            Err(e) => {
                self.abort(&k, &id).await;
                let _ = self.delete(&mark_key).await;
                Err(e)
            }
        }
    }

    /// Uploads `src` as the parts of upload `id` of `key` and completes it;
    /// returns the object's entity tag.
    async fn parts(
        &self,
        key: &Key,
        id: &MultipartId,
        src: &mut tokio::fs::File,
    ) -> std::result::Result<Option<String>, String> {
        let part_bound = REQUEST + RETRIES;
        let mut in_flight = FuturesOrdered::new();
        let mut done: Vec<PartId> = Vec::new();
        let mut index = 0usize;
        loop {
            let mut buf = vec![0u8; PART];
            let mut filled = 0;
            while filled < PART {
                match src.read(&mut buf[filled..]).await {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(e) => return Err(e.to_string()),
                }
            }
            if filled > 0 {
                buf.truncate(filled);
                let store = self.multipart.clone();
                let (key, id) = (key.clone(), id.clone());
                let part = index;
                in_flight.push_back(async move {
                    bounded(
                        part_bound,
                        store.put_part(&key, &id, part, PutPayload::from(buf)),
                    )
                    .await
                });
                index += 1;
            }
            while in_flight.len() >= PARTS_IN_FLIGHT || (filled < PART && !in_flight.is_empty()) {
                match in_flight.next().await {
                    Some(Some(Ok(p))) => done.push(p),
                    Some(Some(Err(e))) => return Err(e.to_string()),
                    Some(None) => return Err(format!("a part took more than {part_bound:?}")),
                    None => break,
                }
            }
            if filled < PART {
                break;
            }
        }
        match bounded(part_bound, self.multipart.complete_multipart(key, id, done)).await {
            Some(Ok(r)) => Ok(r.e_tag),
            Some(Err(e)) => Err(e.to_string()),
            None => Err("the store did not complete the upload".into()),
        }
    }

    /// Aborts upload `id` of `key` (one already gone is aborted).
    async fn abort(&self, key: &Key, id: &MultipartId) {
        match bounded(SMALL_OP, self.multipart.abort_multipart(key, id)).await {
            Some(Ok(()) | Err(object_store::Error::NotFound { .. })) => {}
            Some(Err(e)) => tracing::warn!("{}", self.store_err("cannot abort an upload in", &e)),
            None => tracing::warn!("{}", self.stalled("aborting an upload in")),
        }
    }

    /// Aborts the uploads whose markers are among `objects` (listed under
    /// `prefix`) and `owned` says are the cluster's, when [`abandoned`];
    /// deletes their markers. Returns how many it aborted.
    pub async fn abort_leftovers(
        &self,
        prefix: &str,
        objects: &[Object],
        owned: &(dyn Fn(&str) -> bool + Sync),
    ) -> usize {
        let mut n = 0;
        for o in objects {
            let Some(target) = marked(&o.name) else {
                continue;
            };
            if !owned(target) {
                continue;
            }
            let mark_key = format!("{prefix}/{}", o.name);
            let Ok(Some(bytes)) = self.get_small(&mark_key).await else {
                continue;
            };
            let marker = match serde_json::from_slice::<Marker>(&bytes) {
                Ok(m) if m.key == format!("{prefix}/{target}") => m,
                _ => {
                    tracing::warn!(marker = %self.describe(&mark_key), "not an upload marker of ours: left alone");
                    continue;
                }
            };
            if !abandoned(&marker, instance(), now_ms()) {
                continue;
            }
            tracing::info!(object = %self.describe(&marker.key), "aborting an upload that was never completed");
            self.abort(&Key::from(marker.key.as_str()), &marker.upload_id)
                .await;
            if self.delete(&mark_key).await.is_ok() {
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_process_upload_is_abandoned_and_ours_only_when_stuck() {
        let m = Marker {
            key: "p/c/x.db".into(),
            upload_id: "u".into(),
            instance: "aaaa".into(),
            started_ms: 1_000_000,
        };
        assert!(abandoned(&m, "bbbb", 1_000_001));
        assert!(!abandoned(&m, "aaaa", 1_000_001));
        let stuck = 1_000_000 + LEFTOVER_AGE.as_millis() as u64;
        assert!(abandoned(&m, "aaaa", stuck));
        assert_eq!(marked("x.db.upload"), Some("x.db"));
        assert_eq!(marked(".upload"), None);
        assert_eq!(marked("x.db"), None);
    }
}
