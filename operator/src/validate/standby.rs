//! `spec.standby`: whose standby a cluster is and where that cluster's
//! backups are.

use std::path::PathBuf;

use super::{RestoreFrom, check_name};
use crate::backup::object::ObjectLocation;
use crate::crd::EtcdClusterSpec;

/// A checked `spec.standby`.
#[derive(Clone, Debug, PartialEq)]
pub struct Standby {
    /// The source cluster and where its backups are (`until` unset).
    pub from: RestoreFrom,
    /// Promote (stop following).
    pub promote: bool,
}

impl Standby {
    /// The source cluster.
    pub fn source(&self) -> &str {
        self.from.cluster.as_deref().unwrap_or_default()
    }
}

/// Checks `spec.standby` of the cluster `name`, one error per problem.
pub(super) fn check(
    name: &str,
    spec: &EtcdClusterSpec,
    err: &mut impl FnMut(&str, String),
) -> Option<Standby> {
    let s = spec.standby.as_ref()?;
    let cluster = s.cluster.trim();
    let mut ok = true;
    if let Err(e) = check_name(cluster) {
        err("spec.standby.cluster", e);
        ok = false;
    } else if cluster == name {
        err(
            "spec.standby.cluster",
            format!(
                "names this cluster itself ({name}); a standby follows another cluster: name \
                 the source (the primary)"
            ),
        );
        ok = false;
    }
    if spec.restore.is_some() {
        err(
            "spec.standby",
            "a standby is created from its source's newest backup; drop spec.restore (or \
             spec.standby, to restore one backup and go on alone)"
                .into(),
        );
        ok = false;
    }
    if let Some(l) = &s.location {
        let mut bad = false;
        super::restore::location(l, "spec.standby.location", &mut |f, m| {
            bad = true;
            err(f, m);
        });
        if l.persistent_volume_claim.is_some() {
            err(
                "spec.standby.location.persistentVolumeClaim",
                "a standby follows its source from a folder or an object store (local platform \
                 for now); name the source's objectStore or path"
                    .into(),
            );
            bad = true;
        }
        ok &= !bad;
    }
    if !ok {
        return None;
    }
    let location = s.location.as_ref();
    Some(Standby {
        from: RestoreFrom {
            cluster: Some(cluster.to_string()),
            path: location.and_then(|l| l.path.clone()).map(PathBuf::from),
            claim: None,
            object: location
                .and_then(|l| l.object_store.as_ref())
                .and_then(|o| ObjectLocation::parse(o, "spec.standby.location.objectStore").ok()),
            until: None,
        },
        promote: s.promote,
    })
}
