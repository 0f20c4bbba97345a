//! A member's pod: etcd from `IMAGE:vVERSION` with the flags of every
//! platform ([`crate::member::flags`]), listening on every address, named through the headless Service,
//! its data on the member's claim (persistent) or an emptyDir (ephemeral),
//! placed and sized as its recorded `spec.pod` says ([`super::placement`]).

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, Container, ContainerPort, EmptyDirVolumeSource, HTTPGetAction,
    PersistentVolumeClaimVolumeSource, Pod, PodAffinityTerm, PodAntiAffinity, PodSecurityContext,
    PodSpec, Probe, SeccompProfile, SecretVolumeSource, SecurityContext, TCPSocketAction, Volume,
    VolumeMount, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::config::{ANNOTATION_CONFIG, to_json};
use super::objects::{claim_name, member_labels, meta, peer_service_name, selector_labels};
use super::placement;
use crate::crd::StoragePolicy;
use crate::member::flags::{Listen, METRICS_PORT, etcd_args};
use crate::member::{CLIENT_PORT, MemberConfig, PEER_PORT};
use crate::version::Version;

/// Default image repository; the tag is `v` and the version.
pub const DEFAULT_IMAGE: &str = "quay.io/coreos/etcd";
/// Name of the etcd container.
pub const CONTAINER: &str = "etcd";
/// Where the data volume is mounted.
pub const DATA_MOUNT: &str = "/var/lib/etcd";
/// etcd's `--data-dir`: a folder in the volume (a fresh filesystem's root
/// may hold `lost+found`).
pub const DATA_DIR: &str = "/var/lib/etcd/data";
/// The etcd binary in the image.
pub const ETCD_BINARY: &str = "/usr/local/bin/etcd";
/// The user and group etcd runs as (not root); the volume is given to this
/// group (`fsGroup`).
pub const RUN_AS: i64 = 65532;
/// Name of the data volume in the pod.
pub const DATA_VOLUME: &str = "data";
/// A small writable /tmp (the root filesystem is read-only).
const TMP_VOLUME: &str = "tmp";
/// Name of the TLS volume (the member's Secret) in the pod.
pub const TLS_VOLUME: &str = "tls";
/// Where the member's TLS files are mounted (read-only).
pub const TLS_DIR: &str = "/etc/etcd/tls";

/// Name of a member's TLS Secret (its certificates, keys and CAs).
pub fn tls_secret_name(member: &str) -> String {
    format!("{member}-tls")
}

/// The image of `version`.
pub fn image(repository: &str, version: Version) -> String {
    format!("{repository}:v{version}")
}

/// Whether the readiness probe may use `/readyz`: etcd 3.5.11 added it
/// (CHANGELOG-3.5; 3.5.1 answers 404). 3.4 keeps `/health`, which every
/// 3.4 and 3.5 serves: a backport to a late 3.4 patch is not confirmed
/// here, and a probe path that answers 404 would leave the member never
/// Ready (no client traffic, and its data never counted as worth keeping).
pub fn has_readyz(v: Version) -> bool {
    match (v.major, v.minor) {
        (3, 5) => v.patch >= 11,
        (major, minor) => (major, minor) > (3, 5),
    }
}

/// Path of the readiness probe: `/readyz` where etcd has it, else
/// `/health`. Both fail while the member has no leader, and neither answers
/// before the member has joined its cluster.
pub fn readiness_path(v: Version) -> &'static str {
    if has_readyz(v) { "/readyz" } else { "/health" }
}

/// The etcd command line of a member in a pod: the flags of every
/// platform (so both platforms run etcd alike), listening on every address
/// of the pod and advertising its DNS names.
pub fn pod_args(c: &MemberConfig) -> Vec<String> {
    let mut args = etcd_args(
        c,
        Path::new(DATA_DIR),
        Path::new(TLS_DIR),
        Listen::Everywhere,
    );
    if c.backend.standby {
        args.extend(super::standby::token_flag());
    }
    args
}

/// The port the readiness probe asks: the client port, or with client
/// TLS (which wants a client certificate the kubelet does not have) the
/// plain metrics port.
fn probe_port(c: &MemberConfig) -> u16 {
    if c.tls.client {
        METRICS_PORT
    } else {
        CLIENT_PORT
    }
}

/// How long the kubelet lets a member's etcd stop after SIGTERM before it
/// kills it, in seconds. etcd is the container's command itself (no shell
/// in between), so as PID 1 it gets the kubelet's SIGTERM and handles it:
/// it hands leadership over (waiting at most its request timeout, 5 s plus
/// two election timeouts) and stops serving (at most that again, for RPCs
/// in flight), then exits; measured here, a 3.4.23 or 3.5.1 member as
/// PID 1 of its own PID namespace, or one that lost its quorum with a
/// write in flight, exits within 30 ms. The grace is that worst case plus
/// 2 s (16 s with etcd's default timing), not Kubernetes' default 30 s: a
/// stop that hangs holds a replacement up no longer than etcd's own bound.
pub fn termination_grace_secs(c: &MemberConfig) -> i64 {
    let request_timeout_ms = 5_000 + 2 * u64::from(c.tuning.election());
    let stop_ms = 2 * request_timeout_ms + 2_000;
    i64::try_from(stop_ms.div_ceil(1_000)).unwrap_or(i64::MAX)
}

/// How long etcd may take to open its client port before the kubelet
/// gives up on the container (a large WAL or snapshot is read first).
pub const STARTUP_LIMIT_SECS: i32 = 600;

/// Readiness, liveness and startup probes. Readiness is asked every second
/// so a member that becomes ready (or stops being) shows within about a
/// second in the pod, the client Service and the operator's own view; the
/// startup probe holds liveness off while etcd starts.
fn probes(c: &MemberConfig) -> (Probe, Probe, Probe) {
    let version = c.version;
    let client_port = || {
        Some(TCPSocketAction {
            port: IntOrString::Int(i32::from(CLIENT_PORT)),
            ..TCPSocketAction::default()
        })
    };
    let readiness = Probe {
        http_get: Some(HTTPGetAction {
            path: Some(readiness_path(version).into()),
            port: IntOrString::Int(i32::from(probe_port(c))),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(1),
        timeout_seconds: Some(2),
        failure_threshold: Some(3),
        ..Probe::default()
    };
    // A TCP check: etcd's HTTP endpoints (`/livez` included) are served
    // only once the member has joined its cluster, and `/health` fails
    // without a leader; restarting members cannot bring back a quorum, so
    // liveness only asks that etcd still listens.
    let liveness = Probe {
        tcp_socket: client_port(),
        period_seconds: Some(10),
        timeout_seconds: Some(5),
        failure_threshold: Some(6),
        ..Probe::default()
    };
    // Until etcd listens, neither of the others runs: no fixed initial
    // delay, so readiness is first asked about a second after start.
    let startup = Probe {
        tcp_socket: client_port(),
        period_seconds: Some(1),
        timeout_seconds: Some(1),
        failure_threshold: Some(STARTUP_LIMIT_SECS),
        ..Probe::default()
    };
    (readiness, liveness, startup)
}

fn container_port(name: &str, port: u16) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: i32::from(port),
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    }
}

fn etcd_container(c: &MemberConfig, repository: &str) -> Container {
    let (readiness, liveness, startup) = probes(c);
    let mut mounts = vec![
        VolumeMount {
            name: DATA_VOLUME.into(),
            mount_path: DATA_MOUNT.into(),
            ..VolumeMount::default()
        },
        VolumeMount {
            name: TMP_VOLUME.into(),
            mount_path: "/tmp".into(),
            ..VolumeMount::default()
        },
    ];
    if c.backend.standby {
        mounts.push(super::standby::auth_mount());
    }
    if has_tls_files(c) {
        mounts.push(VolumeMount {
            name: TLS_VOLUME.into(),
            mount_path: TLS_DIR.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }
    Container {
        name: CONTAINER.into(),
        image: Some(image(c.pod.repository_or(repository), c.version)),
        command: Some(vec![ETCD_BINARY.into()]),
        args: Some(pod_args(c)),
        ports: Some(vec![
            container_port("client", CLIENT_PORT),
            container_port("peer", PEER_PORT),
        ]),
        volume_mounts: Some(mounts),
        readiness_probe: Some(readiness),
        liveness_probe: Some(liveness),
        startup_probe: Some(startup),
        // etcd logs to stderr and writes no termination message: why a
        // member failed to start (a data folder it cannot write, a name that
        // does not resolve, a removed member) then shows in the pod's
        // status and `kubectl describe pod`.
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        resources: Some(placement::resources(c.pod.template.as_deref())),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Capabilities::default()
            }),
            ..SecurityContext::default()
        }),
        ..Container::default()
    }
}

fn data_volume(member: &str, storage: StoragePolicy) -> Volume {
    match storage {
        StoragePolicy::Persistent => Volume {
            name: DATA_VOLUME.into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(member),
                read_only: None,
            }),
            ..Volume::default()
        },
        StoragePolicy::Ephemeral => Volume {
            name: DATA_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        },
    }
}

/// Whether the member's etcd reads TLS files (its Secret is mounted).
fn has_tls_files(c: &MemberConfig) -> bool {
    c.tls.peer || c.tls.client
}

/// The member's TLS Secret as a volume; the kubelet updates the files in
/// place when the Secret changes (etcd reads certificates on each new
/// connection). Readable by the pod's group (`fsGroup`) only.
fn tls_volume(member: &str) -> Volume {
    Volume {
        name: TLS_VOLUME.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(tls_secret_name(member)),
            default_mode: Some(0o440),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// Members of a cluster prefer different nodes, so losing a node loses one.
fn spread(cluster: &str) -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(selector_labels(cluster)),
                            ..LabelSelector::default()
                        }),
                        topology_key: "kubernetes.io/hostname".into(),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    }
}

/// How the kubelet restarts a member's etcd: always, but for the seed of a
/// rebuild (`--force-new-cluster`), which runs once: restarted with the
/// flag after members joined it, it would drop them. When it ends, its pod
/// is done and the operator starts the member again from its claim's
/// record, which no longer asks for the flag once the seed served; so the
/// seed's pod is made once, not once with the flag and again without it.
pub fn restart_policy(config: &MemberConfig) -> &'static str {
    if config.force_new_cluster {
        "Never"
    } else {
        "Always"
    }
}

/// A member's pod. `repository` is the etcd image without its tag, for
/// a member whose config names none (`spec.image.repository`).
pub fn member_pod(
    cluster: &str,
    config: &MemberConfig,
    storage: StoragePolicy,
    repository: &str,
    owner: &OwnerReference,
) -> Pod {
    let member = &config.addr.name;
    let mut metadata = meta(member.clone(), member_labels(cluster, member), owner);
    metadata.annotations = Some(BTreeMap::from([(
        ANNOTATION_CONFIG.to_string(),
        to_json(config),
    )]));
    let mut volumes = vec![
        data_volume(member, storage),
        Volume {
            name: TMP_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource {
                size_limit: Some(Quantity("64Mi".into())),
                ..EmptyDirVolumeSource::default()
            }),
            ..Volume::default()
        },
    ];
    if has_tls_files(config) {
        volumes.push(tls_volume(member));
    }
    if config.backend.standby {
        volumes.push(super::standby::auth_volume(cluster));
    }
    let mut spec = PodSpec {
        hostname: Some(member.clone()),
        subdomain: Some(peer_service_name(cluster)),
        containers: vec![etcd_container(config, repository)],
        volumes: Some(volumes),
        restart_policy: Some(restart_policy(config).into()),
        termination_grace_period_seconds: Some(termination_grace_secs(config)),
        // Service links put `NAME_SERVICE_HOST`-style variables in the
        // environment; for a cluster named `etcd` they start with ETCD_,
        // which etcd reads as flags.
        enable_service_links: Some(false),
        automount_service_account_token: Some(false),
        affinity: Some(spread(cluster)),
        security_context: Some(pod_security()),
        ..PodSpec::default()
    };
    let template = config.pod.template.as_deref();
    placement::apply_to_member(cluster, template, &mut metadata, &mut spec);
    Pod {
        metadata,
        spec: Some(spec),
        status: None,
    }
}

/// The pod security of every pod the operator creates (members and Jobs):
/// not root, etcd's user and group owning the volumes, the runtime's
/// default seccomp profile.
pub(super) fn pod_security() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(RUN_AS),
        run_as_group: Some(RUN_AS),
        fs_group: Some(RUN_AS),
        fs_group_change_policy: Some("OnRootMismatch".into()),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            localhost_profile: None,
        }),
        ..PodSecurityContext::default()
    }
}
