//! Continuous backups on Kubernetes: the follower of the cluster's changes
//! ([`crate::backup::follow`], the local platform's) runs in a Deployment
//! of one replica, `CLUSTER-backup-follow`, of the operator's own image:
//! `etcd-operator backup-follow` with the backup claim mounted at `/state`
//! ([`crate::platform::local::follow_job`]), writing delta segments beside
//! the newest good full backup there, through the client Service.
//!
//! A Deployment rather than a Job: Kubernetes itself re-creates its pod
//! after a crash, an eviction or a node's loss, without the operator
//! (which may be down) noticing; a Job would end, or count failures
//! against a backoff limit, and need the operator to re-create it. Its
//! strategy is `Recreate`, so an update stops the old pod before the new
//! one starts: one writer of the chain at a time (and the claim may be
//! ReadWriteOnce). A restarted follower resumes after the last revision in
//! the claim's chain.
//!
//! The Deployment is applied while the spec asks for continuous backups
//! and deleted when it stops asking ([`KubePlatform::sync_follower`],
//! from [`crate::platform::Platform::prepare`]); it is owned by the
//! EtcdCluster, so it goes with it. The follower prints where the chain
//! stands on its log; the operator reads it from there for the status
//! ([`super::follow_status`]).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kube::api::DeleteParams;

use super::backups::KubeBackups;
use super::jobs::{LABEL_JOB, add_client_tls, backup_job, job_labels};
use super::objects::{client_service_name, meta};
use super::{Error, KubePlatform};
use crate::backup::Location;
use crate::backup::job::{Op, StoreArgs, TLS_MOUNT};
use crate::backup::object::ObjectLocation;
use crate::crd::{ContinuousSpec, EtcdCluster, LABEL_CLUSTER};
use crate::member::CLIENT_PORT;

pub use super::follow_status::FOLLOW_CONTAINER;
pub use super::jobs::FOLLOW_KIND;

/// The follower Deployment's name.
pub fn follower_name(cluster: &str) -> String {
    format!("{cluster}-backup-follow")
}

/// The client Service's URL in `namespace`.
pub fn service_url(cluster: &str, namespace: &str) -> String {
    format!(
        "http://{}.{namespace}.svc:{CLIENT_PORT}",
        client_service_name(cluster)
    )
}

/// The follower of `location`'s cluster: `image` (the operator's) runs
/// `etcd-operator backup-follow` on `url` with `claim` at `/state` (and the
/// location's object store, when it has one), as `spec` says. Its pod is a
/// backup Job's (same image, mounts, environment, restricted security)
/// that runs the follower and is restarted always.
pub fn follower(
    location: &Location,
    claim: &str,
    image: &str,
    url: &str,
    spec: &ContinuousSpec,
    tls: bool,
    owner: &OwnerReference,
) -> Deployment {
    let cluster = location.cluster.as_str();
    let name = follower_name(cluster);
    let labels = job_labels(cluster, FOLLOW_KIND);
    let job = backup_job(&name, location, claim, image, &Op::List, owner);
    let mut template = job.spec.map(|s| s.template).unwrap_or_default();
    if let Some(m) = template.metadata.as_mut() {
        m.labels = Some(labels.clone());
    }
    if let Some(pod) = template.spec.as_mut() {
        pod.restart_policy = Some("Always".into());
        // The Jobs go beside the follower, not the follower beside itself.
        pod.affinity = None;
        let mut args = vec![
            "backup-follow".to_string(),
            "--cluster".into(),
            cluster.into(),
            "--url".into(),
            url.into(),
            "--segment-interval".into(),
            spec.segment_interval.clone(),
        ];
        if let Some(n) = spec.max_events {
            args.extend(["--max-events".to_string(), n.to_string()]);
        }
        args.extend(StoreArgs::of(location.object.as_ref()).args());
        if tls {
            args.extend(["--tls-dir".to_string(), TLS_MOUNT.to_string()]);
            let volumes = pod.volumes.get_or_insert_with(Vec::new);
            if let Some(c) = pod.containers.first_mut() {
                add_client_tls(cluster, c, volumes);
            }
        }
        for c in &mut pod.containers {
            c.name = FOLLOW_CONTAINER.into();
            c.args = Some(args.clone());
        }
    }
    let selector = BTreeMap::from([
        (LABEL_CLUSTER.to_string(), cluster.to_string()),
        (LABEL_JOB.to_string(), FOLLOW_KIND.to_string()),
    ]);
    Deployment {
        metadata: meta(name, labels, owner),
        spec: DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(selector),
                ..LabelSelector::default()
            },
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                ..DeploymentStrategy::default()
            }),
            template,
            ..DeploymentSpec::default()
        },
        status: None,
    }
}

impl KubePlatform {
    /// Applies the follower of `cluster` while its (active) spec asks for
    /// continuous backups and a backup image is set, and deletes it when
    /// the spec stops asking. What was last done is kept, so a pass that
    /// changes nothing makes no request.
    pub(super) async fn sync_follower(
        &self,
        cluster: &str,
        resource: &EtcdCluster,
        active: bool,
    ) -> Result<(), Error> {
        if !active {
            return Ok(());
        }
        let name = follower_name(cluster);
        let backup = resource.spec.backup.as_ref();
        let continuous = backup.and_then(|b| b.continuous.as_ref());
        let image = self.backups.image();
        let want = match (continuous, image) {
            (Some(spec), Some(image)) => {
                let reg = self.registration(cluster)?;
                let place = backup.and_then(|b| b.location.as_ref());
                let field = "spec.backup.location.objectStore";
                // Checked when the spec was validated; never a follower
                // that writes to the claim instead of the bucket asked for.
                let object = place
                    .and_then(|l| l.object_store.as_ref())
                    .map(|o| ObjectLocation::parse(o, field))
                    .transpose()
                    .map_err(|problems| {
                        Error::Unsupported(format!(
                            "{field} of {cluster}: {}",
                            problems
                                .iter()
                                .map(|(f, m)| format!("{f}: {m}"))
                                .collect::<Vec<_>>()
                                .join("; ")
                        ))
                    })?;
                let location = Location {
                    claim: place.and_then(|l| l.persistent_volume_claim.clone()),
                    object,
                    ..Location::of(cluster, None)
                };
                let tls = resource
                    .spec
                    .tls
                    .as_ref()
                    .is_some_and(|t| t.client.is_some());
                let url = crate::tls::with_scheme(&service_url(cluster, &self.namespace), tls);
                let claim = KubeBackups::claim(&location);
                Some(follower(
                    &location, &claim, image, &url, spec, tls, &reg.owner,
                ))
            }
            _ => None,
        };
        let key = want
            .as_ref()
            .map(|d| serde_json::to_string(d).unwrap_or_default());
        let known = {
            let done = self.followers.lock().unwrap_or_else(|e| e.into_inner());
            done.get(cluster).cloned()
        };
        if known.as_ref() == Some(&key) {
            return Ok(());
        }
        match (&want, known) {
            // Not asked for since this operator started: a follower left
            // from before it started is deleted once, when backups are on
            // (one request per cluster, not one per pass).
            (None, None) if backup.is_none() => return Ok(()),
            (Some(d), _) => {
                if let Some(found) = self.get::<Deployment>(&name).await? {
                    let reg = self.registration(cluster)?;
                    Self::ours(&reg, &found.metadata, &format!("deployment {name}"))?;
                }
                self.apply(&name, d).await?;
                tracing::info!(%cluster, deployment = %name, "continuous backup follower applied");
            }
            (None, _) => {
                self.remove::<Deployment>(&name, &DeleteParams::background())
                    .await?;
                tracing::debug!(%cluster, deployment = %name, "no continuous backup follower");
            }
        }
        let mut done = self.followers.lock().unwrap_or_else(|e| e.into_inner());
        done.insert(cluster.to_string(), key);
        Ok(())
    }
}
