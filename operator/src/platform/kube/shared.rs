//! What a cluster's members share (the Services and the disruption
//! budget), and the calls about all members at once: retiring them and
//! deleting the cluster.

use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch};

use super::members::owned_by;
use super::objects::{
    LABEL_RETIRED, LABEL_RETIRED_FROM, client_service, client_service_name, disruption_budget,
    label_value, pdb_name, peer_service, peer_service_name, record_name,
};
use super::{Error, KubePlatform};
use crate::crd::{LABEL_CLUSTER, LABEL_MANAGED_BY, MANAGED_BY};
use crate::platform::Platform;

impl KubePlatform {
    /// Applies the headless and client Services and the disruption budget
    /// unless they were applied for this resource and size already.
    /// [`crate::platform::Platform::prepare`] calls it for every active spec
    /// the controller reconciles (so a resize updates the budget); a
    /// member's create and start call it too.
    pub(super) async fn ensure_shared(&self, cluster: &str) -> Result<(), Error> {
        let reg = self.registration(cluster)?;
        if reg.shared == Some(reg.size) {
            return Ok(());
        }
        let owner = &reg.owner;
        // Never take over an object of the same name that is not this
        // resource's (a user's Service, or an earlier resource's being
        // collected): apply forces, so look first.
        for name in [peer_service_name(cluster), client_service_name(cluster)] {
            if let Some(s) = self.get::<Service>(&name).await? {
                Self::ours(&reg, &s.metadata, &format!("service {name}"))?;
            }
        }
        let pdb = pdb_name(cluster);
        if let Some(b) = self.get::<PodDisruptionBudget>(&pdb).await? {
            Self::ours(&reg, &b.metadata, &format!("poddisruptionbudget {pdb}"))?;
        }
        self.apply(&peer_service_name(cluster), &peer_service(cluster, owner))
            .await?;
        let client = client_service(cluster, owner);
        self.apply(&client_service_name(cluster), &client).await?;
        let budget = disruption_budget(cluster, reg.size, owner);
        self.apply(&pdb, &budget).await?;
        let mut clusters = self.clusters.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = clusters.get_mut(cluster)
            && r.owner.uid == owner.uid
        {
            r.shared = Some(reg.size);
        }
        Ok(())
    }

    /// Stops every member and keeps their claims: relabelled
    /// `etcdoperator.dev/retired=TAG` and `etcdoperator.dev/retired-from=CLUSTER`,
    /// without the cluster label, so they are no members any more. They keep
    /// their ownerReference: deleting the resource deletes them. emptyDir
    /// data goes with the pods.
    pub(super) async fn retire(&self, cluster: &str, tag: &str) -> Result<String, Error> {
        let reg = self.registration(cluster)?;
        let (pods, claims) = self.owned(cluster, &reg.owner.uid).await?;
        let tag = label_value(tag);
        for claim in &claims {
            let patch = serde_json::json!({"metadata": {"labels": {
                LABEL_CLUSTER: null,
                LABEL_RETIRED: tag,
                LABEL_RETIRED_FROM: cluster,
            }}});
            self.merge::<PersistentVolumeClaim>(&claim.name_any(), Patch::Merge(patch))
                .await?;
        }
        let now = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        for pod in &pods {
            self.remove::<Pod>(&pod.name_any(), &now).await?;
        }
        Ok(format!(
            "persistentvolumeclaims labelled {LABEL_RETIRED}={tag} in namespace {} ({} claims)",
            self.namespace,
            claims.len()
        ))
    }

    /// Deletes every pod and claim (retired ones too), the Services, the
    /// budget and the record of `cluster` that its registered resource owns
    /// (all of them when it is not registered). The controller leaves this
    /// to the garbage collector; it is here for the [`crate::platform::Platform`]
    /// contract.
    pub(super) async fn delete_all(&self, cluster: &str) -> Result<(), Error> {
        let uid = self.registration(cluster).ok().map(|r| r.owner.uid);
        let ours = |meta: &_| uid.as_deref().is_none_or(|u| owned_by(meta, u));
        let selectors = [
            format!("{LABEL_CLUSTER}={cluster},{LABEL_MANAGED_BY}={MANAGED_BY}"),
            format!("{LABEL_RETIRED_FROM}={cluster},{LABEL_MANAGED_BY}={MANAGED_BY}"),
        ];
        let dp = DeleteParams::background();
        for selector in &selectors {
            let lp = ListParams::default().labels(selector);
            let list = |kind: &str| Error::api(format!("cannot list the {kind} of {cluster}"));
            let pods = self.api::<Pod>().list(&lp).await.map_err(list("pods"))?;
            for p in pods.items.iter().filter(|p| ours(&p.metadata)) {
                self.remove::<Pod>(&p.name_any(), &dp).await?;
            }
            let claims = self.api::<PersistentVolumeClaim>().list(&lp).await;
            for c in claims
                .map_err(list("volume claims"))?
                .items
                .iter()
                .filter(|c| ours(&c.metadata))
            {
                self.remove::<PersistentVolumeClaim>(&c.name_any(), &dp)
                    .await?;
            }
            let secrets = self.api::<Secret>().list(&lp).await;
            for s in secrets
                .map_err(list("secrets"))?
                .items
                .iter()
                .filter(|s| ours(&s.metadata))
            {
                self.remove::<Secret>(&s.name_any(), &dp).await?;
            }
        }
        self.remove::<Service>(&peer_service_name(cluster), &dp)
            .await?;
        self.remove::<Service>(&client_service_name(cluster), &dp)
            .await?;
        self.remove::<PodDisruptionBudget>(&pdb_name(cluster), &dp)
            .await?;
        self.remove::<ConfigMap>(&record_name(cluster), &dp).await?;
        self.forget(cluster);
        Ok(())
    }
}
