//! The platform's short-lived Jobs and the backup claim. Two kinds:
//!
//! * a backup Job: the operator's own image runs `etcd-operator
//!   backup-job` with the backup claim mounted at `/state`, where it is the
//!   folder store's state folder ([`crate::backup::job`]);
//! * a restore Job: the member's own etcd image restores a snapshot set
//!   aside in the backup claim into the member's data claim (`etcdutl
//!   snapshot restore` from 3.5, `etcdctl` for 3.4, which check the
//!   snapshot's SHA-256 trailer again), before the member's pod exists.
//!
//! Builders are pure; [`Jobs::run`] creates a Job, waits for its end
//! (bounded), reads its pod's log and deletes it.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, Container, EmptyDirVolumeSource, EnvFromSource, EnvVar, HostAlias,
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource,
    PodAffinity, PodAffinityTerm, PodSpec, PodTemplateSpec, SecretEnvSource, SecretVolumeSource,
    SecurityContext, Volume, VolumeMount, VolumeResourceRequirements, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use rand::Rng;

use super::objects::{cluster_labels, meta};
use super::pod::{DATA_DIR, DATA_MOUNT, image, pod_security};
use super::tls::client_secret_name;
use crate::backup::Location;
use crate::backup::job::{Op, Place, STATE_MOUNT, TLS_MOUNT};
use crate::crd::{LABEL_CLUSTER, LABEL_MANAGED_BY, LABEL_NAME, MANAGED_BY};
use crate::member::MemberConfig;

mod runner;
pub use self::runner::{Jobs, Outcome};

/// Label on the platform's Jobs: `backup` or `restore`.
pub const LABEL_JOB: &str = "etcdoperator.dev/job";
/// The value of [`LABEL_JOB`] on the continuous-backup follower and its
/// pod ([`super::follow`]).
pub const FOLLOW_KIND: &str = "follow";
/// Label on a backup claim the operator created: the cluster it was
/// created for (it has no ownerReference: backups outlive the cluster).
pub const LABEL_BACKUPS_OF: &str = "etcdoperator.dev/backups-of";
/// The container of a backup Job.
pub const BACKUP_CONTAINER: &str = "backup";
/// The container of a restore Job.
pub const RESTORE_CONTAINER: &str = "restore";
/// Where a restore Job mounts the backup claim (read only).
pub const BACKUPS_MOUNT: &str = "/backups";
/// Size of a backup claim the spec gives none for.
pub const DEFAULT_BACKUP_CLAIM_SIZE: &str = "10Gi";
/// How long a Job may run before Kubernetes stops it (its pod is killed).
pub const JOB_DEADLINE: Duration = Duration::from_secs(1800);
/// How long a finished Job is kept if the operator could not delete it.
const JOB_TTL_SECS: i32 = 3600;
/// Label Kubernetes puts on a Job's pods.
const JOB_NAME_LABEL: &str = "job-name";

/// The default backup claim of `cluster`.
pub fn default_backup_claim(cluster: &str) -> String {
    format!("{cluster}-backups")
}

/// A Job's name: `CLUSTER-WORD-xxxxx` (five random letters and digits),
/// within the 63 characters of a label (cluster names have at most 40).
pub fn job_name(cluster: &str, word: &str) -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| char::from(CHARS[rng.random_range(0..CHARS.len())]))
        .collect();
    let word: String = word.chars().take(12).collect();
    format!("{cluster}-{word}-{suffix}")
}

/// The backup claim the operator creates when it does not exist: no
/// ownerReference (backups outlive the cluster), labelled with the cluster
/// it was made for.
pub fn backup_claim(
    cluster: &str,
    name: &str,
    size: Option<&str>,
    class: Option<&str>,
) -> PersistentVolumeClaim {
    let mut labels = cluster_labels(cluster);
    labels.remove(LABEL_CLUSTER);
    labels.insert(LABEL_BACKUPS_OF.into(), cluster.into());
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_string(),
                    Quantity(size.unwrap_or(DEFAULT_BACKUP_CLAIM_SIZE).into()),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            storage_class_name: class.map(str::to_string),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

fn claim_volume(name: &str, claim: &str, read_only: bool) -> Volume {
    Volume {
        name: name.into(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim.into(),
            read_only: read_only.then_some(true),
        }),
        ..Volume::default()
    }
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

fn restricted() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Capabilities::default()
        }),
        ..SecurityContext::default()
    }
}

/// Labels of a cluster's Job and its pod: the cluster's and managed-by
/// labels (so [`jobs_selector`] finds them) but not the member selector's
/// `app.kubernetes.io/name: etcd`, so the client Service never routes to a
/// backup or restore pod and the PodDisruptionBudget never counts one.
pub fn job_labels(cluster: &str, kind: &str) -> BTreeMap<String, String> {
    let mut labels = cluster_labels(cluster);
    labels.remove(LABEL_NAME);
    labels.insert(LABEL_JOB.into(), kind.into());
    labels
}

/// Where a Job that mounts the backup claim prefers to run: on the node of
/// the cluster's follower (continuous backups), which holds that claim for
/// as long as it runs; a ReadWriteOnce volume attaches to one node at a
/// time. Preferred, not required: without a follower it means nothing, and
/// a Job is never left unschedulable for it.
fn beside_follower(cluster: &str) -> Affinity {
    let selector = BTreeMap::from([
        (LABEL_CLUSTER.to_string(), cluster.to_string()),
        (LABEL_JOB.to_string(), FOLLOW_KIND.to_string()),
    ]);
    Affinity {
        pod_affinity: Some(PodAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(selector),
                            ..LabelSelector::default()
                        }),
                        topology_key: "kubernetes.io/hostname".into(),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            ..PodAffinity::default()
        }),
        ..Affinity::default()
    }
}

/// A Job of `cluster` named `name` running `container` with `volumes`.
pub(super) fn job(
    name: &str,
    cluster: &str,
    kind: &str,
    container: Container,
    mut volumes: Vec<Volume>,
    owner: &OwnerReference,
) -> Job {
    let labels = job_labels(cluster, kind);
    volumes.push(Volume {
        name: "tmp".into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    });
    let mut container = container;
    container
        .volume_mounts
        .get_or_insert_with(Vec::new)
        .push(mount("tmp", "/tmp", false));
    container.security_context = Some(restricted());
    Job {
        metadata: meta(name.into(), labels.clone(), owner),
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            active_deadline_seconds: i64::try_from(JOB_DEADLINE.as_secs()).ok(),
            ttl_seconds_after_finished: Some(JOB_TTL_SECS),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    containers: vec![container],
                    volumes: Some(volumes),
                    automount_service_account_token: Some(false),
                    enable_service_links: Some(false),
                    security_context: Some(pod_security()),
                    affinity: Some(beside_follower(cluster)),
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}

/// A backup Job: `image` (the operator's) runs `etcd-operator backup-job
/// --cluster CLUSTER --uid UID [--object-store URL ...] OP...` with `claim`
/// at `/state` (UID: the owner's, the resource's: the identity its backups
/// carry). With an object store the claim is the Job's working space, and
/// the store's credentials Secret, when named, is its environment, and its
/// service account, when named, the pod's (a workload identity).
pub fn backup_job(
    name: &str,
    location: &Location,
    claim: &str,
    image: &str,
    op: &Op,
    owner: &OwnerReference,
) -> Job {
    let cluster = location.cluster.as_str();
    let mut place = Place::of(location);
    place.uid = Some(owner.uid.clone());
    let mut args = vec!["backup-job".to_string()];
    args.extend(place.args());
    args.extend(op.args());
    let env_from = location
        .object
        .as_ref()
        .and_then(|o| o.secret.clone())
        .map(|name| {
            vec![EnvFromSource {
                secret_ref: Some(SecretEnvSource {
                    name,
                    optional: None,
                }),
                ..EnvFromSource::default()
            }]
        });
    let mut container = Container {
        name: BACKUP_CONTAINER.into(),
        image: Some(image.into()),
        args: Some(args),
        env_from,
        volume_mounts: Some(vec![mount("backups", STATE_MOUNT, false)]),
        ..Container::default()
    };
    let mut volumes = vec![claim_volume("backups", claim, false)];
    if op.tls().is_some() {
        add_client_tls(cluster, &mut container, &mut volumes);
    }
    let mut job = job(name, cluster, "backup", container, volumes, owner);
    // A workload identity: the cloud's webhook or metadata server knows
    // the pod by its service account (no Kubernetes API token is mounted).
    let account = location
        .object
        .as_ref()
        .and_then(|o| o.service_account.clone());
    if let Some(pod) = job.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        pod.service_account_name = account;
    }
    job
}

/// Mounts the cluster's client certificate Secret (`CLUSTER-client-tls`,
/// the tools' certificate, renewed by the operator; the kubelet updates
/// the files) read-only at [`TLS_MOUNT`].
pub(super) fn add_client_tls(cluster: &str, container: &mut Container, volumes: &mut Vec<Volume>) {
    volumes.push(Volume {
        name: "client-tls".into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(client_secret_name(cluster)),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    });
    container
        .volume_mounts
        .get_or_insert_with(Vec::new)
        .push(mount("client-tls", TLS_MOUNT, true));
}

/// The command that restores `snapshot` into a member's data folder, with
/// the tool of its version: `etcdutl` from 3.5, `etcdctl` for 3.4.
pub fn restore_command(config: &MemberConfig, snapshot: &str) -> (Vec<String>, Vec<EnvVar>) {
    let v = config.version;
    let (tool, env) = if (v.major, v.minor) >= (3, 5) {
        ("/usr/local/bin/etcdutl", vec![])
    } else {
        let api = EnvVar {
            name: "ETCDCTL_API".into(),
            value: Some("3".into()),
            ..EnvVar::default()
        };
        ("/usr/local/bin/etcdctl", vec![api])
    };
    let command = [
        tool,
        "snapshot",
        "restore",
        snapshot,
        "--name",
        &config.addr.name,
        "--initial-cluster",
        &config.initial_cluster,
        "--initial-cluster-token",
        &config.token,
        "--initial-advertise-peer-urls",
        &config.addr.peer_url,
        "--data-dir",
        DATA_DIR,
    ];
    (command.iter().map(|s| s.to_string()).collect(), env)
}

/// A restore Job: the member's etcd image restores `snapshot` (a path in
/// `backup_claim`, the pair) into the member's data claim `data_claim`,
/// pulled and scheduled as the member's pod will be (its `spec.pod`:
/// pull secrets, nodes, the group that owns the volume), so a volume
/// bound on the Job's node suits the member.
pub fn restore_job(
    name: &str,
    cluster: &str,
    config: &MemberConfig,
    data_claim: &str,
    (backup_claim, snapshot): (&str, &str),
    repository: &str,
    owner: &OwnerReference,
) -> Job {
    let path = format!("{BACKUPS_MOUNT}/{}", snapshot.trim_start_matches('/'));
    let (command, env) = restore_command(config, &path);
    let container = Container {
        name: RESTORE_CONTAINER.into(),
        image: Some(image(repository, config.version)),
        command: Some(command),
        env: (!env.is_empty()).then_some(env),
        volume_mounts: Some(vec![
            mount("backups", BACKUPS_MOUNT, true),
            mount("data", DATA_MOUNT, false),
        ]),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Container::default()
    };
    let volumes = vec![
        claim_volume("backups", backup_claim, true),
        claim_volume("data", data_claim, false),
    ];
    let mut job = job(name, cluster, "restore", container, volumes, owner);
    // The restore resolves the member's peer URL to match it against
    // --initial-cluster, and fails after 30 s when it does not resolve: the
    // member's DNS name (under the peer Service) exists only once its pod
    // does, after the restore. The Job's pod resolves it itself.
    let host = crate::tls::url_host(&config.addr.peer_url)
        .filter(|h| h.parse::<std::net::IpAddr>().is_err());
    let pod = job.spec.as_mut().and_then(|s| s.template.spec.as_mut());
    if let Some(pod) = pod {
        if let Some(host) = host {
            pod.host_aliases = Some(vec![HostAlias {
                ip: "127.0.0.1".into(),
                hostnames: Some(vec![host.to_string()]),
            }]);
        }
        super::placement::apply_to_job(config.pod.template.as_deref(), pod);
    }
    job
}

/// The managed-by selector of the Jobs of a cluster.
pub fn jobs_selector(cluster: &str) -> String {
    format!("{LABEL_CLUSTER}={cluster},{LABEL_MANAGED_BY}={MANAGED_BY}")
}
