//! The seed of a rebuild after a quorum loss, on Kubernetes: the member's
//! pod re-created on its volume claim with `--force-new-cluster`, and once
//! it serves re-created without it (a pod's arguments cannot change, and
//! the kubelet would restart the container with the flag, dropping the
//! members added since). The claim records the flag first, so a rebuild
//! cut short is finished by the next start. (Its Event goes through
//! `Platform::announce`.)

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::ResourceExt;
use kube::api::Patch;

use super::config::{self, ANNOTATION_CONFIG};
use super::members::{owned_by, pod_running};
use super::objects::claim_name;
use super::pod::member_pod;
use super::{Error, KubePlatform};
use crate::crd::StoragePolicy;

impl KubePlatform {
    /// Re-creates `member`'s pod on its claim with `--force-new-cluster`
    /// set to `on`; nothing when its pod already runs so.
    pub(super) async fn set_force_new_cluster(
        &self,
        cluster: &str,
        member: &str,
        on: bool,
    ) -> Result<(), Error> {
        let reg = self.registration(cluster)?;
        let claim_name = claim_name(member);
        let claim = self
            .get::<PersistentVolumeClaim>(&claim_name)
            .await?
            .filter(|c| owned_by(&c.metadata, &reg.owner.uid))
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "member {member} of {cluster} has no volume claim: its data goes with its \
                     pod, so it cannot be restarted with --force-new-cluster"
                ))
            })?;
        let object = format!("persistentvolumeclaims/{claim_name}");
        let mut recorded =
            config::read(&object, claim.annotations().into())?.ok_or_else(|| Error::Config {
                object: object.clone(),
                message: format!("no annotation {ANNOTATION_CONFIG}"),
            })?;
        let pod = self
            .get::<Pod>(member)
            .await?
            .filter(|p| owned_by(&p.metadata, &reg.owner.uid));
        let pod_flag = match &pod {
            Some(p) if pod_running(p) => {
                config::read(&format!("pods/{member}"), p.annotations().into())?
                    .map(|c| c.force_new_cluster)
            }
            _ => None,
        };
        if recorded.force_new_cluster == on && pod_flag == Some(on) {
            return Ok(());
        }
        recorded.force_new_cluster = on;
        let annotations = serde_json::json!({ANNOTATION_CONFIG: config::to_json(&recorded)});
        let patch = serde_json::json!({"metadata": {"annotations": annotations}});
        self.merge::<PersistentVolumeClaim>(&claim_name, Patch::Merge(patch))
            .await?;
        if let Some(p) = &pod {
            self.clear_pod(p).await?;
        }
        tracing::info!(
            %cluster, %member, force_new_cluster = on,
            "re-creating the pod on its claim"
        );
        let pod = member_pod(
            cluster,
            &recorded,
            StoragePolicy::Persistent,
            &self.image,
            &reg.owner,
        );
        self.apply(member, &pod).await
    }
}
