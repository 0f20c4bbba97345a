//! Backups in an object store, for the local platform's store
//! ([`super::backups::LocalBackups`] hands every location with
//! `objectStore` here). The bucket holds what a backup folder holds, under
//! `PREFIX/CLUSTER/`: `NAME.db`, its `NAME.json` (written last: a backup
//! without its meta is never listed) and its delta segments
//! ([`super::object_chain`]). The bucket is the truth: whatever is in the
//! cluster's folder is a staging copy. Whatever etcd or its tools must
//! read is a local file first: a save is taken and verified in `upload/`
//! (the trailer and both etcd tools, as for a folder) and only then
//! uploaded; a restore, a restore check or a chain is downloaded to
//! `fetched/` and checked there. What the store holds is remembered by
//! its size and entity tag ([`Seen`]), so an object is downloaded and
//! hashed again only once it changed in the store.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use super::binaries::Binaries;
use super::safe_path;
use crate::backup::object::ObjectLocation;
use crate::backup::object::client::{Bucket, Object, StoreEnv, Stored};
use crate::backup::{self, BackupMeta, Error, Location, Result, Source, check_file, snapshot};

/// Staging folder of a save, in the cluster's folder.
const UPLOAD: &str = "upload";
/// Snapshots downloaded to be checked ([`ObjectBackups::verify`]).
pub const CHECKING: &str = "checking";
/// Snapshots and chains downloaded for a restore.
pub const RESTORING: &str = "restoring";

/// What the store remembers of one meta object: when it was written, and
/// the meta.
type Remembered = (SystemTime, BackupMeta);

/// An object as this store last found it good in the bucket (uploaded it,
/// or downloaded and checked it): it counts as the same object while the
/// listing shows the same size and entity tag (or, for a store without
/// entity tags, no write since).
#[derive(Clone, Debug)]
pub(super) struct Seen {
    size: u64,
    e_tag: Option<String>,
    /// When the store said it was written (a download), if known.
    modified: Option<SystemTime>,
    /// When it was found good.
    recorded: SystemTime,
    at: Instant,
}

impl Seen {
    /// What an upload that the store acknowledged as `stored` leaves.
    pub(super) fn uploaded(stored: &Stored) -> Self {
        Seen {
            size: stored.size,
            e_tag: stored.e_tag.clone(),
            modified: None,
            recorded: SystemTime::now(),
            at: Instant::now(),
        }
    }

    /// What a download of `object` (its meta as the store sent it) leaves.
    pub(super) fn downloaded(object: &Object) -> Self {
        Seen {
            size: object.size,
            e_tag: object.e_tag.clone(),
            modified: Some(object.modified),
            recorded: SystemTime::now(),
            at: Instant::now(),
        }
    }

    /// Whether the listed `object` is this one, found good within
    /// `max_age` (none: however long ago).
    pub(super) fn matches(&self, object: &Object, max_age: Option<Duration>) -> bool {
        // Stores quote entity tags in some answers and not in others.
        let bare = |t: &str| t.trim_start_matches("W/").trim_matches('"').to_string();
        let same = match (&self.e_tag, &object.e_tag) {
            (Some(a), Some(b)) => bare(a) == bare(b),
            _ => match self.modified {
                Some(m) => m == object.modified,
                None => self.recorded >= object.modified,
            },
        };
        self.size == object.size && same && max_age.is_none_or(|age| self.at.elapsed() < age)
    }
}

/// Object-store backups of one operator.
#[derive(Debug)]
pub struct ObjectBackups {
    state_dir: PathBuf,
    binaries: Arc<Binaries>,
    /// One client per place, reused (its connections with it).
    buckets: tokio::sync::Mutex<HashMap<ObjectLocation, Bucket>>,
    /// Metas already read, by key, while their object is unchanged.
    metas: Mutex<HashMap<String, Remembered>>,
    /// Objects (snapshots, segments) found good in the store, by key.
    seen: Mutex<HashMap<String, Seen>>,
    /// Variables over the process's environment for the store's client.
    env: StoreEnv,
}

impl ObjectBackups {
    /// The store of the operator whose state folder is `state_dir`.
    pub fn new(state_dir: PathBuf, binaries: Arc<Binaries>) -> Self {
        ObjectBackups {
            state_dir,
            binaries,
            buckets: tokio::sync::Mutex::default(),
            metas: Mutex::default(),
            seen: Mutex::default(),
            env: StoreEnv::default(),
        }
    }

    /// This store, its buckets opened with `env` over the environment.
    #[must_use]
    pub fn with_env(mut self, env: StoreEnv) -> Self {
        self.env = env;
        self
    }

    /// The bucket of `location` (which has an object store) and the
    /// prefix of its cluster's backups.
    pub(super) async fn bucket(&self, location: &Location) -> Result<(Bucket, String)> {
        let place = location
            .object
            .as_ref()
            .ok_or_else(|| Error::Unsupported("the location has no object store".into()))?;
        let prefix = place.cluster_prefix(location.owner());
        let mut buckets = self.buckets.lock().await;
        if let Some(b) = buckets.get(place) {
            return Ok((b.clone(), prefix));
        }
        let b = Bucket::open(place, &self.env).await?;
        buckets.insert(place.clone(), b.clone());
        Ok((b, prefix))
    }

    /// `CLUSTERS/CLUSTER/PART`, created, for `location`'s cluster.
    pub(super) fn local_dir(&self, location: &Location, part: &str) -> Result<PathBuf> {
        let dir =
            safe_path::cluster_path(&self.state_dir.join("clusters"), &location.cluster, &[part])
                .map_err(|e| Error::Io {
                what: format!("cannot use the cluster's {part} folder"),
                source: e.into_io(),
            })?;
        std::fs::create_dir_all(&dir)
            .map_err(backup::io_err(format!("cannot create {}", dir.display())))?;
        Ok(dir)
    }

    /// Empties `CLUSTERS/CLUSTER/PART` (what a cut-off save or download
    /// left).
    fn clear(&self, location: &Location, part: &str) {
        let _ =
            safe_path::remove_dir_all(&self.state_dir.join("clusters"), &location.cluster, &[part]);
    }

    /// Remembers that the object at `key` is good as `seen` says.
    pub(super) fn remember(&self, key: &str, seen: Seen) {
        let mut all = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        all.insert(key.to_string(), seen);
    }

    /// Forgets what was found of the object at `key`.
    pub(super) fn forget(&self, key: &str) {
        let mut all = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        all.remove(key);
    }

    /// Whether the listed `object` at `key` was found good, within
    /// `max_age`.
    pub(super) fn known(&self, key: &str, object: &Object, max_age: Option<Duration>) -> bool {
        let all = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        all.get(key).is_some_and(|s| s.matches(object, max_age))
    }

    /// Where in the bucket the store says it is, for messages.
    pub fn describe(&self, location: &Location) -> String {
        match &location.object {
            Some(place) => format!("{}/ in {place}", place.cluster_prefix(location.owner())),
            None => "no object store".into(),
        }
    }

    /// Takes a backup into `upload/`, verified as a folder's is, then
    /// uploads the snapshot and, last, its meta.
    pub async fn save(&self, location: &Location, source: Source<'_>) -> Result<BackupMeta> {
        let (bucket, prefix) = self.bucket(location).await?;
        self.clear(location, UPLOAD);
        let dir = self.local_dir(location, UPLOAD)?;
        super::space::check(&dir, super::space::db_size(source.url).await)?;
        let result = async {
            let meta = snapshot::take(
                &location.cluster,
                location.uid.as_deref(),
                source,
                &dir,
                &self.binaries,
            )
            .await?;
            let key = format!("{prefix}/{}.db", meta.name);
            let stored = bucket.upload(&meta.path(&dir), &key).await?;
            bucket
                .put(&format!("{prefix}/{}.json", meta.name), meta_bytes(&meta)?)
                .await?;
            self.remember(&key, Seen::uploaded(&stored));
            Ok(meta)
        }
        .await;
        self.clear(location, UPLOAD);
        result
    }

    /// The backups of `location`'s cluster, newest first: every `NAME.json`
    /// beside its `NAME.db` whose meta names itself and is the cluster's.
    pub async fn list(&self, location: &Location) -> Result<Vec<BackupMeta>> {
        let (bucket, prefix) = self.bucket(location).await?;
        let objects = bucket.list(&prefix).await?;
        self.metas_in(&bucket, &prefix, &objects, &|m| location.owns(m))
            .await
    }

    /// [`Self::list`] with each snapshot's size checked against its meta,
    /// from one listing of the bucket: nothing is downloaded (a listing
    /// must not fetch gigabytes; `check-backup` verifies a backup whole).
    pub async fn list_sized(
        &self,
        location: &Location,
    ) -> Result<Vec<(BackupMeta, std::result::Result<(), String>)>> {
        let (bucket, prefix) = self.bucket(location).await?;
        let objects = bucket.list(&prefix).await?;
        let metas = self
            .metas_in(&bucket, &prefix, &objects, &|m| location.owns(m))
            .await?;
        let sizes: HashMap<&str, u64> = objects.iter().map(|o| (o.name.as_str(), o.size)).collect();
        Ok(metas
            .into_iter()
            .map(|m| {
                let check = match sizes.get(format!("{}.db", m.name).as_str()) {
                    Some(&size) if size == m.size => Ok(()),
                    Some(&size) => Err(format!(
                        "{size} bytes in the store; its meta says {}",
                        m.size
                    )),
                    None => Err("its snapshot is gone from the store".into()),
                };
                (m, check)
            })
            .collect())
    }

    /// The backups among `objects` (listed under `prefix`) that `keep`
    /// takes, newest first.
    pub(super) async fn metas_in(
        &self,
        bucket: &Bucket,
        prefix: &str,
        objects: &[Object],
        keep: &(dyn Fn(&BackupMeta) -> bool + Sync),
    ) -> Result<Vec<BackupMeta>> {
        let dbs: HashMap<&str, &Object> = objects
            .iter()
            .filter_map(|o| Some((o.name.strip_suffix(".db")?, o)))
            .collect();
        let mut out = Vec::new();
        for o in objects {
            let Some(name) = o.name.strip_suffix(".json") else {
                continue;
            };
            if !dbs.contains_key(name) {
                continue;
            }
            let key = format!("{prefix}/{}", o.name);
            if let Some(meta) = self.meta(bucket, &key, o.modified).await?
                && meta.name == name
                && keep(&meta)
            {
                out.push(meta);
            }
        }
        out.sort_by(|a, b| b.unix_ms.cmp(&a.unix_ms).then(b.name.cmp(&a.name)));
        Ok(out)
    }

    /// The meta at `key` (written at `modified`), read once per write.
    async fn meta(
        &self,
        bucket: &Bucket,
        key: &str,
        modified: SystemTime,
    ) -> Result<Option<BackupMeta>> {
        {
            let metas = self.metas.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((at, m)) = metas.get(key)
                && *at == modified
            {
                return Ok(Some(m.clone()));
            }
        }
        let Some(bytes) = bucket.get_small(key).await? else {
            return Ok(None);
        };
        let Ok(meta) = serde_json::from_slice::<BackupMeta>(&bytes) else {
            tracing::warn!(key, "not a backup meta: ignored");
            return Ok(None);
        };
        let mut metas = self.metas.lock().unwrap_or_else(|e| e.into_inner());
        metas.insert(key.to_string(), (modified, meta.clone()));
        Ok(Some(meta))
    }

    /// The snapshot is there with its meta's size; unless this store
    /// uploaded or checked it as the store holds it now, it is downloaded
    /// and hashed.
    pub async fn verify(&self, location: &Location, meta: &BackupMeta) -> Result<()> {
        let (bucket, prefix) = self.bucket(location).await?;
        let key = format!("{prefix}/{}.db", meta.name);
        let listed = bucket.list(&prefix).await?;
        let Some(obj) = listed
            .iter()
            .find(|o| o.name == format!("{}.db", meta.name))
        else {
            return Err(Error::NotFound {
                name: meta.name.clone(),
                dir: bucket.describe(&key),
                known: "it was deleted since it was listed".into(),
            });
        };
        if obj.size != meta.size {
            return Err(Error::Store(format!(
                "{} is {} bytes; its meta says {}",
                bucket.describe(&key),
                obj.size,
                meta.size
            )));
        }
        if self.known(&key, obj, None) {
            return Ok(());
        }
        let path = self.fetch(location, meta, CHECKING).await?;
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(path.with_extension("json"));
        Ok(())
    }

    /// Downloads the snapshot of `meta` to `PART/NAME.db` in the cluster's
    /// folder and checks it against its meta (trailer and SHA-256);
    /// returns its path.
    pub async fn fetch(
        &self,
        location: &Location,
        meta: &BackupMeta,
        part: &str,
    ) -> Result<PathBuf> {
        let (bucket, prefix) = self.bucket(location).await?;
        let dir = self.local_dir(location, part)?;
        let path = meta.path(&dir);
        let key = format!("{prefix}/{}.db", meta.name);
        let got = bucket.download(&key, &path).await?;
        let (p, sha) = (path.clone(), meta.sha256.clone());
        let checked = tokio::task::spawn_blocking(move || check_file(&p, Some(&sha)))
            .await
            .map_err(|e| Error::Tool(format!("verification task failed: {e}")))?;
        if let Err(e) = checked {
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        self.remember(&key, Seen::downloaded(&got));
        backup::write_meta(&dir, meta)?;
        Ok(path)
    }

    /// Deletes the segments of `meta`, then its snapshot, then its meta.
    pub async fn delete(&self, location: &Location, meta: &BackupMeta) -> Result<()> {
        let (bucket, prefix) = self.bucket(location).await?;
        for o in bucket.list(&prefix).await? {
            if backup::chain::parse_file_name(&o.name).is_some_and(|(base, _)| base == meta.name) {
                bucket.delete(&format!("{prefix}/{}", o.name)).await?;
            }
        }
        bucket.delete(&format!("{prefix}/{}.db", meta.name)).await?;
        bucket
            .delete(&format!("{prefix}/{}.json", meta.name))
            .await?;
        self.drop_staged(location, &meta.name);
        Ok(())
    }

    /// Deletes, of the cluster's own objects only ([`backup::owned_file`]):
    /// a meta without its snapshot, segments whose base has no meta, and,
    /// once older than [`backup::ORPHAN_AGE`], a snapshot without a meta
    /// (a save cut off between its upload and its meta); and aborts the
    /// cluster's multipart uploads that were never completed
    /// ([`Bucket::abort_leftovers`]).
    pub async fn sweep(&self, location: &Location) {
        let Ok((bucket, prefix)) = self.bucket(location).await else {
            return;
        };
        let Ok(objects) = bucket.list(&prefix).await else {
            return;
        };
        let (cluster, uid) = (location.cluster.as_str(), location.uid.as_deref());
        let owned = |name: &str| backup::owned_file(name, cluster, uid).is_some();
        let aborted = bucket.abort_leftovers(&prefix, &objects, &owned).await;
        if aborted > 0 {
            tracing::info!(
                cluster,
                aborted,
                "aborted uploads that were never completed"
            );
        }
        let names: std::collections::HashSet<&str> =
            objects.iter().map(|o| o.name.as_str()).collect();
        for o in &objects {
            if crate::backup::object::upload::marked(&o.name).is_some() {
                continue;
            }
            let Some(name) = backup::owned_file(&o.name, cluster, uid) else {
                continue;
            };
            let has = |ext: &str| names.contains(format!("{name}.{ext}").as_str());
            let old = SystemTime::now()
                .duration_since(o.modified)
                .is_ok_and(|age| age >= backup::ORPHAN_AGE);
            let leftover = if o.name.ends_with(".json") {
                !has("db")
            } else if o.name.ends_with(".db") {
                !has("json") && old
            } else {
                backup::chain::parse_file_name(&o.name).is_some() && !has("json")
            };
            if leftover {
                tracing::info!(cluster, object = %bucket.describe(&format!("{prefix}/{}", o.name)), "deleting what a cut-off save left behind");
                let _ = bucket.delete(&format!("{prefix}/{}", o.name)).await;
            }
        }
    }

    /// The snapshot and, with `segments`, the chain of the backup named
    /// `name`, downloaded and checked into `restoring/`: (folder, meta).
    pub async fn fetch_named(
        &self,
        location: &Location,
        name: &str,
        segments: bool,
    ) -> Result<(PathBuf, BackupMeta)> {
        let metas = self.list(location).await?;
        let Some(meta) = metas.iter().find(|m| m.name == name).cloned() else {
            return Err(Error::NotFound {
                name: name.into(),
                dir: format!(
                    "{} (backups of {})",
                    self.describe(location),
                    location.owner()
                ),
                known: if metas.is_empty() {
                    "none".into()
                } else {
                    metas
                        .iter()
                        .map(|m| m.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            });
        };
        self.clear(location, RESTORING);
        let path = self.fetch(location, &meta, RESTORING).await?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        if segments {
            self.fetch_segments(location, &meta, &dir).await?;
        }
        Ok((dir, meta))
    }

    /// Deletes what was downloaded into `PART` for `location`'s cluster.
    pub fn close(&self, location: &Location, part: &str) {
        self.clear(location, part);
    }

    /// Records a restore check in the backup's meta object, unless
    /// retention deleted the backup meanwhile.
    pub async fn record_check(&self, location: &Location, meta: &BackupMeta) -> Result<()> {
        let (bucket, prefix) = self.bucket(location).await?;
        let listed = bucket.list(&prefix).await?;
        if listed.iter().any(|o| o.name == format!("{}.db", meta.name)) {
            bucket
                .put(&format!("{prefix}/{}.json", meta.name), meta_bytes(meta)?)
                .await?;
        }
        Ok(())
    }

    /// The other clusters whose backups are under this cluster's prefix:
    /// another cluster by name, an earlier cluster of the same name by its
    /// uid (as a backup folder says them).
    pub async fn shared_with(&self, location: &Location) -> Vec<String> {
        let Ok((bucket, prefix)) = self.bucket(location).await else {
            return Vec::new();
        };
        let Ok(objects) = bucket.list(&prefix).await else {
            return Vec::new();
        };
        let Ok(others) = self
            .metas_in(&bucket, &prefix, &objects, &|m| !location.owns(m))
            .await
        else {
            return Vec::new();
        };
        let mut out: Vec<String> = others
            .into_iter()
            .map(|m| backup::sharer(m, &location.cluster))
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// A meta as its object holds it.
fn meta_bytes(meta: &BackupMeta) -> Result<Vec<u8>> {
    serde_json::to_vec_pretty(meta)
        .map_err(|e| Error::Tool(format!("cannot encode the meta of {}: {e}", meta.name)))
}
