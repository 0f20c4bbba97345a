//! What the object-store tests share: the stores they run (a URL, an
//! endpoint and credentials), an operator whose environment reaches them,
//! and reading the bucket the way the operator does, from a folder of the
//! test's own (never the operator's staging copies, which the reader would
//! otherwise upload).

use std::sync::Arc;

use etcd_operator::backup::chain::Chain;
use etcd_operator::backup::object::ObjectLocation;
use etcd_operator::backup::object::client::{Bucket, StoreEnv};
use etcd_operator::backup::{BackupMeta, BackupStore, Location};
use etcd_operator::crd::ObjectStoreSpec;
use etcd_operator::platform::local::backups::LocalBackups;
use etcd_operator::platform::local::binaries::Binaries;
use etcd_operator::testing::Env;
use etcd_operator::testing::s3::S3Server;

/// The bucket the tests make.
pub const BUCKET: &str = "etcd-backups";

/// A store the tests run: its URL, endpoint and credentials.
pub struct Place {
    pub url: String,
    pub endpoint: String,
    pub credentials: Vec<(String, String)>,
}

impl Place {
    pub fn s3(s3: &S3Server) -> Self {
        Place {
            url: format!("s3://{BUCKET}/prod"),
            endpoint: s3.endpoint(),
            credentials: s3.credentials(),
        }
    }

    /// The place as the spec gives it, checked.
    pub fn location(&self) -> ObjectLocation {
        ObjectLocation::parse(
            &ObjectStoreSpec {
                url: self.url.clone(),
                endpoint: Some(self.endpoint.clone()),
                ..ObjectStoreSpec::default()
            },
            "test",
        )
        .expect("a place")
    }

    /// The bucket, opened with the place's credentials.
    pub fn bucket(&self) -> Bucket {
        rt().block_on(Bucket::open(
            &self.location(),
            &StoreEnv::new(self.credentials.clone()),
        ))
        .expect("the bucket opens")
    }
}

/// The `objectStore` block of a manifest, at `indent`.
pub fn object_store(place: &Place, indent: &str) -> String {
    format!(
        "{indent}objectStore:\n{indent}  url: {}\n{indent}  endpoint: {}\n",
        place.url, place.endpoint
    )
}

/// An operator whose environment holds the store's credentials (and the
/// test process too: it reads the store with the same).
#[allow(unsafe_code)]
pub fn env_with(place: &Place) -> Env {
    for (k, v) in &place.credentials {
        // SAFETY: set before this test starts any thread, and every test
        // of this file sets the same values.
        unsafe { std::env::set_var(k, v) };
    }
    let mut env = Env::new();
    env.operator_env.extend(place.credentials.iter().cloned());
    env
}

/// A reader of the bucket: the operator's own store code, with a state
/// folder of its own (in the test's folder, gone with it).
pub struct Reader {
    pub store: LocalBackups,
    pub location: Location,
}

/// A [`Reader`] of `cluster`'s backups in `place`.
pub fn reader(env: &Env, place: &Place, cluster: &str) -> Reader {
    let mut location = Location::of(cluster, None);
    location.object = Some(place.location());
    let dir = env.dir.path().join(format!("reader-{}", rand_suffix()));
    let store = LocalBackups::new(dir, Arc::new(Binaries::new(Vec::new())));
    Reader { store, location }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

impl Reader {
    /// The backups the bucket holds, newest first.
    pub fn list(&self) -> Vec<BackupMeta> {
        rt().block_on(self.store.list(&self.location))
            .unwrap_or_default()
    }

    /// The chain of `base` as the bucket holds it.
    pub fn chain(&self, base: &BackupMeta) -> Option<Chain> {
        rt().block_on(self.store.chain(&self.location, base)).ok()
    }
}

/// The backups of `cluster` in the bucket, as the store lists them.
pub fn listed(env: &Env, place: &Place, cluster: &str) -> Vec<BackupMeta> {
    reader(env, place, cluster).list()
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Nothing the operator wrote holds a secret of `place`'s credentials.
pub fn assert_no_secret(env: &Env, place: &Place) {
    let secrets: Vec<&str> = place
        .credentials
        .iter()
        .filter(|(k, _)| k.ends_with("SECRET_ACCESS_KEY") || k.ends_with("ACCOUNT_KEY"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert!(!secrets.is_empty(), "the test names its secret");
    let mut stack = vec![env.dir.path().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file()
                && let Ok(text) = std::fs::read(&p)
            {
                for secret in &secrets {
                    let hit = text.windows(secret.len()).any(|w| w == secret.as_bytes());
                    assert!(!hit, "{} holds the secret", p.display());
                }
            }
        }
    }
}
