//! Members from the objects the API lists: a member is its pod and, with
//! persistent storage, its data volume claim, joined by the member label.
//! Pure: what needs a write (the started mark) is returned, not done.

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use super::Error;
use super::config::{self, started};
use super::trouble::{
    binding_claim, container_swap, crash_looping, etcd_container, image_unavailable, problem,
    to_system_time, uses_empty_dir,
};
use crate::crd::LABEL_MEMBER;
use crate::kube_names::quantity_milli;
use crate::member::{CLIENT_PORT, MemberConfig, Volume};
use crate::platform::{PlatformMember, http_url};
use crate::tls::with_scheme;

/// What to write on a member's data holder once it is seen ready.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(
    clippy::large_enum_variant,
    reason = "a few marks per pass; the claim's config is written as it is"
)]
pub enum Mark {
    /// On its data volume claim (persistent storage): the started mark
    /// (`started`: the claim has none yet), and the config the member now
    /// runs when its pod runs other settings than the claim records (an
    /// upgrade, or its undoing, done: from now on the member restarts at
    /// that version).
    Claim {
        /// The claim.
        name: String,
        /// Set the started mark.
        started: bool,
        /// Record this config.
        config: Option<MemberConfig>,
    },
    /// The started mark on its pod (emptyDir storage: the data lives as
    /// long as the pod).
    Pod(String),
}

impl Mark {
    /// Whether writing it sets the started mark (the member's data counts
    /// only once it is written).
    pub fn sets_started(&self) -> bool {
        match self {
            Mark::Claim { started, .. } => *started,
            Mark::Pod(_) => true,
        }
    }
}

/// One member as its objects show it.
#[derive(Clone, Debug)]
pub struct Found {
    /// What the controller sees.
    pub member: PlatformMember,
    /// What to write: the member is ready and its data holder is unmarked,
    /// or records another version than the one it now runs. `has_data`
    /// already counts the started mark.
    pub mark: Option<Mark>,
}

/// Whether `meta` names `uid` among its owners.
pub fn owned_by(meta: &ObjectMeta, uid: &str) -> bool {
    meta.owner_references.iter().flatten().any(|o| o.uid == uid)
}

/// A pod that is there: not being deleted, not failed or done (it runs,
/// or will, or the kubelet restarts it).
fn pod_alive(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Failed" | "Succeeded"))
}

/// A pod that runs or will: alive, not crash looping, and not waiting for
/// an image that cannot be pulled (see [`super::trouble`]); such a pod is
/// deleted before its member is started again.
pub fn pod_running(pod: &Pod) -> bool {
    pod_alive(pod) && !crash_looping(pod) && image_unavailable(pod).is_none()
}

/// Where the operator reaches etcd in the pod: `http://POD_IP:2379`
/// (`https://` for a member whose client URL is; IPv6 in brackets), `None`
/// until the pod has an IP.
pub fn pod_url(pod: &Pod, https: bool) -> Option<String> {
    let status = pod.status.as_ref()?;
    let listed = status.pod_ips.iter().flatten().map(|p| p.ip.as_str());
    let ip = status.pod_ip.as_deref().into_iter().chain(listed);
    let ip = ip.map(str::trim).find(|ip| !ip.is_empty())?;
    let url = http_url(ip, CLIENT_PORT);
    Some(if https { with_scheme(&url, true) } else { url })
}

/// Where the operator reads a member pod's metrics (`http://POD_IP:2381/metrics`)
/// when it does not answer on its client port (restarted without quorum,
/// [`crate::member::metrics`]); `None` for a pod made before its etcd had
/// a metrics listener, or without an IP.
pub fn metrics_url(pod: &Pod) -> Option<String> {
    let listens = pod
        .spec
        .as_ref()?
        .containers
        .iter()
        .filter(|c| c.name == super::pod::CONTAINER)
        .flat_map(|c| c.args.iter().flatten())
        .any(|a| a == "--listen-metrics-urls");
    if !listens {
        return None;
    }
    let status = pod.status.as_ref()?;
    let listed = status.pod_ips.iter().flatten().map(|p| p.ip.as_str());
    let ip = status.pod_ip.as_deref().into_iter().chain(listed);
    let ip = ip.map(str::trim).find(|ip| !ip.is_empty())?;
    Some(format!(
        "{}/metrics",
        http_url(ip, crate::member::flags::METRICS_PORT)
    ))
}

/// A pod whose Ready condition is true.
pub fn pod_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// When etcd last started in the pod (its container, else the pod).
fn started_at(pod: &Pod) -> Option<SystemTime> {
    let status = pod.status.as_ref()?;
    let container =
        etcd_container(pod).and_then(|c| c.state.as_ref()?.running.as_ref()?.started_at.as_ref());
    container
        .or(status.start_time.as_ref())
        .and_then(to_system_time)
}

/// A member's data volume as its claim says (`None` for a claim whose
/// request is not a size: the plan leaves it alone). Whether its class
/// may grow is not the claim's to say: [`super::KubePlatform`] reads the
/// class when it matters.
pub fn volume(claim: &PersistentVolumeClaim) -> Option<Volume> {
    let bytes = |q: Option<&Quantity>| {
        q.and_then(|q| quantity_milli(&q.0))
            .and_then(|m| u64::try_from(m / 1000).ok())
    };
    let spec = claim.spec.as_ref()?;
    let requests = spec.resources.as_ref()?.requests.as_ref()?;
    let status = claim.status.as_ref();
    let bound = status.and_then(|s| s.phase.as_deref()) == Some("Bound");
    let capacity = status
        .filter(|_| bound)
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| bytes(c.get("storage")));
    let waits_for_restart = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "FileSystemResizePending" && c.status == "True");
    Some(Volume {
        requested: bytes(requests.get("storage"))?,
        capacity,
        class: spec.storage_class_name.clone(),
        expandable: None,
        waits_for_restart,
    })
}

/// Joins pods and claims (both already owned by the cluster's resource)
/// into members, in no particular order.
pub fn join(pods: &[Pod], claims: &[PersistentVolumeClaim]) -> Result<Vec<Found>, Error> {
    let mut by_member: BTreeMap<String, (Option<&Pod>, Option<&PersistentVolumeClaim>)> =
        BTreeMap::new();
    for pod in pods {
        if let Some(m) = pod.labels().get(LABEL_MEMBER) {
            by_member.entry(m.clone()).or_default().0 = Some(pod);
        }
    }
    for claim in claims {
        if let Some(m) = claim.labels().get(LABEL_MEMBER) {
            by_member.entry(m.clone()).or_default().1 = Some(claim);
        }
    }
    let mut out = Vec::with_capacity(by_member.len());
    for (name, (pod, claim)) in by_member {
        out.push(member(&name, pod, claim)?);
    }
    Ok(out)
}

fn member(
    name: &str,
    pod: Option<&Pod>,
    claim: Option<&PersistentVolumeClaim>,
) -> Result<Found, Error> {
    let pod_config = match pod {
        Some(p) => config::read(&format!("pods/{}", p.name_any()), p.annotations().into())?,
        None => None,
    };
    let claim_config = match claim {
        Some(c) => config::read(
            &format!("persistentvolumeclaims/{}", c.name_any()),
            c.annotations().into(),
        )?,
        None => None,
    };
    let running = pod.is_some_and(pod_running);
    let looping = pod.is_some_and(|p| pod_alive(p) && crash_looping(p));
    // The version it runs while its pod runs, else the one it will run.
    let config = match (&pod_config, &claim_config) {
        (Some(p), _) if running => p,
        (_, Some(c)) => c,
        (Some(p), None) => p,
        (None, None) => {
            return Err(Error::Config {
                object: format!("member {name}"),
                message: "neither its pod nor its volume claim records its config".into(),
            });
        }
    };
    // A container changed in place still runs the old etcd until the
    // kubelet swaps it: not called (so not counted healthy) until then.
    let swapping = pod.filter(|_| running).and_then(container_swap);
    let ready = pod.is_some_and(|p| running && pod_ready(p)) && swapping.is_none();
    let (has_data, mark) = match (claim, pod) {
        (Some(c), _) => {
            let alive = c.metadata.deletion_timestamp.is_none();
            let marked = started(c.annotations().into());
            // The claim records the settings its data last ran with
            // (version, tuning, backend: member::Settings), written once the
            // pod is ready on other ones, not before (an upgrade to an image
            // that never runs leaves the member at its version, and fixing
            // the spec undoes it).
            let moved = match (&pod_config, &claim_config) {
                (Some(p), Some(c)) if ready && p.settings() != c.settings() => Some(p.clone()),
                _ => None,
            };
            let mark = (alive && ready && (!marked || moved.is_some())).then(|| Mark::Claim {
                name: c.name_any(),
                started: !marked,
                config: moved,
            });
            (alive && (marked || mark.is_some()), mark)
        }
        (None, Some(p)) if uses_empty_dir(p) => {
            let marked = started(p.annotations().into());
            let mark = (ready && !marked).then(|| Mark::Pod(p.name_any()));
            (running && (marked || mark.is_some()), mark)
        }
        // A pod whose claim is gone has lost its data.
        _ => (false, None),
    };
    Ok(Found {
        member: PlatformMember {
            addr: config.addr.clone(),
            running,
            has_data,
            version: config.version,
            tuning: config.tuning,
            backend: config.backend.clone(),
            pod: config.pod.clone(),
            volume: claim.and_then(volume),
            bootstrap: config.bootstrap,
            started_at: pod.and_then(started_at),
            call_url: pod
                .filter(|_| running && swapping.is_none())
                .and_then(|p| pod_url(p, config.client_https())),
            metrics_url: pod
                .filter(|_| running && swapping.is_none())
                .and_then(metrics_url),
            crash_looping: looping,
            problem: swapping
                .is_none()
                .then(|| {
                    let now = std::time::SystemTime::now();
                    pod.filter(|p| !ready && !binding_claim(p, now))
                        .and_then(problem)
                })
                .flatten(),
            moving: swapping,
            pod_ready: Some(ready),
            tls: config.tls.clone(),
        },
        mark,
    })
}
