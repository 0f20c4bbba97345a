//! The backup part of the `EtcdCluster` spec (`spec.backup`): the
//! policy, continuous backups, restore checks, and where backups are kept
//! (a folder, a volume claim, an object store).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Backup policy, e.g. "every 30 minutes, keep the last 3".
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackupSpec {
    /// Time between backups, as a Go duration such as "30m", "1h" or "10s"
    /// (1s to 8784h, a year and a day).
    pub interval: String,
    /// How many verified backups to keep (1 to 10000). The newest are
    /// kept; the last good backup is never deleted.
    pub max_backups: i64,
    /// Where backups are written. Local platform: a folder, by default
    /// `<state-dir>/backups/<cluster>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<BackupLocation>,
    /// Restore checks (both platforms): every `interval` the newest good
    /// backup is restored into a scratch single-member etcd (on Kubernetes
    /// inside a backup Job's pod) and its KV hash at the backup's revision
    /// compared with the live cluster's; the result goes into the backup's
    /// meta and `status.backup.lastRestoreCheck`. Off when unset (locally
    /// `etcd-operator check-backup` runs one by hand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_check: Option<RestoreCheckSpec>,
    /// Continuous backups: the operator follows the cluster's changes (on
    /// Kubernetes in a Deployment `NAME-backup-follow`) and writes them,
    /// every `segmentInterval`, as delta segments beside the newest full
    /// backup; a restore or a rebuild replays them, so it loses at most
    /// about one interval of writes. With client TLS the follower
    /// connects with the client certificate the operator issues for its
    /// tools (on Kubernetes, the Secret `NAME-client-tls` mounted in its
    /// pod). Off when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuous: Option<ContinuousSpec>,
}

/// Continuous backups: delta segments of the cluster's changes between
/// full backups.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinuousSpec {
    /// Time between two delta segments, as a Go duration such as "1s"
    /// (100ms to 1h): the most writes a rebuild from backups can lose.
    pub segment_interval: String,
    /// Also write a segment as soon as this many changes are waiting
    /// (1 to 1000000; default 10000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_events: Option<i64>,
}

/// How often backups are proven to restore.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RestoreCheckSpec {
    /// Time between restore checks, as a Go duration such as "1h" (1s to
    /// 8784h, a year and a day).
    pub interval: String,
}

/// Where backups are stored.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackupLocation {
    /// A folder on the operator's machine (local platform).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Name of a PersistentVolumeClaim in the cluster's namespace
    /// (Kubernetes; default `<cluster>-backups`). The operator creates it
    /// when it does not exist, with `size` and `storageClassName`, and never
    /// deletes it: backups outlive the cluster. Each cluster's backups go to
    /// the folder `backups/<cluster>` in it, so clusters may share a claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<String>,
    /// Size of the claim the operator creates (Kubernetes), such as "10Gi"
    /// (the default): room for `maxBackups` snapshots, each up to the
    /// database's size (etcd's default quota is 2 GiB), and one copy set
    /// aside while a cluster restores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// Storage class of the claim the operator creates (Kubernetes);
    /// default: the cluster's default class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    /// A bucket of an object store (S3 or S3-compatible, Google Cloud
    /// Storage, Azure Blob Storage), so that backups outlive the machine or
    /// the Kubernetes cluster they protect. Not with `path` or
    /// `persistentVolumeClaim`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_store: Option<ObjectStoreSpec>,
}

/// A place in an object store. Credentials never go in the spec: the
/// backup machinery takes them from its environment, as each cloud's own
/// tools do (S3: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`, or a web identity (IRSA) or instance role; GCS:
/// `GOOGLE_SERVICE_ACCOUNT` (a key file's path) or the machine's account;
/// Azure: `AZURE_STORAGE_ACCOUNT_NAME` with `AZURE_STORAGE_ACCOUNT_KEY`,
/// or a workload or managed identity). On Kubernetes that environment is
/// a Secret's (`credentialsSecret`) or a workload identity's
/// (`serviceAccountName`).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectStoreSpec {
    /// The bucket and an optional prefix: `s3://BUCKET/PREFIX`,
    /// `gs://BUCKET/PREFIX` or `az://CONTAINER/PREFIX` (Azure: the account
    /// comes from the environment). Each cluster's backups go under
    /// `PREFIX/CLUSTER/`, so clusters may share a bucket.
    pub url: String,
    /// The store's address, for an S3-compatible store (MinIO, Ceph, a
    /// test server) or an emulator of GCS or Azure: `https://HOST[:PORT]`
    /// (`http://` is allowed, for a store on the same machine). Default:
    /// the cloud's own endpoint. With an endpoint, S3 requests use path
    /// style (`ENDPOINT/BUCKET/KEY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The bucket's region (S3), such as `eu-west-1`; default: the
    /// environment's `AWS_REGION`, else `us-east-1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Kubernetes only: a Secret in the cluster's namespace whose keys
    /// become the environment of the backup Jobs and the continuous-backup
    /// follower, named as each cloud's tools read them
    /// (`AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`;
    /// `GOOGLE_SERVICE_ACCOUNT_KEY`; `AZURE_STORAGE_ACCOUNT_NAME` and
    /// `AZURE_STORAGE_ACCOUNT_KEY`). Without it the Jobs use the cloud's
    /// credential chain. The local platform reads the operator's own
    /// environment instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret: Option<String>,
    /// Kubernetes only: the service account the backup Jobs and the
    /// continuous-backup follower run as, for the cloud's workload
    /// identity, so that no key is stored at all: EKS (IRSA, or Pod
    /// Identity), GKE Workload Identity, Azure Workload Identity. The
    /// account's annotations name the cloud identity; the cloud's webhook
    /// or metadata server gives the pods its credentials. (Azure still
    /// needs `AZURE_STORAGE_ACCOUNT_NAME`: a `credentialsSecret` with that
    /// key alone.) The pods get no Kubernetes API token. Default: the
    /// namespace's `default` account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}
