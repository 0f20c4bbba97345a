//! The operations a backup store needs from a bucket: put and get small
//! objects, upload a file ([`super::upload`]), download to a file (written
//! aside, then renamed), list a prefix, delete. Every request is bounded by
//! progress, not only by a total: connecting within [`CONNECT`], each next
//! byte of an answer within [`IDLE`], one request within [`REQUEST`] and
//! its retries within [`RETRIES`], so a store that stops answering fails
//! the operation in well under a minute and shows in status. Every failure
//! is an [`Error::Store`] whose message never holds a credential.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use object_store::multipart::MultipartStore;
use object_store::path::Path as Key;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig};
use tokio::io::AsyncWriteExt;

use super::env::{checked, scrub_with as scrub_secrets};
use super::{ObjectLocation, Scheme};
use crate::backup::{Error, Result};

pub use super::env::{StoreEnv, scrub_with};

/// Longest wait for a connection to the store.
pub const CONNECT: Duration = Duration::from_secs(5);
/// Longest wait for the next byte of an answer (its first one included):
/// a store that stops answering mid-request fails the request.
pub const IDLE: Duration = Duration::from_secs(10);
/// The most one request may take, whatever it carries (a part of
/// [`super::upload::PART`] bytes at about 140 KiB/s).
pub const REQUEST: Duration = Duration::from_secs(120);
/// The most the retries of one request may add.
pub const RETRIES: Duration = Duration::from_secs(20);
/// The most an operation on a small object (a meta, a segment, a listing)
/// may take in all, retries included: a second guard beside the client's
/// own bounds.
pub const SMALL_OP: Duration = Duration::from_secs(60);
/// Largest small object read whole (a meta).
const MAX_SMALL: u64 = 1 << 20;

/// An object in a listing: its name under the listed prefix, size, time of
/// its last write and entity tag (a new one for every write).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    /// The name after the prefix and its `/`.
    pub name: String,
    /// Bytes.
    pub size: u64,
    /// Last written.
    pub modified: SystemTime,
    /// The store's entity tag, where it gives one.
    pub e_tag: Option<String>,
}

/// What the store says it holds after a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// Bytes written.
    pub size: u64,
    /// The object's entity tag, where the store gives one.
    pub e_tag: Option<String>,
}

/// One bucket, reached with the credentials of the operator's environment.
#[derive(Clone)]
pub struct Bucket {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) multipart: Arc<dyn MultipartStore>,
    place: ObjectLocation,
    /// Secret values of the environment it was opened with, scrubbed from
    /// every message.
    secrets: Arc<Vec<String>>,
}

impl std::fmt::Debug for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bucket")
            .field("place", &self.place)
            .finish_non_exhaustive()
    }
}

/// The client options every bucket gets (see the module doc).
fn options(place: &ObjectLocation) -> (ClientOptions, RetryConfig) {
    let options = ClientOptions::new()
        .with_connect_timeout(CONNECT)
        .with_read_timeout(IDLE)
        .with_timeout(REQUEST)
        .with_allow_http(
            place
                .endpoint
                .as_deref()
                .is_some_and(|e| e.starts_with("http://")),
        );
    let retry = RetryConfig {
        max_retries: 3,
        retry_timeout: RETRIES,
        ..RetryConfig::default()
    };
    (options, retry)
}

/// Builds the client of one cloud from `pairs` (lowercased settings, a
/// later one winning) and `then` (the place's own settings).
macro_rules! build {
    ($builder:ty, $key:ty, $pairs:expr, $then:expr, $err:expr) => {{
        let mut b = <$builder>::new();
        for (k, v) in $pairs {
            if let Ok(key) = k.parse::<$key>() {
                b = b.with_config(key, v);
            }
        }
        let b = $then(b);
        let built = b.build().map_err($err)?;
        let built = Arc::new(built);
        let store: Arc<dyn ObjectStore> = built.clone();
        let multipart: Arc<dyn MultipartStore> = built;
        (store, multipart)
    }};
}

impl Bucket {
    /// A client for `place` with the credentials of the environment and
    /// `env` over it (files those name read as [`super::env::checked`]
    /// says); nothing is sent yet.
    pub async fn open(place: &ObjectLocation, env: &StoreEnv) -> Result<Self> {
        let secrets = env.secrets();
        let store_err = |e: object_store::Error| {
            Error::Store(scrub_secrets(&format!("cannot use {place}: {e}"), &secrets))
        };
        let (options, retry) = options(place);
        let (store, multipart) = match place.scheme {
            Scheme::S3 => {
                let pairs = checked(env.with_prefix("AWS_")).await?;
                build!(
                    object_store::aws::AmazonS3Builder,
                    object_store::aws::AmazonS3ConfigKey,
                    pairs,
                    |b: object_store::aws::AmazonS3Builder| {
                        let mut b = b
                            .with_bucket_name(&place.bucket)
                            .with_client_options(options)
                            .with_retry(retry);
                        if let Some(r) = &place.region {
                            b = b.with_region(r);
                        }
                        if let Some(e) = &place.endpoint {
                            b = b.with_endpoint(e).with_virtual_hosted_style_request(false);
                        }
                        b
                    },
                    store_err
                )
            }
            Scheme::Gcs => {
                let pairs = checked(env.with_prefix("GOOGLE_")).await?;
                build!(
                    object_store::gcp::GoogleCloudStorageBuilder,
                    object_store::gcp::GoogleConfigKey,
                    pairs,
                    |b: object_store::gcp::GoogleCloudStorageBuilder| {
                        let mut b = b
                            .with_bucket_name(&place.bucket)
                            .with_client_options(options)
                            .with_retry(retry);
                        if let Some(e) = &place.endpoint {
                            b = b.with_config(object_store::gcp::GoogleConfigKey::BaseUrl, e);
                        }
                        b
                    },
                    store_err
                )
            }
            Scheme::Azure => {
                let pairs = checked(env.with_prefix("AZURE_")).await?;
                build!(
                    object_store::azure::MicrosoftAzureBuilder,
                    object_store::azure::AzureConfigKey,
                    pairs,
                    |b: object_store::azure::MicrosoftAzureBuilder| {
                        let mut b = b
                            .with_container_name(&place.bucket)
                            .with_client_options(options)
                            .with_retry(retry);
                        if let Some(e) = &place.endpoint {
                            b = b
                                .with_endpoint(e.clone())
                                .with_allow_http(e.starts_with("http://"));
                        }
                        b
                    },
                    store_err
                )
            }
        };
        Ok(Bucket {
            store,
            multipart,
            place: place.clone(),
            secrets: Arc::new(secrets),
        })
    }

    /// Where this bucket is, for messages.
    pub fn place(&self) -> &ObjectLocation {
        &self.place
    }

    /// Writes a small object in one request.
    pub async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<Stored> {
        let size = bytes.len() as u64;
        let k = Key::from(key);
        match bounded(SMALL_OP, self.store.put(&k, PutPayload::from(bytes))).await {
            Some(Ok(r)) => Ok(Stored {
                size,
                e_tag: r.e_tag,
            }),
            Some(Err(e)) => Err(self.store_err(&format!("cannot write {key} in"), &e)),
            None => Err(self.stalled(&format!("writing {key} in"))),
        }
    }

    /// A small object (at most [`MAX_SMALL`] bytes); `None` when there is
    /// none.
    pub async fn get_small(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let fail = |e: &object_store::Error| self.store_err(&format!("cannot read {key} in"), e);
        let read = async {
            let got = match self.store.get(&Key::from(key)).await {
                Ok(g) => g,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(fail(&e)),
            };
            if got.meta.size > MAX_SMALL {
                return Err(Error::Store(format!(
                    "{} is {} bytes; a meta is at most {MAX_SMALL}",
                    self.describe(key),
                    got.meta.size
                )));
            }
            got.bytes()
                .await
                .map(|b| Some(b.to_vec()))
                .map_err(|e| fail(&e))
        };
        bounded(SMALL_OP, read)
            .await
            .unwrap_or_else(|| Err(self.stalled(&format!("reading {key} in"))))
    }

    /// Downloads `key` to `dest` (written to a hidden file beside it,
    /// fsynced, then renamed: `dest` is never half written); each next
    /// chunk must come within [`IDLE`]. Returns what was read.
    pub async fn download(&self, key: &str, dest: &Path) -> Result<Object> {
        self.download_if_there(key, dest).await?.ok_or_else(|| {
            Error::Store(self.scrub(&format!(
                "cannot download {}: it is not there",
                self.describe(key)
            )))
        })
    }

    /// [`Self::download`], `None` when the store holds no `key` (a read
    /// by name: cheaper than a listing, and as fresh).
    pub async fn download_if_there(&self, key: &str, dest: &Path) -> Result<Option<Object>> {
        let what = |e: &dyn std::fmt::Display| {
            Error::Store(self.scrub(&format!(
                "cannot download {} to {}: {e}",
                self.describe(key),
                dest.display()
            )))
        };
        let name = dest
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("download");
        let tmp = dest.with_file_name(format!(".tmp-{name}"));
        if let Some(dir) = dest.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(|e| what(&e))?;
        }
        let got = match bounded(REQUEST + RETRIES, self.store.get(&Key::from(key))).await {
            Some(Err(object_store::Error::NotFound { .. })) => return Ok(None),
            Some(got) => got.map_err(|e| what(&e))?,
            None => return Err(what(&"the store did not answer")),
        };
        let object = Object {
            name: key.rsplit('/').next().unwrap_or(key).to_string(),
            size: got.meta.size,
            modified: SystemTime::from(got.meta.last_modified),
            e_tag: got.meta.e_tag.clone(),
        };
        let mut stream = got.into_stream();
        let mut out = tokio::fs::File::create(&tmp).await.map_err(|e| what(&e))?;
        let result: Result<()> = async {
            loop {
                let chunk = match tokio::time::timeout(IDLE, stream.next()).await {
                    Ok(Some(chunk)) => chunk.map_err(|e| what(&e))?,
                    Ok(None) => break,
                    Err(_) => return Err(what(&format!("no data for {IDLE:?}"))),
                };
                out.write_all(&chunk).await.map_err(|e| what(&e))?;
            }
            out.sync_all().await.map_err(|e| what(&e))?;
            tokio::fs::rename(&tmp, dest).await.map_err(|e| what(&e))
        }
        .await;
        if result.is_err() {
            let _ = tokio::fs::remove_file(&tmp).await;
        }
        result.map(|()| Some(object))
    }

    /// The objects directly under `prefix` (no deeper), by name.
    pub async fn list(&self, prefix: &str) -> Result<Vec<Object>> {
        let key = Key::from(prefix);
        let list = async {
            let mut stream = self.store.list(Some(&key));
            let mut out = Vec::new();
            while let Some(item) = stream.next().await {
                let meta =
                    item.map_err(|e| self.store_err(&format!("cannot list {prefix} in"), &e))?;
                let full = meta.location.as_ref();
                let Some(name) = full
                    .strip_prefix(prefix)
                    .and_then(|r| r.strip_prefix('/'))
                    .filter(|n| !n.is_empty() && !n.contains('/'))
                else {
                    continue;
                };
                out.push(Object {
                    name: name.to_string(),
                    size: meta.size,
                    modified: SystemTime::from(meta.last_modified),
                    e_tag: meta.e_tag,
                });
            }
            out.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(out)
        };
        bounded(SMALL_OP, list)
            .await
            .unwrap_or_else(|| Err(self.stalled(&format!("listing {prefix} in"))))
    }

    /// The names of the folders directly under `prefix` (empty: the
    /// bucket's root).
    pub async fn folders(&self, prefix: &str) -> Result<Vec<String>> {
        let key = (!prefix.is_empty()).then(|| Key::from(prefix));
        let listed = bounded(SMALL_OP, self.store.list_with_delimiter(key.as_ref())).await;
        let listed = match listed {
            Some(r) => r.map_err(|e| self.store_err(&format!("cannot list {prefix}/ in"), &e))?,
            None => return Err(self.stalled(&format!("listing {prefix}/ in"))),
        };
        let mut out: Vec<String> = listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect();
        out.sort();
        Ok(out)
    }

    /// Deletes `key`; one already gone is deleted.
    pub async fn delete(&self, key: &str) -> Result<()> {
        match bounded(SMALL_OP, self.store.delete(&Key::from(key))).await {
            Some(Ok(()) | Err(object_store::Error::NotFound { .. })) => Ok(()),
            Some(Err(e)) => Err(self.store_err(&format!("cannot delete {key} in"), &e)),
            None => Err(self.stalled(&format!("deleting {key} in"))),
        }
    }

    /// `key` in this bucket, in words.
    pub fn describe(&self, key: &str) -> String {
        format!("{key} in {}", self.place)
    }

    /// `message` with the value of every secret of the environment the
    /// bucket was opened with ([`super::env::SECRETS`]) replaced by `***`:
    /// the store's own errors are quoted in status, Events and logs, and
    /// must never carry one.
    pub(super) fn scrub(&self, message: &str) -> String {
        scrub_with(message, &self.secrets)
    }

    /// An [`Error::Store`] saying `what` failed in this bucket, scrubbed;
    /// a bucket that does not exist is said so, with the fix.
    pub(super) fn store_err(&self, what: &str, e: &object_store::Error) -> Error {
        let text = e.to_string();
        let missing = ["NoSuchBucket", "ContainerNotFound", "does not exist"]
            .iter()
            .any(|s| text.contains(s));
        if missing {
            return Error::Store(self.scrub(&format!(
                "{what} {}: the bucket {:?} does not exist there (create it, or correct the \
                 location's url and endpoint): {text}",
                self.place, self.place.bucket
            )));
        }
        Error::Store(self.scrub(&format!("{what} {}: {text}", self.place)))
    }

    /// An [`Error::Store`] saying the store did not answer while `doing`.
    pub(super) fn stalled(&self, doing: &str) -> Error {
        Error::Store(format!(
            "the store did not answer while {doing} {} (no answer within {SMALL_OP:?}, retries \
             included)",
            self.place
        ))
    }
}

/// `fut`, or `None` when it did not end within `limit`.
pub(super) async fn bounded<F: std::future::Future>(limit: Duration, fut: F) -> Option<F::Output> {
    tokio::time::timeout(limit, fut).await.ok()
}
