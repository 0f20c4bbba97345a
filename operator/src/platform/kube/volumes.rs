//! Growing members' data volumes in place (`spec.storage.size` grown):
//! whether a claim's storage class allows it (`allowVolumeExpansion`, read
//! when a claim asks less than the spec), and the request patched, one
//! claim per step (the plan chooses which, one member at a time). The
//! storage driver grows the volume, and the kubelet its filesystem, while
//! the pod runs; a driver that only resizes offline leaves the claim
//! `FileSystemResizePending`, and the plan restarts that member.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, Patch};

use super::objects::claim_name;
use super::{Error, KubePlatform, Registration};
use crate::kube_names::size_bytes;
use crate::platform::PlatformMember;

impl KubePlatform {
    /// Fills in, for each member whose claim asks less than the spec's
    /// size, whether its class allows expansion (each class read once).
    pub(super) async fn volume_classes(&self, reg: &Registration, members: &mut [PlatformMember]) {
        let Some(want) = reg.claims.size.as_deref().and_then(size_bytes) else {
            return;
        };
        let mut known: BTreeMap<String, Option<bool>> = BTreeMap::new();
        let small = members
            .iter_mut()
            .filter_map(|m| m.volume.as_mut())
            .filter(|v| v.requested < want);
        for v in small {
            let Some(class) = v.class.clone() else {
                continue;
            };
            if !known.contains_key(&class) {
                let expands = self.class_expands(&class).await;
                known.insert(class.clone(), expands);
            }
            v.expandable = known.get(&class).copied().flatten();
        }
    }

    /// Whether storage class `class` allows expansion; `None` when it
    /// cannot be read (a namespaced install has no right to read classes:
    /// growing is then tried, and the API server refuses it if it must).
    pub(super) async fn class_expands(&self, class: &str) -> Option<bool> {
        let api: Api<StorageClass> = Api::all(self.client.clone());
        match api.get_opt(class).await {
            Ok(Some(sc)) => Some(sc.allow_volume_expansion == Some(true)),
            Ok(None) => None,
            Err(e) => {
                tracing::debug!(%class, "cannot read the storage class: {e}");
                None
            }
        }
    }

    /// Asks member `member`'s claim for `size` (a merge patch of its
    /// request; the claim is the resource's own).
    pub(super) async fn expand(
        &self,
        cluster: &str,
        member: &str,
        size: &str,
    ) -> Result<(), Error> {
        let reg = self.registration(cluster)?;
        let name = claim_name(member);
        let claim = self.get::<PersistentVolumeClaim>(&name).await?;
        let Some(claim) = claim else {
            return Err(Error::Busy(format!(
                "member {member} has no volume claim {name} to grow"
            )));
        };
        Self::ours(&reg, &claim.metadata, &format!("volume claim {name}"))?;
        tracing::info!(%cluster, %member, %size, "growing the member's volume claim");
        let patch = serde_json::json!({"spec": {"resources": {"requests": {"storage": size}}}});
        self.merge::<PersistentVolumeClaim>(&name, Patch::Merge(patch))
            .await
    }
}
