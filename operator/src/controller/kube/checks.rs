//! What the controller takes of a resource on Kubernetes: the spec
//! checked as on every platform, and what only makes sense on another
//! platform or cannot be done here, as field errors.

use kube::ResourceExt;

use super::SpecState;
use crate::crd::EtcdCluster;
use crate::platform::kube::KubeVersions;
use crate::validate::validate;

/// What only makes sense on another platform, or cannot be done here, as
/// field errors: a backup folder (backups go to a volume claim or an
/// object store), a snapshot file path to restore from (name a backup), a
/// restore into members without volume claims (their data is restored
/// into the claim before the pod starts).
pub fn kube_checks(resource: &EtcdCluster) -> Vec<String> {
    let spec = &resource.spec;
    let mut errors = Vec::new();
    let location = spec.backup.as_ref().and_then(|b| b.location.as_ref());
    if location.is_some_and(|l| l.path.is_some()) {
        errors.push(
            "spec.backup.location.path: a folder is where the local platform keeps backups; on \
             Kubernetes they go to a volume claim (spec.backup.location.persistentVolumeClaim, \
             default CLUSTER-backups, created when missing) or an object store \
             (spec.backup.location.objectStore)"
                .to_string(),
        );
    }
    if let Some(r) = &spec.restore
        && crate::names::is_snapshot_path(&r.backup)
    {
        errors.push(format!(
            "spec.restore.backup: {} is a file path; on Kubernetes name a backup (as \
             status.backup.lastBackup shows it), with spec.restore.cluster and \
             spec.restore.location.persistentVolumeClaim when it is not in CLUSTER-backups",
            crate::names::quote(&r.backup, 80)
        ));
    }
    if spec
        .restore
        .as_ref()
        .and_then(|r| r.location.as_ref())
        .is_some_and(|l| l.path.is_some())
    {
        errors.push(
            "spec.restore.location.path: folders are the local platform's; on Kubernetes name \
             the claim holding the backups in spec.restore.location.persistentVolumeClaim"
                .to_string(),
        );
    }
    errors.extend(standby_checks(spec));
    let restores = spec.restore.is_some()
        || spec
            .recovery
            .as_ref()
            .is_some_and(|r| r.restore_from_backup);
    if restores && spec.storage.policy == crate::crd::StoragePolicy::Ephemeral {
        errors.push(
            "spec.storage.policy: Ephemeral members cannot be restored from a backup on Kubernetes (the \
             data is restored into each member's volume claim before its pod starts); use \
             Persistent, or drop spec.restore and spec.recovery.restoreFromBackup"
                .to_string(),
        );
    }
    errors
}

/// What a standby needs on Kubernetes: the source's backups in an object
/// store (the operator reads them itself, several times a second), its
/// data restored into volume claims, and a watch without TLS files (a
/// folder of the operator's is no place a user can put them).
fn standby_checks(spec: &crate::crd::EtcdClusterSpec) -> Vec<String> {
    let Some(standby) = &spec.standby else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    let location = standby.location.as_ref();
    if location.is_none_or(|l| l.object_store.is_none()) {
        errors.push(
            "spec.standby.location: on Kubernetes a standby follows its source through the \
             source's object store: name it in spec.standby.location.objectStore, as the \
             source's spec.backup.location.objectStore does (with a credentialsSecret in this \
             namespace that may read the bucket)"
                .to_string(),
        );
    }
    if location.is_some_and(|l| l.path.is_some()) {
        errors.push(
            "spec.standby.location.path: folders are the local platform's; on Kubernetes name \
             the source's spec.standby.location.objectStore"
                .to_string(),
        );
    }
    if standby
        .stream
        .as_ref()
        .is_some_and(|s| s.tls_path.is_some())
    {
        errors.push(
            "spec.standby.stream.tlsPath: a folder of the operator's is the local platform's; \
             on Kubernetes follow https:// sources through the store (drop spec.standby.stream) \
             or stream from http:// endpoints"
                .to_string(),
        );
    }
    if spec.storage.policy == crate::crd::StoragePolicy::Ephemeral {
        errors.push(
            "spec.storage.policy: a standby's members are restored from the source's backup \
             into their volume claims on Kubernetes; use Persistent"
                .to_string(),
        );
    }
    errors
}

/// The spec of `resource` as the controller takes it: checked by
/// [`validate`] (with the versions that have an image) and [`kube_checks`].
pub fn spec_state(resource: &EtcdCluster) -> SpecState {
    let name = resource.name_any();
    let mut errors = Vec::new();
    let valid =
        validate(&name, &resource.spec, &KubeVersions).map_err(|e| errors.push(e.to_string()));
    errors.extend(kube_checks(resource));
    match valid {
        Ok(spec) if errors.is_empty() => SpecState::Valid {
            resource: Box::new(resource.clone()),
            spec: Box::new(spec),
            source: None,
        },
        _ => SpecState::Invalid {
            resource: Some(Box::new(resource.clone())),
            message: errors.join("; "),
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The resource `default/dr` with `spec`.
    fn resource(spec: serde_json::Value) -> EtcdCluster {
        let mut r = EtcdCluster::new("dr", serde_json::from_value(spec).expect("a spec"));
        r.metadata.namespace = Some("default".into());
        r.metadata.uid = Some("uid-dr".into());
        r
    }

    fn standby(location: serde_json::Value, storage: &str) -> EtcdCluster {
        resource(json!({
            "size": 3, "version": "3.5.1", "storage": {"policy": storage},
            "standby": {"cluster": "src", "location": location},
        }))
    }

    fn bucket() -> serde_json::Value {
        json!({"objectStore": {"url": "s3://backups/prod", "credentialsSecret": "s3-keys"}})
    }

    #[test]
    fn a_standby_through_an_object_store_is_taken() {
        let r = standby(bucket(), "Persistent");
        assert_eq!(kube_checks(&r), Vec::<String>::new());
        assert!(matches!(spec_state(&r), SpecState::Valid { .. }));
    }

    #[test]
    fn a_standby_without_a_bucket_or_with_local_things_is_refused_by_field() {
        let cases = [
            (
                standby(json!({"path": "/backups"}), "Persistent"),
                "spec.standby.location.path",
            ),
            (
                resource(json!({
                    "size": 1, "version": "3.5.1", "storage": {"policy": "Persistent"},
                    "standby": {"cluster": "src"},
                })),
                "spec.standby.location: on Kubernetes",
            ),
            (standby(bucket(), "Ephemeral"), "spec.storage.policy"),
            (
                resource(json!({
                    "size": 1, "version": "3.5.1", "storage": {"policy": "Persistent"},
                    "standby": {"cluster": "src", "location": bucket(), "stream": {
                        "endpoints": ["https://10.0.0.1:2379"], "tlsPath": "/tls",
                    }},
                })),
                "spec.standby.stream.tlsPath",
            ),
        ];
        for (r, field) in cases {
            let errors = kube_checks(&r);
            assert!(
                errors.iter().any(|e| e.starts_with(field)),
                "{field}: {errors:?}"
            );
            let SpecState::Invalid { message, .. } = spec_state(&r) else {
                panic!("{field}: taken");
            };
            assert!(message.contains(field), "{message}");
        }
    }
}
