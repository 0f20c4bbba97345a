//! `spec.pod` and `spec.image`: where member pods run and with what, on
//! Kubernetes (the local platform refuses them by name).
//!
//! Scheduling fields are Kubernetes' own types (k8s-openapi, whose
//! `schemars` feature gives their schema), so `affinity` or a toleration
//! reads exactly as in a Deployment; the fields whose values the operator
//! restricts (resources, pod security) are small types of their own, so
//! what etcd's pod cannot take (`claims`, `runAsNonRoot: false`, a
//! container) is refused by name. The embedded Kubernetes types carry no
//! nested descriptions in the CRD (see [`kubernetes_type`]): their
//! reference is Kubernetes'.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, LocalObjectReference, SELinuxOptions, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The etcd image members run.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageSpec {
    /// The image repository, without a tag (`spec.version` picks it: the
    /// image is `REPOSITORY:vVERSION`), such as
    /// `registry.example.com/mirror/etcd` for a mirror or an air-gapped
    /// cluster; default: the operator's `--etcd-image`
    /// (`quay.io/coreos/etcd`). Restore and image-check Jobs use it too.
    /// Changing it restarts the members one at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
}

/// Member pods: resources, placement, priority, metadata and the pod
/// security settings that may differ. Every field is optional; unset
/// fields keep the operator's defaults. Changing any of it restarts the
/// members one at a time, as an upgrade does (pod Ready and the
/// PodDisruptionBudget respected, the leader last, after handing its
/// leadership over).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemberPodSpec {
    /// CPU and memory of the etcd container; replaces the default as a
    /// whole (requests cpu 100m, memory 128Mi, no limits). A memory limit
    /// near etcd's working set gets it OOM-killed on a spike (a snapshot
    /// sent to a follower, a large range read, a defragmentation): leave
    /// ample room above what it uses, or set none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<PodResources>,
    /// Node labels a member's node must have (the pod's `nodeSelector`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Taints member pods tolerate (dedicated nodes), as in a pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = kubernetes_type)]
    pub tolerations: Option<Vec<Toleration>>,
    /// The pod's affinity, as in a pod; replaces the default (members
    /// prefer nodes without another member of the cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = kubernetes_type)]
    pub affinity: Option<Affinity>,
    /// How members spread over the topology, as in a pod; replaces the
    /// default: spread across zones (`topology.kubernetes.io/zone`), then
    /// nodes (`kubernetes.io/hostname`), as preferences (`ScheduleAnyway`)
    /// with a skew of 1. An
    /// empty list drops the default. A constraint without a
    /// `labelSelector` selects the cluster's members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = kubernetes_type)]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    /// A PriorityClass for member pods (such as one above your
    /// applications', so etcd is not preempted for them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Extra labels on member pods. The operator's own (`etcdoperator.dev/*`,
    /// `app.kubernetes.io/name`, `app.kubernetes.io/managed-by`) cannot be
    /// set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Extra annotations on member pods; `etcdoperator.dev/*` are the
    /// operator's own and cannot be set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Secrets of the cluster's namespace to pull the etcd image with (a
    /// private mirror), as in a pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = kubernetes_type)]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
    /// Pod security settings that may differ from the operator's (etcd runs
    /// as user and group 65532, not root, the volume given to group 65532).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<PodSecurity>,
}

// None of the Kubernetes types above holds a float (checked against
// k8s-openapi's definitions: strings, integers, booleans, lists and maps),
// so their `PartialEq` is an equivalence: a member's recorded pod settings
// compare as `Eq` with the spec's.
impl Eq for MemberPodSpec {}

/// The etcd container's resources.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodResources {
    /// What the scheduler reserves: `cpu`, `memory`, `ephemeral-storage`,
    /// `hugepages-<size>`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
    /// The most it may use (same names; each at least its request). See
    /// `spec.pod.resources` on memory limits.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, Quantity>,
}

/// Pod security settings of member pods that may differ; the rest stays
/// as the operator sets it (not root, no privilege escalation, no
/// capabilities, a read-only root filesystem, the runtime's default
/// seccomp profile).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodSecurity {
    /// The group that owns the data volume (default 65532), for storage
    /// that needs a particular one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_group: Option<i64>,
    /// `OnRootMismatch` (default) or `Always`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_group_change_policy: Option<String>,
    /// The user etcd runs as (default 65532; never 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<i64>,
    /// The group etcd runs as (default 65532).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_group: Option<i64>,
    /// More groups for etcd's process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supplemental_groups: Option<Vec<i64>>,
    /// The SELinux context of the pod, as in a pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = kubernetes_type)]
    pub se_linux_options: Option<SELinuxOptions>,
}

// As for [`MemberPodSpec`]: no float inside (a quantity is a string).
impl Eq for PodSecurity {}
impl Eq for PodResources {}

/// The fields of the spec whose schema is a Kubernetes type: the
/// reference lists them, not their insides.
pub const KUBERNETES_TYPES: [&str; 5] = [
    "spec.pod.tolerations",
    "spec.pod.affinity",
    "spec.pod.topologySpreadConstraints",
    "spec.pod.imagePullSecrets",
    "spec.pod.securityContext.seLinuxOptions",
];

/// The schema of an embedded Kubernetes type, without the descriptions
/// below its top (Kubernetes' API reference has them; the CRD stays
/// small enough for a client-side `kubectl apply`).
pub fn kubernetes_type(schema: &mut schemars::Schema) {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.remove("description");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    if let Some(map) = schema.as_object_mut() {
        for (key, v) in map.iter_mut() {
            if key != "description" {
                strip(v);
            }
        }
    }
}
