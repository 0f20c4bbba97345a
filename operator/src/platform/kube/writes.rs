//! Writes to members: create, start, upgrade and delete, and the started
//! mark. Every call is idempotent; a call that meets an object still going
//! away (terminating, or an earlier resource's) waits a bounded time or
//! fails as busy, and the next reconcile tries again.

use std::fmt::Debug;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::wait::{self, await_condition, conditions};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::config::{self, ANNOTATION_CONFIG, ANNOTATION_STARTED};
use super::error::is_not_found;
use super::members::{Mark, owned_by, pod_running};
use super::objects::{claim_name, data_claim};
use super::pod::{CONTAINER, image, member_pod, pod_args, readiness_path, tls_secret_name};
use super::trouble::image_unavailable;
use super::{Error, FIELD_MANAGER, KubePlatform, Registration};
use crate::backup::RestoreSource;
use crate::crd::StoragePolicy;
use crate::member::flags::{COMMIT_EVERY_WRITE, PRE_VOTE};
use crate::member::{MemberConfig, Settings};
use crate::version::Version;

/// How long a deleted pod may take to go before the call gives up as busy.
pub const POD_GONE_WAIT: Duration = Duration::from_secs(45);

type Namespaced = k8s_openapi::NamespaceResourceScope;

/// The error of a watch that could not say whether pod `name` is gone.
fn watch_failed(name: &str, e: watcher::Error) -> Error {
    let what = format!("cannot watch pod {name} go");
    match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => Error::api(what)(e),
        other => Error::Busy(format!("{what}: {other}")),
    }
}

impl KubePlatform {
    pub(super) async fn get<K>(&self, name: &str) -> Result<Option<K>, Error>
    where
        K: Resource<Scope = Namespaced, DynamicType = ()> + Clone + DeserializeOwned + Debug,
    {
        let what = format!("cannot read {} {name}", K::kind(&()));
        self.api::<K>()
            .get_opt(name)
            .await
            .map_err(Error::api(what))
    }

    pub(super) async fn apply<K>(&self, name: &str, object: &K) -> Result<(), Error>
    where
        K: Resource<Scope = Namespaced, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + Serialize
            + Debug,
    {
        crate::fence::check()?;
        let what = format!("cannot apply {} {name}", K::kind(&()));
        let params = Self::apply_params();
        let patch = Patch::Apply(object);
        let done = self.api::<K>().patch(name, &params, &patch).await;
        self.lists.wrote::<K>();
        done.map_err(Error::api(what))?;
        Ok(())
    }

    pub(super) async fn merge<K>(
        &self,
        name: &str,
        patch: Patch<serde_json::Value>,
    ) -> Result<(), Error>
    where
        K: Resource<Scope = Namespaced, DynamicType = ()> + Clone + DeserializeOwned + Debug,
    {
        crate::fence::check()?;
        let what = format!("cannot patch {} {name}", K::kind(&()));
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        let done = self.api::<K>().patch(name, &params, &patch).await;
        self.lists.wrote::<K>();
        done.map_err(Error::api(what))?;
        Ok(())
    }

    /// Deletes `name`; already gone is done.
    pub(super) async fn remove<K>(&self, name: &str, dp: &DeleteParams) -> Result<(), Error>
    where
        K: Resource<Scope = Namespaced, DynamicType = ()> + Clone + DeserializeOwned + Debug,
    {
        crate::fence::check()?;
        let done = self.api::<K>().delete(name, dp).await;
        self.lists.wrote::<K>();
        match done {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(Error::api(format!("cannot delete {} {name}", K::kind(&())))(e)),
        }
    }

    /// Fails as busy when `meta` is an earlier resource's.
    pub(super) fn ours(reg: &Registration, meta: &ObjectMeta, what: &str) -> Result<(), Error> {
        if owned_by(meta, &reg.owner.uid) {
            return Ok(());
        }
        Err(Error::Busy(format!(
            "{what} is not this EtcdCluster {}'s (an earlier resource's being deleted, or \
             someone else's); waiting for it to go",
            reg.owner.name
        )))
    }

    /// Deletes a pod that does not run (gracefully, that very pod) and
    /// waits until it is gone: on a watch of that pod (kube-runtime's
    /// `await_condition`), so the call returns as soon as the API server
    /// says so, not at the next of a series of polls (every 500 ms
    /// before), and asks nothing more meanwhile.
    pub(super) async fn clear_pod(&self, pod: &Pod) -> Result<(), Error> {
        let name = pod.name_any();
        if pod.metadata.deletion_timestamp.is_none() {
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: pod.uid(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            self.remove::<Pod>(&name, &dp).await?;
        }
        // Gone, or another pod (another uid) took its name.
        let uid = pod.uid().unwrap_or_default();
        let gone = await_condition(self.api::<Pod>(), &name, conditions::is_deleted(&uid));
        match tokio::time::timeout(POD_GONE_WAIT, gone).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(wait::Error::ProbeFailed(e))) => Err(watch_failed(&name, e)),
            Err(_) => Err(Error::Busy(format!(
                "pod {name} is still terminating after {POD_GONE_WAIT:?}"
            ))),
        }
    }

    /// Creates a member; with `restore_from`, its data claim is first
    /// restored from that snapshot by a Job ([`super::restore`]), which
    /// needs persistent storage.
    pub(super) async fn create_member(
        &self,
        cluster: &str,
        config: &MemberConfig,
        restore_from: Option<&RestoreSource>,
    ) -> Result<(), Error> {
        let reg = self.registration(cluster)?;
        if let Some(snapshot) = restore_from
            && reg.storage != StoragePolicy::Persistent
        {
            return Err(Error::Unsupported(format!(
                "member {}: restoring from a snapshot ({snapshot}) needs storage.policy \
                 Persistent on Kubernetes (the data is restored into the member's volume claim \
                 before its pod starts)",
                config.addr.name
            )));
        }
        self.ensure_shared(cluster).await?;
        let name = &config.addr.name;
        if let Some(pod) = self.get::<Pod>(name).await? {
            Self::ours(&reg, &pod.metadata, &format!("pod {name}"))?;
            if pod_running(&pod) {
                return Ok(());
            }
            self.clear_pod(&pod).await?;
        }
        if reg.storage == StoragePolicy::Persistent {
            let claim = claim_name(name);
            if let Some(c) = self.get::<PersistentVolumeClaim>(&claim).await? {
                Self::ours(&reg, &c.metadata, &format!("volume claim {claim}"))?;
                if c.metadata.deletion_timestamp.is_some() {
                    return Err(Error::Busy(format!(
                        "volume claim {claim} is being deleted"
                    )));
                }
            }
            let wanted = &reg.claims;
            self.apply(&claim, &data_claim(cluster, config, wanted, &reg.owner))
                .await?;
            if let Some(source) = restore_from {
                self.restore_member(cluster, config, source, &reg).await?;
            }
        }
        if config.backend.standby {
            // Its pod mounts the members' token signing key.
            self.standby_auth(cluster).await?;
        }
        let pod = member_pod(cluster, config, reg.storage, &self.image, &reg.owner);
        self.apply(name, &pod).await
    }

    pub(super) async fn start_member(&self, cluster: &str, member: &str) -> Result<(), Error> {
        let reg = self.registration(cluster)?;
        let claim_name = claim_name(member);
        let claim = self.get::<PersistentVolumeClaim>(&claim_name).await?;
        let claim = claim.filter(|c| owned_by(&c.metadata, &reg.owner.uid));
        if claim
            .as_ref()
            .is_some_and(|c| c.metadata.deletion_timestamp.is_some())
        {
            return Err(Error::Busy(format!(
                "volume claim {claim_name} is being deleted: member {member} cannot start with it"
            )));
        }
        let pod = self.get::<Pod>(member).await?;
        if let Some(p) = &pod {
            Self::ours(&reg, &p.metadata, &format!("pod {member}"))?;
            if pod_running(p) {
                return Ok(());
            }
        }
        let from_claim = match &claim {
            Some(c) => config::read(
                &format!("persistentvolumeclaims/{claim_name}"),
                c.annotations().into(),
            )?,
            None => None,
        };
        let from_pod = match &pod {
            Some(p) => config::read(&format!("pods/{member}"), p.annotations().into())?,
            None => None,
        };
        let no_member = || Error::NoMember {
            cluster: cluster.into(),
            member: member.into(),
        };
        if let (Some(p), Some(want)) = (&pod, reg.version) {
            Self::waits_for_image(member, p, want)?;
        }
        let mut recorded = from_claim.or(from_pod).ok_or_else(no_member)?;
        // Data that never ran (the member was never seen ready) starts at
        // the spec's version: an add whose image could not be pulled is
        // undone by fixing the spec.
        let holder_started = match (&claim, &pod) {
            (Some(c), _) => config::started(c.annotations().into()),
            (None, Some(p)) => config::started(p.annotations().into()),
            (None, None) => true,
        };
        if let Some(want) = reg.version.filter(|_| !holder_started) {
            recorded.version = want;
        }
        if let Some(p) = &pod {
            self.clear_pod(p).await?;
        }
        self.ensure_shared(cluster).await?;
        let storage = match claim {
            Some(_) => StoragePolicy::Persistent,
            None => StoragePolicy::Ephemeral,
        };
        tracing::info!(%cluster, %member, "re-creating the pod from its recorded config");
        let pod = member_pod(cluster, &recorded, storage, &self.image, &reg.owner);
        self.apply(member, &pod).await
    }

    /// Fails as busy when `pod` is the member at the spec's version `want`
    /// and waits only for its image (which the kubelet keeps pulling):
    /// re-creating it changes nothing, and starting the member at the
    /// version its data ran would undo what the spec asks for. Once the
    /// spec names another version, the member is started again at the
    /// version its claim records.
    fn waits_for_image(member: &str, pod: &Pod, want: Version) -> Result<(), Error> {
        let Some(reason) = image_unavailable(pod) else {
            return Ok(());
        };
        let object = format!("pods/{member}");
        let at = config::read(&object, pod.annotations().into())?.map(|c| c.version);
        if pod.metadata.deletion_timestamp.is_some() || at != Some(want) {
            return Ok(());
        }
        let image = pod.spec.as_ref().and_then(|s| s.containers.first());
        let image = image.and_then(|c| c.image.clone()).unwrap_or_default();
        Err(Error::Busy(format!(
            "member {member} waits for its image {image} ({reason}); it runs once the image can \
             be pulled, or set spec.version back to undo the upgrade"
        )))
    }

    /// Restarts a member with `settings` (a new version, new timing): with
    /// a claim, the pod is re-created with them and the claim records them
    /// once the member is ready on them (see [`Mark`]); without one, see
    /// [`KubePlatform::upgrade_in_place`].
    pub(super) async fn upgrade_member(
        &self,
        cluster: &str,
        member: &str,
        settings: &Settings,
    ) -> Result<(), Error> {
        let reg = self.registration(cluster)?;
        let claim_name = claim_name(member);
        let claim = self.get::<PersistentVolumeClaim>(&claim_name).await?;
        let pod = self.get::<Pod>(member).await?;
        let pod = pod.filter(|p| owned_by(&p.metadata, &reg.owner.uid));
        let Some(claim) = claim.filter(|c| owned_by(&c.metadata, &reg.owner.uid)) else {
            return self.upgrade_in_place(cluster, member, pod, settings).await;
        };
        let object = format!("persistentvolumeclaims/{claim_name}");
        let mut recorded =
            config::read(&object, claim.annotations().into())?.ok_or_else(|| Error::Config {
                object,
                message: format!("no annotation {ANNOTATION_CONFIG}"),
            })?;
        settings.apply(&mut recorded);
        // Only the new pod says the new settings: the claim keeps the ones
        // its data ran until the member is seen ready on the new ones (see
        // members::Mark). An upgrade cut short, or to an image that never
        // runs, leaves the member startable at its version; the plan moves
        // it again while the spec asks for it.
        if let Some(p) = &pod {
            self.clear_pod(p).await?;
        }
        let pod = member_pod(
            cluster,
            &recorded,
            StoragePolicy::Persistent,
            &self.image,
            &reg.owner,
        );
        self.apply(member, &pod).await
    }

    /// Upgrades a member without a claim: its data lives in the pod's
    /// emptyDir, so the image is changed in place (the kubelet restarts the
    /// container, the emptyDir stays). Probes and the command line cannot
    /// change in place: when the new version needs another readiness path,
    /// or new settings (timing) change etcd's flags, the pod is deleted, and
    /// the plan replaces the member.
    async fn upgrade_in_place(
        &self,
        cluster: &str,
        member: &str,
        pod: Option<Pod>,
        settings: &Settings,
    ) -> Result<(), Error> {
        let no_member = || Error::NoMember {
            cluster: cluster.into(),
            member: member.into(),
        };
        let pod = pod.ok_or_else(no_member)?;
        let object = format!("pods/{member}");
        let mut recorded =
            config::read(&object, pod.annotations().into())?.ok_or_else(no_member)?;
        let before = recorded.clone();
        settings.apply(&mut recorded);
        let (from, version) = (before.version, recorded.version);
        // The flags that come with a version alone are not worth an
        // emptyDir member's data: the one etcd 3.5.0-3.5.2 need (see
        // member::flags) is missing until the pod is re-created, and 3.4's
        // `--pre-vote=true` stays in a pod upgraded to 3.5 (where it is
        // etcd's default anyway).
        let args = |c: &MemberConfig| -> Vec<String> {
            let mut a = pod_args(c);
            a.retain(|f| f != COMMIT_EVERY_WRITE && f != PRE_VOTE);
            a
        };
        // The image changes in place; pod settings (spec.pod) do not.
        let same_args =
            args(&before) == args(&recorded) && before.pod.template == recorded.pod.template;
        if pod_running(&pod) && same_args && readiness_path(from) == readiness_path(version) {
            let patch = serde_json::json!({
                "metadata": {"annotations": {ANNOTATION_CONFIG: config::to_json(&recorded)}},
                "spec": {"containers": [{"name": CONTAINER, "image": image(recorded.pod.repository_or(&self.image), version)}]},
            });
            return self.merge::<Pod>(member, Patch::Strategic(patch)).await;
        }
        // The member's data goes with its pod: first find out that the
        // new image runs at all (a version whose image cannot be pulled
        // must cost nothing).
        if from != version {
            let owner = self.registration(cluster)?.owner;
            self.check_image(cluster, version, &owner).await?;
        }
        tracing::warn!(
            %cluster, %member, %from, to = %version,
            "the readiness probe, etcd's flags or the pod's settings change and an emptyDir \
             member cannot keep its data in a new pod: deleting it, it will be replaced"
        );
        self.clear_pod(&pod).await
    }

    pub(super) async fn delete_member(&self, cluster: &str, member: &str) -> Result<(), Error> {
        tracing::info!(%cluster, %member, "deleting the pod and its volume claim");
        let now = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        self.remove::<Pod>(member, &now).await?;
        self.remove::<PersistentVolumeClaim>(&claim_name(member), &DeleteParams::default())
            .await?;
        self.remove::<Secret>(&tls_secret_name(member), &DeleteParams::default())
            .await
    }

    pub(super) async fn mark_started(&self, mark: &Mark) -> Result<(), Error> {
        let now = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
        match mark {
            Mark::Claim {
                name,
                started,
                config,
            } => {
                let mut annotations = serde_json::Map::new();
                if *started {
                    annotations.insert(ANNOTATION_STARTED.into(), now.into());
                }
                if let Some(c) = config {
                    annotations.insert(ANNOTATION_CONFIG.into(), config::to_json(c).into());
                }
                let patch = serde_json::json!({"metadata": {"annotations": annotations}});
                self.merge::<PersistentVolumeClaim>(name, Patch::Merge(patch))
                    .await
            }
            Mark::Pod(name) => {
                let patch =
                    serde_json::json!({"metadata": {"annotations": {ANNOTATION_STARTED: now}}});
                self.merge::<Pod>(name, Patch::Merge(patch)).await
            }
        }
    }
}
