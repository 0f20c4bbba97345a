//! The operations a backup store needs from a bucket: upload a file (a
//! multipart upload past [`PART`], visible to readers only once complete),
//! put and get small objects, download to a file (written aside, then
//! renamed), list a prefix, delete. Every failure is an
//! [`Error::Store`] whose message never holds a credential ([`scrub_with`]).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use object_store::path::Path as Key;
use object_store::{
    ClientOptions, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig, WriteMultipart,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{ObjectLocation, Scheme};
use crate::backup::{Error, Result};

/// Size of each part of a multipart upload (and the size below which a
/// file goes up in one request).
const PART: usize = 16 << 20;
/// Parts uploaded at once.
const PARTS_IN_FLIGHT: usize = 4;
/// Largest small object read whole (a meta).
const MAX_SMALL: u64 = 1 << 20;
/// Environment variables whose values are secrets: never in a message.
const SECRETS: [&str; 7] = [
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_ACCESS_KEY",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_SERVICE_ACCOUNT_KEY",
];

/// Variables laid over the process's environment when a bucket is opened:
/// none in the programs (a Kubernetes Job gets its credentials Secret as
/// its environment), a Job's own environment where a test runs the Job's
/// work in its process. Their values never show in `Debug`.
#[derive(Clone, Default)]
pub struct StoreEnv(Arc<Vec<(String, String)>>);

impl std::fmt::Debug for StoreEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|(k, _)| k.as_str()).collect();
        write!(f, "StoreEnv({names:?})")
    }
}

impl StoreEnv {
    /// `vars` over the process's environment.
    pub fn new(vars: Vec<(String, String)>) -> Self {
        StoreEnv(Arc::new(vars))
    }

    /// The value of `name`: this overlay's, else the process's.
    fn get(&self, name: &str) -> Option<String> {
        let mine = self.0.iter().rev().find(|(k, _)| k == name);
        mine.map(|(_, v)| v.clone())
            .or_else(|| std::env::var(name).ok())
    }

    /// The overlay's variables whose names start with `prefix`.
    fn with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (String, &'a str)> {
        self.0
            .iter()
            .filter(move |(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.to_ascii_lowercase(), v.as_str()))
    }

    /// The secrets these variables hold ([`SECRETS`]), to scrub.
    fn secrets(&self) -> Vec<String> {
        SECRETS.iter().filter_map(|var| self.get(var)).collect()
    }
}

/// An object in a listing: its name under the listed prefix, size and
/// time of its last write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    /// The name after the prefix and its `/`.
    pub name: String,
    /// Bytes.
    pub size: u64,
    /// Last written.
    pub modified: SystemTime,
}

/// One bucket, reached with the credentials of the operator's environment.
#[derive(Clone, Debug)]
pub struct Bucket {
    store: Arc<dyn ObjectStore>,
    place: ObjectLocation,
    /// Secret values of the environment it was opened with, scrubbed from
    /// every message.
    secrets: Arc<Vec<String>>,
}

impl Bucket {
    /// A client for `place` with the credentials of the environment and
    /// `env` over it; nothing is sent yet.
    pub fn open(place: &ObjectLocation, env: &StoreEnv) -> Result<Self> {
        let secrets = env.secrets();
        let store_err = |what: &str, e: &object_store::Error| {
            Error::Store(scrub_with(&format!("{what} {place}: {e}"), &secrets))
        };
        let options = ClientOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_secs(120))
            .with_allow_http(
                place
                    .endpoint
                    .as_deref()
                    .is_some_and(|e| e.starts_with("http://")),
            );
        let retry = RetryConfig {
            max_retries: 4,
            retry_timeout: Duration::from_secs(60),
            ..RetryConfig::default()
        };
        let store: Arc<dyn ObjectStore> = match place.scheme {
            Scheme::S3 => {
                let mut b = object_store::aws::AmazonS3Builder::from_env();
                for (k, v) in env.with_prefix("AWS_") {
                    if let Ok(key) = k.parse() {
                        b = b.with_config(key, v);
                    }
                }
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
                Arc::new(b.build().map_err(|e| store_err("cannot use", &e))?)
            }
            Scheme::Gcs => {
                let mut b = object_store::gcp::GoogleCloudStorageBuilder::from_env();
                for (k, v) in env.with_prefix("GOOGLE_") {
                    if let Ok(key) = k.parse() {
                        b = b.with_config(key, v);
                    }
                }
                let mut b = b
                    .with_bucket_name(&place.bucket)
                    .with_client_options(options)
                    .with_retry(retry);
                if let Some(e) = &place.endpoint {
                    b = b.with_config(object_store::gcp::GoogleConfigKey::BaseUrl, e);
                }
                Arc::new(b.build().map_err(|e| store_err("cannot use", &e))?)
            }
            Scheme::Azure => {
                let mut b = object_store::azure::MicrosoftAzureBuilder::from_env();
                for (k, v) in env.with_prefix("AZURE_") {
                    if let Ok(key) = k.parse() {
                        b = b.with_config(key, v);
                    }
                }
                let mut b = b
                    .with_container_name(&place.bucket)
                    .with_client_options(options)
                    .with_retry(retry);
                if let Some(e) = &place.endpoint {
                    b = b
                        .with_endpoint(e.clone())
                        .with_allow_http(e.starts_with("http://"));
                }
                Arc::new(b.build().map_err(|e| store_err("cannot use", &e))?)
            }
        };
        Ok(Bucket {
            store,
            place: place.clone(),
            secrets: Arc::new(secrets),
        })
    }

    /// Where this bucket is, for messages.
    pub fn place(&self) -> &ObjectLocation {
        &self.place
    }

    /// Uploads `file` to `key`: readers see the object only once the whole
    /// file is up (one request up to [`PART`]; past it a multipart upload,
    /// completed last, aborted when anything fails).
    pub async fn upload(&self, file: &Path, key: &str) -> Result<u64> {
        let fail = |e: &dyn std::fmt::Display| {
            Error::Store(self.scrub(&format!(
                "cannot upload {} to {}: {e}",
                file.display(),
                self.describe(key)
            )))
        };
        let mut src = tokio::fs::File::open(file).await.map_err(|e| fail(&e))?;
        let size = src.metadata().await.map_err(|e| fail(&e))?.len();
        let k = Key::from(key);
        if size <= PART as u64 {
            let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(PART));
            src.read_to_end(&mut buf).await.map_err(|e| fail(&e))?;
            let n = buf.len() as u64;
            self.store
                .put(&k, PutPayload::from(buf))
                .await
                .map_err(|e| fail(&e))?;
            return Ok(n);
        }
        let upload = self.store.put_multipart(&k).await.map_err(|e| fail(&e))?;
        let mut w = WriteMultipart::new_with_chunk_size(upload, PART);
        let mut buf = vec![0u8; 1 << 20];
        let mut n = 0u64;
        loop {
            let read = match src.read(&mut buf).await {
                Ok(0) => break,
                Ok(r) => r,
                Err(e) => {
                    let _ = w.abort().await;
                    return Err(fail(&e));
                }
            };
            if let Err(e) = w.wait_for_capacity(PARTS_IN_FLIGHT).await {
                let _ = w.abort().await;
                return Err(fail(&e));
            }
            w.write(&buf[..read]);
            n += read as u64;
        }
        w.finish().await.map_err(|e| fail(&e))?;
        Ok(n)
    }

    /// Writes a small object in one request.
    pub async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<()> {
        self.store
            .put(&Key::from(key), PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|e| self.store_err(&format!("cannot write {key} in"), &e))
    }

    /// A small object (at most [`MAX_SMALL`] bytes); `None` when there is
    /// none.
    pub async fn get_small(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let got = match self.store.get(&Key::from(key)).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.store_err(&format!("cannot read {key} in"), &e)),
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
            .map_err(|e| self.store_err(&format!("cannot read {key} in"), &e))
    }

    /// Downloads `key` to `dest` (written to a hidden file beside it,
    /// fsynced, then renamed: `dest` is never half written).
    pub async fn download(&self, key: &str, dest: &Path) -> Result<u64> {
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
        let got = self
            .store
            .get(&Key::from(key))
            .await
            .map_err(|e| what(&e))?;
        let mut stream = got.into_stream();
        let mut out = tokio::fs::File::create(&tmp).await.map_err(|e| what(&e))?;
        let mut n = 0u64;
        let result: Result<()> = async {
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| what(&e))?;
                n += chunk.len() as u64;
                out.write_all(&chunk).await.map_err(|e| what(&e))?;
            }
            out.sync_all().await.map_err(|e| what(&e))?;
            tokio::fs::rename(&tmp, dest).await.map_err(|e| what(&e))
        }
        .await;
        if result.is_err() {
            let _ = tokio::fs::remove_file(&tmp).await;
        }
        result.map(|()| n)
    }

    /// The objects directly under `prefix` (no deeper), by name.
    pub async fn list(&self, prefix: &str) -> Result<Vec<Object>> {
        let key = Key::from(prefix);
        let mut stream = self.store.list(Some(&key));
        let mut out = Vec::new();
        while let Some(item) = stream.next().await {
            let meta = item.map_err(|e| self.store_err(&format!("cannot list {prefix} in"), &e))?;
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
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Deletes `key`; one already gone is deleted.
    pub async fn delete(&self, key: &str) -> Result<()> {
        match self.store.delete(&Key::from(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.store_err(&format!("cannot delete {key} in"), &e)),
        }
    }

    /// `key` in this bucket, in words.
    pub fn describe(&self, key: &str) -> String {
        format!("{key} in {}", self.place)
    }

    /// `message` with the value of every secret of the environment the
    /// bucket was opened with ([`SECRETS`]) replaced by `***`: the store's
    /// own errors are quoted in status, Events and logs, and must never
    /// carry one.
    fn scrub(&self, message: &str) -> String {
        scrub_with(message, &self.secrets)
    }

    /// An [`Error::Store`] saying `what` failed in this bucket, scrubbed.
    fn store_err(&self, what: &str, e: &object_store::Error) -> Error {
        Error::Store(self.scrub(&format!("{what} {}: {e}", self.place)))
    }
}

/// `message` with each of `secrets` (at least 4 characters long) replaced
/// by `***`.
pub fn scrub_with(message: &str, secrets: &[String]) -> String {
    let mut out = message.to_string();
    for v in secrets.iter().filter(|v| v.len() >= 4) {
        out = out.replace(v.as_str(), "***");
    }
    out
}
