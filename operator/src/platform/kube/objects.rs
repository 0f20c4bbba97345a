//! The objects of a cluster other than its pods: names, labels, the data
//! volume claims, the Services, the PodDisruptionBudget and the record's
//! ConfigMap. Pure builders; the API calls are in [`super::KubePlatform`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, PersistentVolumeClaimSpec, Service, ServicePort, ServiceSpec,
    VolumeResourceRequirements,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::config::{ANNOTATION_CONFIG, to_json};
use crate::crd::{
    LABEL_CLUSTER, LABEL_MANAGED_BY, LABEL_MEMBER, LABEL_NAME, LABEL_NAME_VALUE, MANAGED_BY,
};
use crate::member::{CLIENT_PORT, MemberConfig, PEER_PORT};

/// Label on a retired member's claim: the tag of the rebuild that retired it.
pub const LABEL_RETIRED: &str = "etcdoperator.dev/retired";
/// Label on a retired member's claim: the cluster it belonged to (its
/// [`LABEL_CLUSTER`] is dropped so it is no member any more).
pub const LABEL_RETIRED_FROM: &str = "etcdoperator.dev/retired-from";
/// Size requested for each member's data volume without
/// `spec.storage.size`, sized for etcd's defaults so that a full
/// database raises etcd's NOSPACE alarm (writes refused, recoverable by
/// compaction and defragmentation) before the volume fills up (etcd cannot
/// write its WAL and stops, on every member at about the same time): the
/// database up to [`ETCD_DEFAULT_QUOTA`], a second copy of it while a
/// snapshot from the leader is received (`member/snap/*.snap.db`), and the
/// WAL (5 files of 64 MiB kept, one more preallocated): the rule
/// [`crate::validate::storage::min_volume`] holds a spec's size to.
/// Volumes of kind's local-path class are not limited; most others are.
pub const DATA_CLAIM_SIZE: &str = "5Gi";
/// etcd's default `--quota-backend-bytes` (3.4 and 3.5).
pub const ETCD_DEFAULT_QUOTA: u64 = 2 << 30;
/// Storage class of the data volumes without `spec.storage.storageClassName`:
/// `None`, the cluster's default class (kind: `standard`, local-path).
pub const DATA_CLAIM_CLASS: Option<&str> = None;

/// What a new member's data claim asks for (`spec.storage.size` and
/// `storageClassName`; each `None`: [`DATA_CLAIM_SIZE`], [`DATA_CLAIM_CLASS`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimWanted {
    /// The size, as the spec writes it.
    pub size: Option<String>,
    /// The storage class.
    pub class: Option<String>,
}
/// Key of the record in the record's ConfigMap.
pub const RECORD_KEY: &str = "record.json";

/// Name of a member's data volume claim.
pub fn claim_name(member: &str) -> String {
    format!("{member}-data")
}

/// Name of the headless Service giving members their DNS names; also the
/// pods' `subdomain`.
pub fn peer_service_name(cluster: &str) -> String {
    cluster.to_string()
}

/// Name of the Service clients connect to (ready members only).
pub fn client_service_name(cluster: &str) -> String {
    format!("{cluster}-client")
}

/// Name of the ConfigMap holding the operator's record of the cluster.
pub fn record_name(cluster: &str) -> String {
    format!("{cluster}-etcd-operator")
}

/// Name of the cluster's PodDisruptionBudget.
pub fn pdb_name(cluster: &str) -> String {
    cluster.to_string()
}

/// A member's DNS name (through the headless Service).
pub fn member_host(member: &str, cluster: &str, namespace: &str) -> String {
    format!("{member}.{}.{namespace}.svc", peer_service_name(cluster))
}

/// Labels that select a cluster's member pods.
pub fn selector_labels(cluster: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_CLUSTER.to_string(), cluster.to_string()),
        (LABEL_NAME.to_string(), LABEL_NAME_VALUE.to_string()),
    ])
}

/// Labels on every object of a cluster.
pub fn cluster_labels(cluster: &str) -> BTreeMap<String, String> {
    let mut labels = selector_labels(cluster);
    labels.insert(LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string());
    labels
}

/// Labels on a member's pod and claim.
pub fn member_labels(cluster: &str, member: &str) -> BTreeMap<String, String> {
    let mut labels = cluster_labels(cluster);
    labels.insert(LABEL_MEMBER.to_string(), member.to_string());
    labels
}

/// The label selector (`key=value,...`) of a cluster's objects.
pub fn cluster_selector(cluster: &str) -> String {
    format!("{LABEL_CLUSTER}={cluster},{LABEL_MANAGED_BY}={MANAGED_BY}")
}

/// Metadata of an owned object.
pub(super) fn meta(
    name: String,
    labels: BTreeMap<String, String>,
    owner: &OwnerReference,
) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        labels: Some(labels),
        owner_references: Some(vec![owner.clone()]),
        ..ObjectMeta::default()
    }
}

/// A member's data volume claim, its config recorded on it, of the size
/// and class `wanted` says.
pub fn data_claim(
    cluster: &str,
    config: &MemberConfig,
    wanted: &ClaimWanted,
    owner: &OwnerReference,
) -> PersistentVolumeClaim {
    let size = wanted.size.as_deref().unwrap_or(DATA_CLAIM_SIZE);
    let class = wanted.class.as_deref().or(DATA_CLAIM_CLASS);
    let member = &config.addr.name;
    let mut metadata = meta(claim_name(member), member_labels(cluster, member), owner);
    metadata.annotations = Some(BTreeMap::from([(
        ANNOTATION_CONFIG.to_string(),
        to_json(config),
    )]));
    PersistentVolumeClaim {
        metadata,
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_string(),
                    Quantity(size.into()),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            storage_class_name: class.map(str::to_string),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

fn port(name: &str, port: u16) -> ServicePort {
    ServicePort {
        name: Some(name.into()),
        port: i32::from(port),
        target_port: Some(IntOrString::String(name.into())),
        protocol: Some("TCP".into()),
        ..ServicePort::default()
    }
}

/// The headless Service: DNS names for every member, ready or not (a
/// member must resolve its peers' names before the cluster has formed).
pub fn peer_service(cluster: &str, owner: &OwnerReference) -> Service {
    Service {
        metadata: meta(peer_service_name(cluster), cluster_labels(cluster), owner),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            publish_not_ready_addresses: Some(true),
            selector: Some(selector_labels(cluster)),
            ports: Some(vec![port("client", CLIENT_PORT), port("peer", PEER_PORT)]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The client Service: one address for the ready members.
pub fn client_service(cluster: &str, owner: &OwnerReference) -> Service {
    Service {
        metadata: meta(client_service_name(cluster), cluster_labels(cluster), owner),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(selector_labels(cluster)),
            ports: Some(vec![port("client", CLIENT_PORT)]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// Members that must stay available during voluntary disruptions (node
/// drains): all but one from 3 members up, so a drain evicts one member at
/// a time and never takes quorum; all of them for 1 or 2 members, where any
/// eviction loses quorum (a drain then waits until the cluster is scaled
/// up or the budget is deleted by hand).
///
/// `minAvailable`, not `maxUnavailable: 1`: Kubernetes computes
/// `maxUnavailable` from the owner's scale subresource, which EtcdCluster
/// does not have, and would then allow no eviction at all.
pub fn pdb_min_available(size: usize) -> i32 {
    let size = i32::try_from(size).unwrap_or(i32::MAX);
    if size >= 3 { size - 1 } else { size }
}

/// The cluster's PodDisruptionBudget (coreos/etcd-operator#1116).
pub fn disruption_budget(
    cluster: &str,
    size: usize,
    owner: &OwnerReference,
) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: meta(pdb_name(cluster), cluster_labels(cluster), owner),
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(pdb_min_available(size))),
            selector: Some(LabelSelector {
                match_labels: Some(selector_labels(cluster)),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    }
}

/// The ConfigMap holding the operator's record of the cluster (JSON).
pub fn record_config_map(cluster: &str, json: String, owner: &OwnerReference) -> ConfigMap {
    ConfigMap {
        metadata: meta(record_name(cluster), cluster_labels(cluster), owner),
        data: Some(BTreeMap::from([(RECORD_KEY.to_string(), json)])),
        ..ConfigMap::default()
    }
}

/// A label value made of `tag`: at most 63 of its letters, digits, `-`,
/// `_` and `.`, starting and ending with a letter or digit.
pub fn label_value(tag: &str) -> String {
    let kept: String = tag
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    kept.trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_never_allows_losing_quorum() {
        for (size, min) in [(1, 1), (2, 2), (3, 2), (4, 3), (5, 4), (9, 8)] {
            assert_eq!(pdb_min_available(size), min, "size {size}");
            let quorum = size / 2 + 1;
            assert!(
                usize::try_from(min).expect("positive") >= quorum,
                "size {size}"
            );
        }
    }

    #[test]
    fn a_data_volume_holds_what_etcd_writes_at_its_default_quota() {
        let bytes = crate::kube_names::size_bytes(DATA_CLAIM_SIZE).expect("a size");
        let need = crate::validate::storage::min_volume(ETCD_DEFAULT_QUOTA);
        assert!(bytes >= need, "{DATA_CLAIM_SIZE}");
        assert!(need >= 2 * ETCD_DEFAULT_QUOTA + 6 * (64 << 20));
    }

    #[test]
    fn label_values_are_valid() {
        assert_eq!(label_value("2026-01-01T000000Z"), "2026-01-01T000000Z");
        assert_eq!(label_value("2026-01-01T00:00:00Z"), "2026-01-01T00-00-00Z");
        assert_eq!(label_value("-x/"), "x");
        assert_eq!(label_value(&"a".repeat(70)).len(), 63);
    }

    #[test]
    fn names() {
        assert_eq!(claim_name("demo-0"), "demo-0-data");
        assert_eq!(client_service_name("demo"), "demo-client");
        assert_eq!(record_name("demo"), "demo-etcd-operator");
        assert_eq!(member_host("demo-0", "demo", "ns"), "demo-0.demo.ns.svc");
        assert_eq!(
            cluster_selector("demo"),
            "etcdoperator.dev/cluster=demo,app.kubernetes.io/managed-by=etcd-operator"
        );
    }
}
