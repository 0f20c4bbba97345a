//! What the manifests ask for: each cluster's checked spec (by
//! [`validate`], then by what only the local platform can check) or why it
//! is invalid, and the manifest problems that name no cluster.

use std::collections::{HashMap, HashSet};

use super::{FileProblem, Local, Verdict};
use crate::backup::Location;
use crate::controller::SpecState;
use crate::manifest::Loaded;
use crate::names::check_cluster_name;
use crate::platform::Platform;
use crate::validate::{ValidSpec, validate};

impl Local {
    /// What every manifest asks for, by cluster name, and the problems that
    /// name no cluster.
    pub(super) async fn desired(
        &mut self,
        loaded: Loaded,
    ) -> (HashMap<String, SpecState>, Vec<FileProblem>) {
        let mut wanted = HashMap::new();
        let mut orphans = Vec::new();
        for (name, m) in loaded.clusters {
            let file = m.file.display().to_string();
            // Checked when the manifest was read; checked again here, as
            // the name is about to become a folder's name.
            if let Err(e) = check_cluster_name(&name) {
                orphans.push(FileProblem {
                    file: m.file.clone(),
                    message: format!("metadata.name: {e}"),
                });
                continue;
            }
            let checked = match validate(&name, &m.cluster.spec, &*self.opts.binaries) {
                Ok(spec) => self.local_checks(&name, &spec).await.map(|()| spec),
                Err(e) => Err(e.to_string()),
            };
            let spec = match checked {
                Ok(spec) => SpecState::Valid {
                    resource: Box::new(m.cluster),
                    spec: Box::new(spec),
                    source: Some(m.file),
                },
                Err(e) => SpecState::Invalid {
                    resource: Some(Box::new(m.cluster)),
                    message: format!("{file}: {e}"),
                },
            };
            wanted.insert(name, spec);
        }
        let mut logged = HashSet::new();
        for p in loaded.problems {
            let message = format!("{}: {}", p.file.display(), p.message);
            // Logged once, not at every rescan.
            if !self.logged.contains(&message) {
                tracing::error!("{message}");
            }
            logged.insert(message.clone());
            // Every cluster the file names, and every one it defined before
            // (a name may be unreadable now): none of them reads as deleted.
            let mut names: Vec<String> = p
                .clusters
                .iter()
                .filter(|n| check_cluster_name(n).is_ok())
                .cloned()
                .collect();
            for name in self.clusters_from(&p.file).await {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            if names.is_empty() {
                orphans.push(FileProblem {
                    file: p.file.clone(),
                    message: p.message.clone(),
                });
            }
            for name in names {
                wanted.insert(
                    name,
                    SpecState::Invalid {
                        resource: None,
                        message: message.clone(),
                    },
                );
            }
        }
        self.logged = logged;
        (wanted, orphans)
    }

    /// What only the local platform can check: backup folders, and that a
    /// restore source exists and is a snapshot (only when creating; the
    /// slow part of that check runs off this loop, [`super::RestoreChecks`]).
    async fn local_checks(&self, name: &str, spec: &ValidSpec) -> Result<(), String> {
        if let Some(refused) = kubernetes_members(spec) {
            return Err(refused);
        }
        let stores = [
            (
                "backup",
                spec.backup.as_ref().and_then(|b| b.object.as_ref()),
            ),
            ("restore", spec.restore_from.object.as_ref()),
        ];
        // Kubernetes' ways to give a store its credentials; locally the
        // operator's own environment does.
        type Set = fn(&crate::backup::object::ObjectLocation) -> bool;
        let kube_credentials: [(&str, Set, &str); 2] = [
            (
                "credentialsSecret",
                |o| o.secret.is_some(),
                "a Secret carries the credentials on Kubernetes; the local platform reads the \
                 operator's own environment (AWS_ACCESS_KEY_ID, ...)",
            ),
            (
                "serviceAccountName",
                |o| o.service_account.is_some(),
                "a workload identity comes with a Kubernetes service account; the local \
                 platform reads the operator's own environment (a web identity token file, a \
                 key, ...)",
            ),
        ];
        for (name, set, why) in kube_credentials {
            if let Some((field, _)) = stores.iter().find(|(_, o)| o.is_some_and(set)) {
                return Err(format!(
                    "spec.{field}.location.objectStore.{name}: {why}: drop it"
                ));
            }
        }
        if let Some(b) = &spec.backup {
            let kube_only = [
                ("persistentVolumeClaim", b.persistent_volume_claim.is_some()),
                ("size", b.claim_size.is_some()),
                ("storageClassName", b.storage_class.is_some()),
            ];
            if let Some((field, _)) = kube_only.iter().find(|(_, set)| *set) {
                return Err(format!(
                    "spec.backup.location.{field}: volume claims exist on Kubernetes only; on \
                     the local platform use spec.backup.location.path (a folder)"
                ));
            }
            if let Some(path) = &b.path {
                crate::platform::local::backup_place::check(&self.opts.state_dir, name, path)?;
            }
        }
        let record = self.platform.load_record(name).await.ok().flatten();
        let created = record
            .as_ref()
            .is_some_and(|r| r.bootstrapped || !r.initial.is_empty());
        match (&spec.restore, &record) {
            (Some(source), _) if !created => {
                if spec.restore_from.claim.is_some() {
                    return Err(
                        "spec.restore.location.persistentVolumeClaim: volume claims exist \
                         on Kubernetes only; on the local platform use spec.restore.location.path \
                         (a folder)"
                            .into(),
                    );
                }
                let location = Location::restore(name, source, &spec.restore_from);
                let store = self.platform.backups();
                match self.restores.verdict(name, source, &store, &location) {
                    Verdict::Good => Ok(()),
                    Verdict::Bad(e) => {
                        Err(format!("spec.restore.backup: {e}; nothing was created"))
                    }
                    Verdict::Checking(m) => Err(format!("spec.restore.backup: {m}")),
                }
            }
            (restore, Some(r)) if created && *restore != r.created_from => Err(format!(
                "spec.restore.backup: a cluster is restored only when it is created, and {name} \
                 was created {}; put it back, or create a new cluster to restore into",
                match &r.created_from {
                    Some(b) => format!("from {b:?}"),
                    None => "empty".into(),
                }
            )),
            _ => Ok(()),
        }
    }
}

/// The first of the fields about member pods and their claims that only
/// Kubernetes has (`spec.storage.size` and `storageClassName`,
/// `spec.image`, `spec.pod.*`), refused by name: a local member is a
/// process on this machine with its data in a folder of the state folder.
pub(super) fn kubernetes_members(spec: &ValidSpec) -> Option<String> {
    let claims = "volume claims exist on Kubernetes only; a local member's data is a folder \
                  under the state folder, as large as its disk allows: drop it";
    if spec.volumes.size.is_some() {
        return Some(format!("spec.storage.size: {claims}"));
    }
    if spec.volumes.class.is_some() {
        return Some(format!("spec.storage.storageClassName: {claims}"));
    }
    if spec.pod.repository.is_some() {
        return Some(
            "spec.image.repository: images are Kubernetes'; the local platform runs the etcd \
             binary of spec.version (see `etcd-operator run --help` on where they are found): \
             drop it"
                .into(),
        );
    }
    let pod = spec.pod.template.as_ref()?;
    let set = serde_json::to_value(pod).ok()?;
    let field = set.as_object()?.keys().next()?.clone();
    Some(format!(
        "spec.pod.{field}: member pods are Kubernetes'; local members are processes on this \
         machine (no scheduling, resources or pod metadata): drop spec.pod"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(spec: serde_json::Value) -> ValidSpec {
        struct Any;
        impl crate::validate::Versions for Any {
            fn check(&self, _: crate::version::Version) -> Result<(), String> {
                Ok(())
            }
        }
        let mut doc = serde_json::json!({"size": 3, "version": "3.5.1"});
        if let (Some(d), Some(s)) = (doc.as_object_mut(), spec.as_object()) {
            d.extend(s.clone());
        }
        let spec = serde_json::from_value(doc).expect("a spec");
        validate("demo", &spec, &Any).expect("valid")
    }

    #[test]
    fn kubernetes_only_member_fields_are_refused_by_name() {
        assert_eq!(kubernetes_members(&valid(serde_json::json!({}))), None);
        for (spec, field) in [
            (
                serde_json::json!({"storage": {"size": "10Gi"}}),
                "spec.storage.size: ",
            ),
            (
                serde_json::json!({"storage": {"storageClassName": "fast"}}),
                "spec.storage.storageClassName: ",
            ),
            (
                serde_json::json!({"image": {"repository": "mirror.local/etcd"}}),
                "spec.image.repository: ",
            ),
            (
                serde_json::json!({"pod": {"resources": {"requests": {"cpu": "1"}}}}),
                "spec.pod.resources: ",
            ),
            (
                serde_json::json!({"pod": {"nodeSelector": {"disk": "ssd"}}}),
                "spec.pod.nodeSelector: ",
            ),
        ] {
            let refused = kubernetes_members(&valid(spec.clone())).unwrap_or_default();
            assert!(refused.starts_with(field), "{spec}: {refused}");
        }
    }
}
