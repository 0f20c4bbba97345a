//! `spec.pod` and `spec.image`: what member pods may be given, checked as
//! the API server would check the pod (so a pod is never refused at
//! creation, when a member is already on its way), and no further than
//! etcd's pod can take: the operator's own labels and annotations, a
//! resource etcd cannot use, root.

use std::collections::BTreeMap;

use crate::crd::{
    EtcdClusterSpec, LABEL_CLUSTER, LABEL_MANAGED_BY, LABEL_NAME, MemberPodSpec, PodResources,
    PodSecurity,
};
use crate::kube_names::{
    check_key, check_label_value, check_object_name, check_repository, quantity_milli,
};
use crate::member::PodSettings;

/// The prefix of the operator's own labels and annotations.
pub const OPERATOR_PREFIX: &str = "etcdoperator.dev/";
/// Labels of member pods only the operator sets (beside
/// [`OPERATOR_PREFIX`]): selectors and the PodDisruptionBudget go by them.
pub const OPERATOR_LABELS: [&str; 2] = [LABEL_NAME, LABEL_MANAGED_BY];
/// The largest user or group id (Linux ids are 32-bit; Kubernetes takes
/// up to 2^31-1).
pub const MAX_ID: i64 = i32::MAX as i64;
/// Most bytes of extra annotations (the API server takes 256 KiB of
/// annotations per object; the operator's member config shares it).
pub const MAX_ANNOTATION_BYTES: usize = 64 * 1024;
/// The resources etcd's container may ask for.
pub const RESOURCE_NAMES: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];
/// Prefix of huge page resources (`hugepages-2Mi`).
pub const HUGEPAGES: &str = "hugepages-";

/// Whether a label key is the operator's own.
pub fn operator_label(key: &str) -> bool {
    key.starts_with(OPERATOR_PREFIX) || OPERATOR_LABELS.contains(&key)
}

/// Checks `spec.image` and `spec.pod`, returning what members run with.
pub fn check(spec: &EtcdClusterSpec, err: &mut impl FnMut(&str, String)) -> PodSettings {
    let repository = spec.image.as_ref().and_then(|i| i.repository.clone());
    if let Some(r) = &repository
        && let Err(m) = check_repository(r)
    {
        err("spec.image.repository", m);
    }
    if let Some(p) = &spec.pod {
        check_pod(p, err);
    }
    // An empty `pod: {}` is the defaults: no restart for writing it.
    PodSettings {
        repository,
        template: spec.pod.clone().filter(|p| **p != MemberPodSpec::default()),
    }
}

fn check_pod(p: &MemberPodSpec, err: &mut impl FnMut(&str, String)) {
    if let Some(r) = &p.resources {
        check_resources(r, err);
    }
    check_map("spec.pod.nodeSelector", &p.node_selector, true, err);
    check_map("spec.pod.labels", &p.labels, true, err);
    check_map("spec.pod.annotations", &p.annotations, false, err);
    if let Some(k) = p.labels.keys().find(|k| operator_label(k)) {
        err(
            &format!("spec.pod.labels.{k}"),
            format!(
                "is the operator's own label (its selectors, Services and disruption budget go \
                 by {LABEL_CLUSTER}, {LABEL_NAME} and {LABEL_MANAGED_BY}): choose another key"
            ),
        );
    }
    if let Some(k) = p
        .annotations
        .keys()
        .find(|k| k.starts_with(OPERATOR_PREFIX))
    {
        err(
            &format!("spec.pod.annotations.{k}"),
            format!(
                "{OPERATOR_PREFIX} annotations are the operator's own (a member's config is \
                 recorded there): choose another key"
            ),
        );
    }
    let bytes: usize = p.annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if bytes > MAX_ANNOTATION_BYTES {
        err(
            "spec.pod.annotations",
            format!("{bytes} bytes; at most {MAX_ANNOTATION_BYTES} in all"),
        );
    }
    if let Some(name) = &p.priority_class_name
        && let Err(m) = check_object_name(name)
    {
        err("spec.pod.priorityClassName", m);
    }
    for (i, s) in p.image_pull_secrets.iter().flatten().enumerate() {
        if let Err(m) = check_object_name(&s.name) {
            err(&format!("spec.pod.imagePullSecrets[{i}].name"), m);
        }
    }
    for (i, t) in p.tolerations.iter().flatten().enumerate() {
        let field = format!("spec.pod.tolerations[{i}]");
        let operator = t.operator.as_deref().unwrap_or("Equal");
        let key = t.key.as_deref().unwrap_or("");
        let problem = if !["Equal", "Exists"].contains(&operator) {
            Some(format!("operator {operator:?}: use Equal or Exists"))
        } else if operator == "Exists" && t.value.as_deref().is_some_and(|v| !v.is_empty()) {
            Some("a value with operator Exists: drop the value, or use Equal".into())
        } else if key.is_empty() && operator != "Exists" {
            Some("no key: an empty key tolerates every taint only with operator Exists".into())
        } else if let Some(e) = t
            .effect
            .as_deref()
            .filter(|e| !["NoSchedule", "PreferNoSchedule", "NoExecute", ""].contains(e))
        {
            Some(format!(
                "effect {e:?}: use NoSchedule, PreferNoSchedule or NoExecute"
            ))
        } else if t.toleration_seconds.is_some() && t.effect.as_deref() != Some("NoExecute") {
            Some("tolerationSeconds is for effect NoExecute only".into())
        } else {
            None
        };
        if let Some(m) = problem {
            err(&field, m);
        }
        if !key.is_empty()
            && let Err(m) = check_key(key)
        {
            err(&format!("{field}.key"), m);
        }
    }
    for (i, c) in p.topology_spread_constraints.iter().flatten().enumerate() {
        let field = format!("spec.pod.topologySpreadConstraints[{i}]");
        if c.max_skew < 1 {
            err(
                &format!("{field}.maxSkew"),
                format!("{}: must be at least 1", c.max_skew),
            );
        }
        if let Err(m) = check_key(&c.topology_key) {
            err(&format!("{field}.topologyKey"), m);
        }
        let when = c.when_unsatisfiable.as_str();
        if !["DoNotSchedule", "ScheduleAnyway"].contains(&when) {
            err(
                &format!("{field}.whenUnsatisfiable"),
                format!("{when:?}: use ScheduleAnyway (a preference) or DoNotSchedule (a rule)"),
            );
        }
        if c.min_domains
            .is_some_and(|n| n < 1 || when != "DoNotSchedule")
        {
            err(
                &format!("{field}.minDomains"),
                "at least 1, and with whenUnsatisfiable: DoNotSchedule only".into(),
            );
        }
    }
    if let Some(s) = &p.security_context {
        check_security(s, err);
    }
}

/// Keys and, for labels, values of a map as Kubernetes takes them.
fn check_map(
    field: &str,
    map: &BTreeMap<String, String>,
    label_values: bool,
    err: &mut impl FnMut(&str, String),
) {
    for (k, v) in map {
        if let Err(m) = check_key(k) {
            err(field, m);
        } else if label_values && let Err(m) = check_label_value(v) {
            err(&format!("{field}.{k}"), m);
        }
    }
}

fn check_resources(r: &PodResources, err: &mut impl FnMut(&str, String)) {
    for (which, map) in [("requests", &r.requests), ("limits", &r.limits)] {
        for (name, q) in map {
            let field = format!("spec.pod.resources.{which}.{name}");
            if !RESOURCE_NAMES.contains(&name.as_str()) && !name.starts_with(HUGEPAGES) {
                err(
                    &field,
                    format!(
                        "etcd's container cannot use it: use {}, or {HUGEPAGES}<size>",
                        RESOURCE_NAMES.join(", ")
                    ),
                );
                continue;
            }
            match quantity_milli(&q.0) {
                None => err(
                    &field,
                    format!(
                        "{:?} is not a quantity: write it as Kubernetes does, such as \"500m\" \
                         or \"2\" (cpu) or \"4Gi\" (memory)",
                        q.0
                    ),
                ),
                Some(0) if which == "limits" && ["cpu", "memory"].contains(&name.as_str()) => err(
                    &field,
                    "a limit of 0 leaves etcd nothing: raise it or drop it".into(),
                ),
                Some(_) => {}
            }
        }
    }
    for (name, limit) in &r.limits {
        let (Some(request), Some(limit)) = (
            r.requests.get(name).and_then(|q| quantity_milli(&q.0)),
            quantity_milli(&limit.0),
        ) else {
            continue;
        };
        if request > limit {
            err(
                &format!("spec.pod.resources.requests.{name}"),
                format!(
                    "is more than its limit ({}): a request must not exceed the limit",
                    r.limits.get(name).map(|q| q.0.as_str()).unwrap_or("")
                ),
            );
        }
    }
}

fn check_security(s: &PodSecurity, err: &mut impl FnMut(&str, String)) {
    let field = |f: &str| format!("spec.pod.securityContext.{f}");
    if let Some(u) = s.run_as_user
        && !(1..=MAX_ID).contains(&u)
    {
        err(
            &field("runAsUser"),
            format!(
                "{u}: etcd's pod runs as a user other than root (runAsNonRoot): a user id from \
                 1 to {MAX_ID}"
            ),
        );
    }
    for (name, id) in [("runAsGroup", s.run_as_group), ("fsGroup", s.fs_group)] {
        if let Some(id) = id
            && !(0..=MAX_ID).contains(&id)
        {
            err(&field(name), format!("{id}: a group id from 0 to {MAX_ID}"));
        }
    }
    if let Some(id) = s
        .supplemental_groups
        .iter()
        .flatten()
        .find(|id| !(0..=MAX_ID).contains(*id))
    {
        err(
            &field("supplementalGroups"),
            format!("{id}: group ids from 0 to {MAX_ID}"),
        );
    }
    if let Some(p) = &s.fs_group_change_policy
        && !["OnRootMismatch", "Always"].contains(&p.as_str())
    {
        err(
            &field("fsGroupChangePolicy"),
            format!("{p:?}: use OnRootMismatch or Always"),
        );
    }
}

#[cfg(test)]
mod tests;
