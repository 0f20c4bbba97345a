//! `spec.pod` applied to what the operator builds: a member's pod (every
//! field) and the Jobs that run the member's etcd image on its claim or
//! check that image (what they need to be pulled and scheduled where the
//! member may run: pull secrets, node selector, tolerations, node
//! affinity, priority and the pod security settings that own the volume).
//! Unset fields keep the operator's defaults, so a member recorded before
//! `spec.pod` existed gets the pod it always got.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, PodSecurityContext, PodSpec, ResourceRequirements, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::objects::selector_labels;
use crate::crd::{MemberPodSpec, PodSecurity};

/// The zone label members spread across by default.
pub const ZONE_KEY: &str = "topology.kubernetes.io/zone";
/// The node label members spread across by default, after zones.
pub const HOSTNAME_KEY: &str = "kubernetes.io/hostname";

/// The etcd container's resources without `spec.pod.resources`: requests
/// only (a memory limit near etcd's working set gets it OOM-killed on a
/// spike).
pub fn default_resources() -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), Quantity("100m".into())),
            ("memory".to_string(), Quantity("128Mi".into())),
        ])),
        ..ResourceRequirements::default()
    }
}

/// The etcd container's resources for `template`.
pub fn resources(template: Option<&MemberPodSpec>) -> ResourceRequirements {
    let Some(r) = template.and_then(|t| t.resources.as_ref()) else {
        return default_resources();
    };
    let map = |m: &BTreeMap<String, Quantity>| (!m.is_empty()).then(|| m.clone());
    ResourceRequirements {
        requests: map(&r.requests),
        limits: map(&r.limits),
        ..ResourceRequirements::default()
    }
}

/// Members prefer spreading across zones, then across nodes (preferences:
/// clusters without zones, or fewer zones or nodes than members, schedule
/// all the same); the default anti-affinity prefers other nodes too, and
/// stays when `spec.pod.topologySpreadConstraints` replaces these.
pub fn default_spread(cluster: &str) -> Vec<TopologySpreadConstraint> {
    [ZONE_KEY, HOSTNAME_KEY]
        .into_iter()
        .map(|key| TopologySpreadConstraint {
            max_skew: 1,
            topology_key: key.into(),
            when_unsatisfiable: "ScheduleAnyway".into(),
            label_selector: Some(members(cluster)),
            ..TopologySpreadConstraint::default()
        })
        .collect()
}

fn members(cluster: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(selector_labels(cluster)),
        ..LabelSelector::default()
    }
}

/// Writes `template` into a member's pod of `cluster`: its metadata (the
/// operator's labels and annotations kept over the user's) and its spec.
/// `affinity` is the default, replaced field by field (`nodeAffinity`,
/// `podAffinity`, `podAntiAffinity`) by the template's.
pub fn apply_to_member(
    cluster: &str,
    template: Option<&MemberPodSpec>,
    meta: &mut ObjectMeta,
    pod: &mut PodSpec,
) {
    let spread = template.and_then(|t| t.topology_spread_constraints.clone());
    let spread = spread.map_or_else(
        || default_spread(cluster),
        |list| {
            let fill = |mut c: TopologySpreadConstraint| {
                c.label_selector.get_or_insert_with(|| members(cluster));
                c
            };
            list.into_iter().map(fill).collect()
        },
    );
    pod.topology_spread_constraints = (!spread.is_empty()).then_some(spread);
    let Some(t) = template else {
        return;
    };
    for (ours, theirs) in [
        (&mut meta.labels, &t.labels),
        (&mut meta.annotations, &t.annotations),
    ] {
        if theirs.is_empty() {
            continue;
        }
        let mut merged = theirs.clone();
        merged.extend(ours.take().unwrap_or_default());
        *ours = Some(merged);
    }
    if let Some(a) = &t.affinity {
        let mut affinity = pod.affinity.take().unwrap_or_default();
        let Affinity {
            node_affinity,
            pod_affinity,
            pod_anti_affinity,
        } = a.clone();
        affinity.node_affinity = node_affinity.or(affinity.node_affinity);
        affinity.pod_affinity = pod_affinity.or(affinity.pod_affinity);
        affinity.pod_anti_affinity = pod_anti_affinity.or(affinity.pod_anti_affinity);
        pod.affinity = Some(affinity);
    }
    apply_common(t, pod);
}

/// Writes what a Job running the member's image needs of `template`: to
/// pull the image (pull secrets), to be scheduled where members may run
/// (node selector, tolerations, node affinity, so a volume bound on the
/// Job's node suits the member), priority, and the pod security that
/// owns the volume (`fsGroup`...).
pub fn apply_to_job(template: Option<&MemberPodSpec>, pod: &mut PodSpec) {
    let Some(t) = template else {
        return;
    };
    if let Some(node) = t.affinity.as_ref().and_then(|a| a.node_affinity.clone()) {
        pod.affinity
            .get_or_insert_with(Affinity::default)
            .node_affinity = Some(node);
    }
    apply_common(t, pod);
}

fn apply_common(t: &MemberPodSpec, pod: &mut PodSpec) {
    if !t.node_selector.is_empty() {
        pod.node_selector = Some(t.node_selector.clone());
    }
    if let Some(v) = &t.tolerations {
        pod.tolerations = Some(v.clone());
    }
    if let Some(v) = &t.priority_class_name {
        pod.priority_class_name = Some(v.clone());
    }
    if let Some(v) = &t.image_pull_secrets {
        pod.image_pull_secrets = Some(v.clone());
    }
    if let Some(s) = &t.security_context {
        security(s, pod.security_context.get_or_insert_with(Default::default));
    }
}

/// The pod security fields `s` sets, over the operator's.
fn security(s: &PodSecurity, ctx: &mut PodSecurityContext) {
    let PodSecurity {
        fs_group,
        fs_group_change_policy,
        run_as_user,
        run_as_group,
        supplemental_groups,
        se_linux_options,
    } = s.clone();
    ctx.fs_group = fs_group.or(ctx.fs_group);
    ctx.fs_group_change_policy = fs_group_change_policy.or(ctx.fs_group_change_policy.take());
    ctx.run_as_user = run_as_user.or(ctx.run_as_user);
    ctx.run_as_group = run_as_group.or(ctx.run_as_group);
    ctx.supplemental_groups = supplemental_groups.or(ctx.supplemental_groups.take());
    ctx.se_linux_options = se_linux_options.or(ctx.se_linux_options.take());
}
