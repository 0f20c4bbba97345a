//! Why a member's pod does not run or get ready, from the pod's status:
//! the kubelet restarts a failing etcd in place (the operator never sees
//! the exit), and a pod that cannot be scheduled or pulled waits with no
//! word elsewhere. Pure: it reads the pod as listed.
//!
//! * A crash loop: the etcd container waits in `CrashLoopBackOff` and
//!   either keeps its data in an emptyDir (a member the local platform
//!   would replace at its first exit) or has been restarted
//!   [`CRASH_LOOP_EXITS`] times with its last run ending in a failure of
//!   its own (non-zero exit, not a kill signal) within [`CRASH_WINDOW`] of
//!   its start. The pod's restart count is not "in a row", but the
//!   kubelet's backoff, and with it `CrashLoopBackOff`, is only reached
//!   again after a second failure once a container ran for a while.
//! * An image that cannot be pulled (`ErrImagePull`, `ImagePullBackOff`...):
//!   the member does not run, though the pod is `Pending` or `Running`.
//! * A problem: a pod that is not scheduled (`Pending: ` and the
//!   scheduler's message), a container waiting for a reason other than
//!   being created (`ImagePullBackOff`, `ErrImagePull`,
//!   `CreateContainerConfigError`...), restarts and the last termination
//!   message (etcd's log tail, `FallbackToLogsOnError`, read for its error
//!   line as the local platform reads its log), or a failed pod's reason.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::pod::{CONTAINER, DATA_VOLUME};
use crate::member::crash::{CRASH_LOOP_EXITS, CRASH_WINDOW};

/// The kubelet's waiting reason while it holds off restarting a container
/// that keeps failing.
pub const CRASH_LOOP_BACK_OFF: &str = "CrashLoopBackOff";
/// Longest problem text kept (a termination message may be 4 KiB of log).
pub const PROBLEM_MAX_CHARS: usize = 300;
/// Waiting reasons of a container on its way up, no problem.
const STARTING: [&str; 2] = ["ContainerCreating", "PodInitializing"];
/// The waiting reason of a container whose environment cannot be made.
const CONFIG_ERROR: &str = "CreateContainerConfigError";
/// Waiting reasons of a container whose image cannot be had: it never
/// runs until the image exists (the kubelet keeps trying to pull it).
pub const IMAGE_TROUBLE: [&str; 5] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "RegistryUnavailable",
];

pub(super) fn to_system_time(t: &Time) -> Option<SystemTime> {
    let ms = u64::try_from(t.0.as_millisecond()).ok()?;
    Some(UNIX_EPOCH + Duration::from_millis(ms))
}

/// How long a pod may wait for its volume claim to be bound (a dynamic
/// provisioner takes a moment for every new claim) before that is said as
/// a problem: until then it is a member on its way up.
pub const CLAIM_BIND_GRACE: Duration = Duration::from_secs(30);

/// Whether `pod` is unscheduled only because its claim is not bound yet,
/// for less than [`CLAIM_BIND_GRACE`] at `now` (counted from the
/// condition's transition, else the pod's creation).
pub fn binding_claim(pod: &Pod, now: SystemTime) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    let unbound = status.conditions.iter().flatten().find(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.message
                .as_deref()
                .is_some_and(|m| m.contains("unbound immediate PersistentVolumeClaims"))
    });
    let Some(c) = unbound else {
        return false;
    };
    let since = c
        .last_transition_time
        .as_ref()
        .or(pod.metadata.creation_timestamp.as_ref())
        .and_then(to_system_time);
    since.is_some_and(|t| now.duration_since(t).unwrap_or_default() < CLAIM_BIND_GRACE)
}

/// The etcd container's status.
pub fn etcd_container(pod: &Pod) -> Option<&ContainerStatus> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    statuses.iter().find(|c| c.name == CONTAINER)
}

/// Whether the pod's data volume is an emptyDir.
pub fn uses_empty_dir(pod: &Pod) -> bool {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    let mut volumes = volumes.into_iter().flatten();
    volumes.any(|v| v.name == DATA_VOLUME && v.empty_dir.is_some())
}

fn waiting_reason(c: &ContainerStatus) -> Option<&str> {
    c.state.as_ref()?.waiting.as_ref()?.reason.as_deref()
}

/// How the container's previous run ended.
fn last_termination(c: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    c.last_state.as_ref()?.terminated.as_ref()
}

/// etcd failed by itself (128 + SIGKILL or SIGTERM is a kill: a liveness
/// probe, an eviction, a node going down).
fn failed_by_itself(t: &ContainerStateTerminated) -> bool {
    t.exit_code != 0 && t.exit_code != 128 + 9 && t.exit_code != 128 + 15
}

/// It failed by itself within [`CRASH_WINDOW`] of its start.
fn fast_failure(t: &ContainerStateTerminated) -> bool {
    let started = t.started_at.as_ref().and_then(to_system_time);
    let finished = t.finished_at.as_ref().and_then(to_system_time);
    let ran = match (started, finished) {
        (Some(s), Some(f)) => f.duration_since(s).unwrap_or_default(),
        _ => return false,
    };
    failed_by_itself(t) && ran < CRASH_WINDOW
}

/// The etcd container cannot start because its image cannot be pulled
/// (a version with no image, a registry out of reach): the member does not
/// run, whatever the pod's phase says. Returns the waiting reason.
pub fn image_unavailable(pod: &Pod) -> Option<&str> {
    let reason = waiting_reason(etcd_container(pod)?)?;
    IMAGE_TROUBLE.contains(&reason).then_some(reason)
}

/// Why a container of the pod, whichever (a Job's is not named `etcd`),
/// cannot have its image, if one cannot.
pub fn any_image_unavailable(pod: &Pod) -> Option<&str> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    statuses
        .iter()
        .filter_map(waiting_reason)
        .find(|r| IMAGE_TROUBLE.contains(r))
}

/// Why a container of the pod, whichever, cannot be started because of
/// its configuration (a Secret or ConfigMap it takes its environment from
/// is not there: `CreateContainerConfigError`), with the kubelet's
/// message; the kubelet retries, but nothing changes until someone makes
/// what is missing.
pub fn any_config_error(pod: &Pod) -> Option<String> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    statuses.iter().find_map(|c| {
        let w = c.state.as_ref()?.waiting.as_ref()?;
        let reason = w.reason.as_deref()?;
        (reason == CONFIG_ERROR).then(|| cut(&joined(reason, w.message.clone())))
    })
}

/// The kubelet keeps restarting etcd in this pod and it keeps failing (see
/// the module's rule): the member is down and its data not trusted.
pub fn crash_looping(pod: &Pod) -> bool {
    let Some(c) = etcd_container(pod) else {
        return false;
    };
    if waiting_reason(c) != Some(CRASH_LOOP_BACK_OFF) {
        return false;
    }
    let restarts = u32::try_from(c.restart_count).unwrap_or(0);
    uses_empty_dir(pod)
        || (restarts >= CRASH_LOOP_EXITS && last_termination(c).is_some_and(fast_failure))
}

/// The tag of an image reference (`repo/name:TAG`, a digest dropped);
/// `None` when it has none.
fn image_tag(image: &str) -> Option<&str> {
    let image = image.split('@').next().unwrap_or(image);
    let last = image.rsplit('/').next().unwrap_or(image);
    last.split_once(':').map(|(_, tag)| tag)
}

/// The etcd container the kubelet runs is not yet the one the pod asks
/// for: the image was changed in place (an emptyDir member's upgrade) and
/// the kubelet has not swapped the container yet, so the old etcd still
/// answers. Says which images, or `None` when they agree or cannot be
/// told apart (no status yet, or an image without a tag). Tags are
/// compared, as runtimes may report the repository in another form
/// (`docker.io/library/...`).
pub fn container_swap(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?.containers.iter();
    let wanted = spec
        .clone()
        .find(|c| c.name == CONTAINER)?
        .image
        .as_deref()?;
    let status = etcd_container(pod)?;
    status.state.as_ref()?.running.as_ref()?;
    let (want, have) = (image_tag(wanted)?, image_tag(&status.image)?);
    (want != have).then(|| {
        format!(
            "the kubelet is replacing its container: it still runs {}, the pod asks for {wanted}",
            status.image
        )
    })
}

/// `text` cut to [`PROBLEM_MAX_CHARS`] characters.
fn cut(text: &str) -> String {
    match text.char_indices().nth(PROBLEM_MAX_CHARS) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_string(),
    }
}

/// What etcd said as it ended: the error line of the log tail in the
/// termination message, else its last line.
fn termination_hint(t: &ContainerStateTerminated) -> Option<String> {
    let message = t.message.as_deref().unwrap_or_default();
    crate::member::hints::failure_hint(message)
        .or_else(|| {
            let last = message.lines().rev().find(|l| !l.trim().is_empty())?;
            Some(last.trim().to_string())
        })
        .or_else(|| t.reason.clone().filter(|r| r != "Error"))
}

/// `restarted N time(s), last exit code C: HINT`.
fn restarts_note(c: &ContainerStatus) -> Option<String> {
    let t = last_termination(c)?;
    let hint = termination_hint(t).map(|h| format!(": {h}"));
    Some(format!(
        "restarted {} time(s), last exit code {}{}",
        c.restart_count,
        t.exit_code,
        hint.unwrap_or_default()
    ))
}

fn joined(head: &str, detail: Option<String>) -> String {
    match detail.filter(|d| !d.trim().is_empty()) {
        Some(d) => format!("{head}: {d}"),
        None => head.to_string(),
    }
}

/// Why the pod does not run or is not ready, when its status says; `None`
/// for a pod on its way up or running without trouble.
pub fn problem(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let phase = status.phase.as_deref().unwrap_or("Pending");
    if matches!(phase, "Failed" | "Succeeded") {
        let why = [status.reason.clone(), status.message.clone()];
        let why: Vec<String> = why.into_iter().flatten().collect();
        return Some(cut(&joined(phase, Some(why.join(": ")))));
    }
    let conditions = status.conditions.iter().flatten();
    let unscheduled = conditions
        .clone()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False");
    if let Some(c) = unscheduled {
        let why = c.message.clone().or_else(|| c.reason.clone());
        return Some(cut(&joined("Pending", why)));
    }
    let c = etcd_container(pod)?;
    let state = c.state.as_ref();
    if let Some(w) = state.and_then(|s| s.waiting.as_ref()) {
        let reason = w.reason.as_deref().unwrap_or("Waiting");
        if STARTING.contains(&reason) {
            return None;
        }
        let detail = if reason == CRASH_LOOP_BACK_OFF {
            restarts_note(c)
        } else {
            w.message.clone()
        };
        return Some(cut(&joined(reason, detail)));
    }
    if let Some(t) = state.and_then(|s| s.terminated.as_ref()) {
        let head = format!("exited with code {}", t.exit_code);
        return Some(cut(&joined(&head, termination_hint(t))));
    }
    // Running: worth a word only when it is not ready and has failed before.
    if c.ready || c.restart_count == 0 {
        return None;
    }
    restarts_note(c).map(|n| cut(&format!("not ready, {n}")))
}
