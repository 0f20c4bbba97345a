//! A bucket of moto's S3 server for the benchmarks that keep a cluster's
//! backups in an object store: the spec's `location` block, the
//! credentials the operator is given, and a reader of what it uploaded.

use std::path::Path;
use std::sync::Arc;

use etcd_operator::backup::Location;
use etcd_operator::backup::object::ObjectLocation;
use etcd_operator::backup::object::client::StoreEnv;
use etcd_operator::crd::ObjectStoreSpec;
use etcd_operator::platform::local::backups::LocalBackups;
use etcd_operator::platform::local::binaries::Binaries;
use etcd_operator::testing::s3::S3Server;

/// `s3://BUCKET/PREFIX` at a running server.
pub struct InBucket {
    spec: ObjectStoreSpec,
    /// What the operator needs in its environment to reach it.
    pub credentials: Vec<(String, String)>,
}

impl InBucket {
    /// `prefix` in `bucket` (created) of `s3`.
    pub fn new(s3: &S3Server, bucket: &str, prefix: &str) -> Self {
        s3.create_bucket(bucket);
        InBucket {
            spec: ObjectStoreSpec {
                url: format!("s3://{bucket}/{prefix}"),
                endpoint: Some(s3.endpoint()),
                region: None,
                credentials_secret: None,
                service_account_name: None,
            },
            credentials: s3.credentials(),
        }
    }

    /// The spec's `backup.location` block (under `spec.backup`, 4 spaces
    /// in).
    pub fn yaml(&self) -> String {
        format!(
            "    location:\n      objectStore:\n        url: \"{}\"\n        endpoint: \"{}\"\n",
            self.spec.url,
            self.spec.endpoint.as_deref().unwrap_or_default()
        )
    }

    /// `cluster`'s backups in the bucket.
    pub fn location(&self, cluster: &str) -> Location {
        Location {
            object: Some(ObjectLocation::parse(&self.spec, "objectStore").unwrap()),
            ..Location::of(cluster, None)
        }
    }

    /// A backup store over `state` that reads the bucket with the
    /// operator's credentials.
    pub fn reader(&self, state: &Path) -> LocalBackups {
        let binaries = Arc::new(Binaries::new(vec![etcd_operator::testing::binaries()]));
        LocalBackups::new(state, binaries).with_store_env(StoreEnv::new(self.credentials.clone()))
    }
}
