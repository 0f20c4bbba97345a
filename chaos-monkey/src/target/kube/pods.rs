//! What a member's pod says: whether it runs and since when, where its
//! etcd answers, and the handle a fault aims at.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::{CLIENT_PORT, Handle, MemberKey};

pub(super) fn running(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

pub(super) fn started(pod: &Pod) -> Option<SystemTime> {
    let t = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .or(pod.metadata.creation_timestamp.as_ref())?;
    let ms = u64::try_from(t.0.as_millisecond()).ok()?;
    Some(UNIX_EPOCH + Duration::from_millis(ms))
}

/// Since when the etcd container runs: the latest container start (a
/// container restarted in place keeps its pod's start time), else the
/// pod's start.
pub(super) fn running_since(pod: &Pod) -> Option<SystemTime> {
    let containers = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten();
    let latest = containers
        .filter_map(|c| c.state.as_ref()?.running.as_ref()?.started_at.as_ref())
        .filter_map(|t| u64::try_from(t.0.as_millisecond()).ok())
        .max()
        .map(|ms| UNIX_EPOCH + Duration::from_millis(ms));
    latest.or_else(|| started(pod))
}

/// Whether a container of the pod runs (true when the pod does not say):
/// a pod can be Running while its container crash-loops.
pub(super) fn container_running(pod: &Pod) -> bool {
    match pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
    {
        None => true,
        Some(cs) if cs.is_empty() => true,
        Some(cs) => cs
            .iter()
            .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some())),
    }
}

pub(super) fn client_url(pod: &Pod) -> Option<String> {
    let ip: std::net::IpAddr = pod.status.as_ref()?.pod_ip.as_deref()?.parse().ok()?;
    let scheme = if recorded_client_url(pod).is_some_and(|u| u.starts_with("https://")) {
        "https"
    } else {
        "http"
    };
    Some(format!(
        "{scheme}://{}",
        std::net::SocketAddr::new(ip, CLIENT_PORT)
    ))
}

/// The client URL the operator recorded for the pod's member.
pub(super) fn recorded_client_url(pod: &Pod) -> Option<String> {
    let config =
        etcd_operator::platform::kube::config::read("", pod.annotations().into()).ok()??;
    Some(config.addr.client_url)
}

pub(super) fn handle(pod: &Pod, member: Option<MemberKey>) -> Handle {
    Handle {
        pod: pod.name_any(),
        uid: pod.uid(),
        member,
    }
}
