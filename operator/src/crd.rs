//! The `EtcdCluster` v1alpha1 resource: the one schema both platforms read.
//!
//! On Kubernetes it is a custom resource (`etcd-operator crd` prints its
//! definition); on the local platform the same YAML lives in a manifests
//! folder. Every field's doc comment becomes its description in the schema.
//! Checks that serde cannot express live in [`crate::validate`].

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of the resource.
pub const GROUP: &str = "etcdoperator.dev";
/// API version of the resource.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` as written in manifests.
pub const API_VERSION: &str = "etcdoperator.dev/v1alpha1";
/// `kind` as written in manifests.
pub const KIND: &str = "EtcdCluster";

/// Label on every object the operator owns: the cluster's name.
pub const LABEL_CLUSTER: &str = "etcdoperator.dev/cluster";
/// Label on a member's pod and volume: the member's name.
pub const LABEL_MEMBER: &str = "etcdoperator.dev/member";
/// Standard labels set alongside.
pub const LABEL_NAME: &str = "app.kubernetes.io/name";
/// Value of [`LABEL_NAME`].
pub const LABEL_NAME_VALUE: &str = "etcd";
/// Standard "managed by" label.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Value of [`LABEL_MANAGED_BY`].
pub const MANAGED_BY: &str = "etcd-operator";

/// The label selector of member pods only (never a backup Job's pod, the
/// continuous-backup follower's or any other the operator runs: those
/// carry no [`LABEL_MEMBER`]), for the clusters `cluster` selects (a
/// requirement such as `etcdoperator.dev/cluster` or
/// `etcdoperator.dev/cluster in (a,b)`). The chaos monkey and the soak aim
/// at members through it.
pub fn member_pod_selector(cluster: &str) -> String {
    format!("{LABEL_MANAGED_BY}={MANAGED_BY},{cluster},{LABEL_MEMBER}")
}

/// The label selector of one member's pod and volume claim: its cluster
/// and its name, so a same-named member of another cluster in the
/// namespace never matches.
pub fn member_selector(cluster: &str, member: &str) -> String {
    format!("{LABEL_CLUSTER}={cluster},{LABEL_MEMBER}={member}")
}

/// Desired state of an etcd cluster.
// clippy reads the repeated `type_ = ...` of the printcolumns as duplicated
// attributes; they are arguments of separate columns.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "etcdoperator.dev",
    version = "v1alpha1",
    kind = "EtcdCluster",
    namespaced,
    status = "EtcdClusterStatus",
    shortname = "etcd",
    doc = "An etcd cluster kept in the declared state by etcd-operator",
    printcolumn(name = "Size", type_ = "integer", json_path = ".spec.size"),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".status.currentVersion"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyMembers"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    validation = admission::resource_rule()
)]
// What the API server refuses (bounds, patterns, CEL rules) is written in
// from the operator's own validation: `admission`.
#[schemars(transform = admission::transform_spec)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EtcdClusterSpec {
    /// Number of voting members, 1 to 9. A cluster of size N keeps working
    /// while (N-1)/2 members are down, so odd sizes (3, 5) are the useful ones.
    pub size: i64,
    /// etcd version to run, such as "3.4.23" or "3.5.1" (one leading "v", as
    /// in "v3.5.1", is allowed and dropped; spaces are refused). Locally it
    /// picks the etcd binary; on Kubernetes the image tag.
    pub version: String,
    /// When true the operator only observes and reports: it starts, stops,
    /// adds and removes nothing until this is false again.
    #[serde(default)]
    pub paused: bool,
    /// What happens to a member's data when its process or pod stops.
    #[serde(default)]
    pub storage: StorageSpec,
    /// Scheduled backups: how often, how many to keep, and where they go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupSpec>,
    /// Create this cluster from a backup instead of empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<RestoreSpec>,
    /// What to do when a majority of members is lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoverySpec>,
    /// Raft election timing of every member (etcd's defaults when unset).
    /// A change is applied by a rolling restart, one member at a time,
    /// the leader last and after handing its leadership over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuning: Option<TuningSpec>,
    /// TLS between members (`peer`) and for clients (`client`). Either can
    /// be turned on or off on a running cluster: members move over one at a
    /// time, without losing a write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
    /// etcd's backend quota in bytes (`--quota-backend-bytes`), 1 MiB to
    /// 8 GiB; etcd's default (2 GiB) when unset. When the database reaches
    /// it etcd raises its NOSPACE alarm and refuses writes; the operator
    /// then compacts, defragments member by member and disarms the alarm.
    /// Changing it restarts the members one at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_backend_bytes: Option<i64>,
    /// etcd's auto-compaction (`--auto-compaction-mode`,
    /// `--auto-compaction-retention`); none when unset. Changing it
    /// restarts the members one at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<CompactionSpec>,
    /// Scheduled defragmentation, one member at a time (followers first,
    /// the leader last), carried out by the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defrag: Option<DefragSpec>,
    /// A standby of another cluster, kept up from its backups until
    /// promoted (local platform for now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby: Option<StandbySpec>,
    /// The etcd image (Kubernetes): its repository, for a mirror.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSpec>,
    /// Member pods (Kubernetes): resources, nodes and zones, priority,
    /// labels and annotations, image pull secrets, pod security.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Box<MemberPodSpec>>,
}

impl EtcdClusterSpec {
    /// A spec with `size` members of `version` and nothing else set: every
    /// optional field left to its default.
    pub fn minimal(size: i64, version: &str) -> Self {
        EtcdClusterSpec {
            size,
            version: version.into(),
            paused: false,
            storage: StorageSpec::default(),
            backup: None,
            restore: None,
            recovery: None,
            tls: None,
            tuning: None,
            quota_backend_bytes: None,
            compaction: None,
            defrag: None,
            standby: None,
            image: None,
            pod: None,
        }
    }
}

/// Auto-compaction: how much history etcd keeps.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactionSpec {
    /// `Periodic`: keep the history of the last `retention` (a Go
    /// duration such as "1h"). `Revision`: keep the last `retention`
    /// revisions (a number from 1 to 1000000000 such as "10000").
    pub mode: CompactionMode,
    /// A duration (Periodic) or a number of revisions (Revision).
    pub retention: String,
}

/// How etcd's auto-compaction counts its retention.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum CompactionMode {
    /// By time.
    Periodic,
    /// By revisions.
    Revision,
}

/// When the operator defragments members (one at a time, never while
/// quorum is at risk). Either or both of the fields.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefragSpec {
    /// Defragment every member once per interval (a Go duration from "1m"
    /// to "8784h", such as "24h"), counted from the operator's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// Defragment a member as soon as this percentage (1 to 99) of its
    /// database file is free space that a defragmentation gives back (and
    /// that is at least 1 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fragmentation_percent: Option<i64>,
}

/// TLS of a cluster.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsSpec {
    /// TLS between members (`https://` peer URLs; each member presents its
    /// certificate to the others and accepts only peers whose certificate
    /// its CA signed). Off when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<TlsEndpoint>,
    /// TLS for clients (`https://` client URLs), mutual: a client without a
    /// certificate signed by the cluster's CA is refused. Off when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<TlsEndpoint>,
    /// How long certificates the operator issues are valid, as a Go
    /// duration ("2160h", "2m"; at least 1m; default 2160h, 90 days). They
    /// are renewed when two thirds of it have passed, without a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_validity: Option<String>,
    /// How long the CA the operator creates for the cluster is valid (at
    /// least 1m; default 43800h, 5 years). At two thirds of it a new CA is
    /// brought in: trusted beside the old one first, then issuing, then the
    /// old one is dropped, one member at a time (each step restarts
    /// members, since etcd reads trusted CAs only when it starts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_validity: Option<String>,
}

/// Where the certificates of one side (peer or client) come from.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsEndpoint {
    /// `Auto`: the operator creates a CA for the cluster and issues every
    /// certificate itself. `Provided`: you provide a CA bundle and one
    /// certificate with its key, used by every member (its names must cover
    /// every member; for clients it must also allow client authentication,
    /// since the operator uses it as its own client certificate).
    pub mode: TlsMode,
    /// `Provided`, local platform: a folder holding `ca.crt`, `tls.crt` and
    /// `tls.key` (relative paths are taken from the state folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `Provided`, Kubernetes: a `kubernetes.io/tls` Secret in the
    /// cluster's namespace with `ca.crt`, `tls.crt` and `tls.key` (as
    /// cert-manager writes them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
}

/// Who issues a cluster's certificates.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum TlsMode {
    /// The operator, from a CA it creates for the cluster.
    #[default]
    Auto,
    /// You, through a folder (local) or a Secret (Kubernetes).
    Provided,
}

/// etcd's raft timing (`--heartbeat-interval`, `--election-timeout`).
///
/// A dead leader is noticed after about one election timeout, so a shorter
/// one heals a killed leader sooner; too short for the network or the
/// machine's load and members call elections that nothing caused. Guidance:
/// loopback or one host `25ms`/`250ms`; a LAN or one zone etcd's defaults
/// (`100ms`/`1s`); across zones the heartbeat near the round trip between
/// members (say `200ms`) and the election 10 times that (`2s`).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TuningSpec {
    /// How often the leader tells followers it is alive, as a duration in
    /// whole milliseconds ("100ms", the default). From 1ms to 10s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_interval: Option<String>,
    /// How long a follower waits without hearing from the leader before it
    /// calls an election, in whole milliseconds ("1s", the default). At
    /// least 5 times the heartbeat interval (etcd refuses less), at most
    /// 50s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub election_timeout: Option<String>,
}

/// Storage policy of the members.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StorageSpec {
    /// `Persistent` (default): a member's data is kept when it stops, and a
    /// dead member is restarted in place with the same member id.
    /// `Ephemeral`: a member's data goes with its process (like an emptyDir),
    /// so a dead member is always replaced by a new one.
    #[serde(default)]
    pub policy: StoragePolicy,
    /// Size of each member's data volume claim (Kubernetes, `Persistent`),
    /// such as "20Gi"; default 5Gi, which holds etcd's default quota.
    /// Growing it expands the claims in place, one member at a time, where
    /// the storage class allows it (`allowVolumeExpansion`); a claim never
    /// shrinks, so a smaller size is refused. It must hold twice
    /// `spec.quotaBackendBytes` (a follower receiving a snapshot keeps two
    /// databases for a while) and etcd's log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// Storage class of the members' data volume claims (Kubernetes);
    /// default: the cluster's default class. A claim's class never
    /// changes, so when it changes members move to it one at a time: a new
    /// member on the new class is added and promoted, then a member on the
    /// old one is removed (the cluster never has fewer voters than its
    /// size; `status.members[].storageClassName` shows the way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

/// Whether member data outlives the member's process.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum StoragePolicy {
    /// Data is kept across restarts.
    #[default]
    Persistent,
    /// Data is lost when the member stops.
    Ephemeral,
}

/// Source of the data of a new cluster.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RestoreSpec {
    /// Name of a backup (as listed by `etcd-operator backups CLUSTER`) or
    /// the path of a snapshot file.
    pub backup: String,
    /// The cluster whose backup it is; default: the cluster the backup's
    /// name says (`example` of `example-20261205-012308-950`). Only that
    /// cluster's backups are looked at. Not with a snapshot file's path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Where that cluster's backups are, as its `spec.backup.location`
    /// says; default: its default place (local: `STATE/backups/CLUSTER`;
    /// Kubernetes: the claim `CLUSTER-backups`). Never created. Not with a
    /// snapshot file's path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<RestoreLocation>,
    /// Point-in-time restore: replay the backup's chain of delta segments
    /// (continuous backups) up to exactly this revision. Refused when the
    /// backup and its chain do not hold it (`etcd-operator backups CLUSTER`
    /// shows each chain's window). Not with `toTime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_revision: Option<i64>,
    /// Point-in-time restore: replay the chain up to the last revision known
    /// to be committed at or before this instant (RFC 3339, such as
    /// "2026-12-04T10:41:59Z"). Never a later revision; at most one
    /// segment interval of revisions before it may be left out. Not with
    /// `toRevision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_time: Option<String>,
}

/// Where the backups a cluster restores from are kept.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RestoreLocation {
    /// A folder (local platform; relative paths are taken from the state
    /// folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A volume claim of the cluster's namespace (Kubernetes), read only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<String>,
    /// An object store, as `spec.backup.location.objectStore` says; the
    /// backups of `spec.restore.cluster` are under `PREFIX/CLUSTER/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_store: Option<ObjectStoreSpec>,
}

/// Quorum-loss policy.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecoverySpec {
    /// When a majority of members is lost for good (their data is gone),
    /// rebuild the cluster from the newest verified backup. Writes after that
    /// backup are lost, and status says how many revisions. Off by default:
    /// the cluster is reported Degraded and left alone.
    #[serde(default)]
    pub restore_from_backup: bool,
    /// When a majority of members is lost for good but at least one member
    /// still runs with its data, rebuild the cluster from the most advanced
    /// of them: it is restarted alone with `--force-new-cluster` (keeping
    /// every write it holds), then new members join it one at a time.
    /// Needs `storage.policy: Persistent`. Default: on when
    /// `restoreFromBackup` is on (a survivor that holds more than the
    /// newest backup is preferred to it), else off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_survivor: Option<bool>,
}

pub mod admission;
mod backup_spec;
mod pod_spec;
pub use pod_spec::{
    ImageSpec, KUBERNETES_TYPES, MemberPodSpec, PodResources, PodSecurity, kubernetes_type,
};
mod standby_spec;
pub use standby_spec::{OnGap, StandbySpec, StandbyStream};
mod bounds;
pub mod reference;
pub use backup_spec::*;
pub use bounds::{field_bounds, spec_field_bounds};
mod standby_status;
mod status;
pub use standby_status::*;
pub use status::*;
