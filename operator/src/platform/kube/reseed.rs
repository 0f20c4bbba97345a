//! The seed of a rebuild after a quorum loss, on Kubernetes: the member's
//! pod re-created on its volume claim with `--force-new-cluster`, in a pod
//! that runs once (`restartPolicy: Never`, see [`super::pod::restart_policy`]):
//! the kubelet never starts that etcd again with the flag, which would drop
//! the members added since. Once the seed serves, only the claim's record
//! drops the flag; the seed's pod goes on, and whenever it ends the member
//! is started again from that record, without the flag. (A seed pod made
//! by an older operator, restarted always, is re-created without the
//! flag.) The claim records the flag first, so a rebuild cut short is
//! finished by the next start. (Its Event goes through
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
        // The pod needs no change when it runs as asked, or when the flag
        // ends on a seed that runs once: its etcd is never started again
        // with it.
        let runs_once = pod
            .as_ref()
            .and_then(|p| p.spec.as_ref()?.restart_policy.as_deref())
            == Some("Never");
        let pod_settled = match pod_flag {
            Some(flag) => flag == on || (!on && runs_once),
            None => false,
        };
        if recorded.force_new_cluster == on && pod_settled {
            return Ok(());
        }
        recorded.force_new_cluster = on;
        let annotations = serde_json::json!({ANNOTATION_CONFIG: config::to_json(&recorded)});
        let patch = serde_json::json!({"metadata": {"annotations": annotations}});
        self.merge::<PersistentVolumeClaim>(&claim_name, Patch::Merge(patch))
            .await?;
        if pod_settled {
            tracing::info!(
                %cluster, %member,
                "the seed serves: its claim no longer asks for --force-new-cluster; its pod, \
                 which runs once, goes on"
            );
            return Ok(());
        }
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
