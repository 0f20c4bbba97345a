//! The Kubernetes platform: each member a pod named after it (`demo-0`),
//! with persistent storage its data on a volume claim `demo-0-data`; one
//! [`KubePlatform`] per namespace.
//!
//! * A member's config (a [`MemberConfig`]) is recorded as JSON in the
//!   annotation [`ANNOTATION_CONFIG`] of its claim and of its pod, so a
//!   deleted pod is re-created from its claim; with emptyDir storage the
//!   pod is the only holder, and a deleted pod is a member gone.
//! * `has_data`: the claim exists, is not being deleted, and carries
//!   [`ANNOTATION_STARTED`], set the first time the member is seen ready
//!   (until then its volume may hold nothing worth restarting with).
//! * Every object has an ownerReference to its EtcdCluster (deleting the
//!   resource garbage-collects everything), and only objects owned by the
//!   registered resource's uid count (an earlier resource of the same name
//!   may still be being collected).
//! * Objects are written by server-side apply with the field manager
//!   [`FIELD_MANAGER`]; marks and relabels are merge patches.
//! * The record is a ConfigMap `CLUSTER-etcd-operator`; the status is
//!   applied to the resource's status subresource.
//! * Members advertise (and the status publishes) their DNS names through
//!   the headless Service, but the operator calls them at their pod IPs
//!   ([`members::pod_url`]): CoreDNS caches answers, "not found" included,
//!   for 30 s, so a re-created pod would be reached late by name.
//! * The kubelet restarts a failing etcd in place; [`trouble`] reads the
//!   pod's status for a crash loop (the member is then not running and its
//!   data not trusted, as the controller judges members it restarts
//!   itself) and for why a pod is stuck (unschedulable, image pull).

pub mod backups;
pub mod config;
pub mod error;
pub mod follow;
mod follow_status;
pub mod image_check;
pub mod jobs;
pub mod members;
pub mod objects;
pub mod placement;
pub mod pod;
pub mod proof;
mod reseed;
mod restore;
mod shared;
pub mod standby;
pub mod status;
pub mod tls;
pub mod trouble;
mod volumes;
pub mod watched;
mod writes;

#[cfg(test)]
pub(crate) mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, PatchParams};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::{Client, Resource};

use self::backups::KubeBackups;
pub use self::config::{ANNOTATION_CONFIG, ANNOTATION_STARTED};
pub use self::error::Error;
use self::members::owned_by;
use self::objects::{RECORD_KEY, member_host, record_config_map, record_name};
use crate::backup::RestoreSource;
use crate::crd::{EtcdCluster, StoragePolicy};
use crate::member::{CLIENT_PORT, MemberAddr, MemberConfig, PEER_PORT, Settings};
use crate::platform::{ClusterRecord, Notice, NoticeType, Platform, PlatformMember, Result};
use crate::validate::Versions;
use crate::version::Version;

/// The one field manager of every apply.
pub const FIELD_MANAGER: &str = "etcd-operator";

/// Versions with a known image (`quay.io/coreos/etcd:vX.Y.Z`): 3.4.x, 3.5.x.
#[derive(Clone, Copy, Debug, Default)]
pub struct KubeVersions;

impl Versions for KubeVersions {
    fn check(&self, v: Version) -> std::result::Result<(), String> {
        match (v.major, v.minor) {
            (3, 4 | 5) => Ok(()),
            _ => Err(format!(
                "etcd {v} has no known image; the Kubernetes platform runs 3.4.x and 3.5.x"
            )),
        }
    }
}

/// What the platform knows of a cluster's resource.
#[derive(Clone, Debug)]
struct Registration {
    owner: OwnerReference,
    /// The resource, for Events.
    object: ObjectReference,
    storage: StoragePolicy,
    /// The version the spec asks for (`None`: not a version).
    version: Option<Version>,
    /// Members the disruption budget protects.
    size: usize,
    /// The size the Services and the budget were last applied for.
    shared: Option<usize>,
    /// What new members' claims ask for (`spec.storage`).
    claims: objects::ClaimWanted,
    /// The image repository the spec names (`spec.image.repository`), for
    /// the image check (`None`: the operator's).
    repository: Option<String>,
    /// `spec.pod`, for the Jobs that run the members' image.
    template: Option<crate::crd::MemberPodSpec>,
}

/// Members as pods of one namespace.
pub struct KubePlatform {
    client: Client,
    namespace: String,
    image: String,
    clusters: Mutex<HashMap<String, Registration>>,
    backups: Arc<KubeBackups>,
    recorder: Recorder,
    /// The follower Deployment last applied per cluster (`None`: deleted).
    followers: Mutex<HashMap<String, Option<String>>>,
    /// What is known of etcd images ([`image_check`]).
    images: Mutex<HashMap<String, image_check::Known>>,
    /// The pods and claims each cluster's last pass listed ([`watched`]).
    lists: watched::Lists,
    /// The status last written per cluster ([`status`]).
    written: status::Written,
    /// A writable folder of the operator's own (`--state-dir`): where a
    /// standby's reads of its source's bucket are staged ([`standby`]).
    scratch: Option<std::path::PathBuf>,
    /// The stores standbys read their sources through ([`standby`]).
    readers: standby::Readers,
}

impl std::fmt::Debug for KubePlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubePlatform")
            .field("namespace", &self.namespace)
            .field("image", &self.image)
            .finish_non_exhaustive()
    }
}

impl KubePlatform {
    /// Members in `namespace`, running `image:vVERSION` (`image` without a
    /// tag, such as [`pod::DEFAULT_IMAGE`]).
    pub fn new(client: Client, namespace: impl Into<String>, image: impl Into<String>) -> Self {
        let namespace = namespace.into();
        KubePlatform {
            backups: Arc::new(KubeBackups::new(client.clone(), &namespace, None)),
            recorder: Recorder::new(client.clone(), Reporter::from(FIELD_MANAGER)),
            client,
            namespace,
            image: image.into(),
            clusters: Mutex::default(),
            followers: Mutex::default(),
            images: Mutex::default(),
            lists: watched::Lists::default(),
            written: status::Written::default(),
            scratch: None,
            readers: standby::Readers::default(),
        }
    }

    /// Standbys stage what they read of their sources' buckets under
    /// `dir`, a writable folder of the operator's ([`standby`]); without
    /// one, a standby says it cannot follow.
    pub fn with_scratch(mut self, dir: Option<std::path::PathBuf>) -> Self {
        self.scratch = dir;
        self
    }

    /// Lists of pods and claims are reused while `watched` (fed by the
    /// controller's watches) says nothing changed ([`watched`]).
    pub fn with_watched(mut self, watched: Arc<watched::Watched>) -> Self {
        self.lists = watched::Lists::watched(watched);
        self
    }

    /// Backups run as Jobs of `image`, the operator's own (see
    /// [`backups`]); without one, backups cannot be taken and say so.
    pub fn with_backup_image(mut self, image: Option<String>) -> Self {
        self.backups = Arc::new(KubeBackups::new(
            self.client.clone(),
            &self.namespace,
            image,
        ));
        self
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Takes (or updates) a cluster's resource (see [`Platform::prepare`]):
    /// its uid owns every object created from now on, and its spec says the
    /// storage. The disruption budget protects the larger of `voters` and
    /// `spec.size`, so it never lets a drain take quorum while a scale-down
    /// is under way.
    fn register(&self, name: &str, resource: &EtcdCluster, voters: usize) -> Result<(), Error> {
        let name = name.to_string();
        let owner = resource
            .controller_owner_ref(&())
            .ok_or_else(|| Error::Unregistered(format!("{name} (the resource has no uid)")))?;
        let object = resource.object_ref(&());
        let size = usize::try_from(resource.spec.size.clamp(1, 9))
            .unwrap_or(1)
            .max(voters);
        self.backups.own(&name, owner.clone());
        let mut clusters = self.clusters.lock().unwrap_or_else(|e| e.into_inner());
        let shared = clusters
            .get(&name)
            .filter(|r| r.owner.uid == owner.uid)
            .and_then(|r| r.shared);
        clusters.insert(
            name,
            Registration {
                owner,
                object,
                storage: resource.spec.storage.policy,
                version: resource.spec.version.parse().ok(),
                size,
                shared,
                claims: objects::ClaimWanted {
                    size: resource.spec.storage.size.clone(),
                    class: resource.spec.storage.storage_class_name.clone(),
                },
                repository: resource
                    .spec
                    .image
                    .as_ref()
                    .and_then(|i| i.repository.clone()),
                template: resource.spec.pod.as_deref().cloned(),
            },
        );
        Ok(())
    }

    fn registration(&self, cluster: &str) -> Result<Registration, Error> {
        let clusters = self.clusters.lock().unwrap_or_else(|e| e.into_inner());
        clusters
            .get(cluster)
            .cloned()
            .ok_or_else(|| Error::Unregistered(cluster.to_string()))
    }

    fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn apply_params() -> PatchParams {
        PatchParams::apply(FIELD_MANAGER).force()
    }

    async fn members_of(&self, cluster: &str) -> Result<Vec<PlatformMember>, Error> {
        let reg = self.registration(cluster)?;
        let (pods, claims) = self.owned_now(cluster, &reg.owner.uid).await?;
        let mut out = Vec::new();
        for found in members::join(&pods, &claims)? {
            let mut member = found.member;
            if let Some(mark) = found.mark
                && let Err(e) = self.mark_started(&mark).await
            {
                // Counted once the mark is written; try again next time.
                tracing::warn!(%cluster, member = %member.addr.name, "{e}");
                if mark.sets_started() {
                    member.has_data = false;
                }
            }
            out.push(member);
        }
        self.volume_classes(&reg, &mut out).await;
        Ok(out)
    }

    async fn load(&self, cluster: &str) -> Result<Option<ClusterRecord>, Error> {
        let name = record_name(cluster);
        let cm = self
            .api::<ConfigMap>()
            .get_opt(&name)
            .await
            .map_err(Error::api(format!("cannot read configmap {name}")))?;
        let Some(cm) = cm else { return Ok(None) };
        // A record left by an earlier resource of the same name is not ours.
        if let Ok(reg) = self.registration(cluster)
            && !owned_by(&cm.metadata, &reg.owner.uid)
        {
            tracing::info!(%cluster, "ignoring configmap {name}: an earlier resource's record");
            return Ok(None);
        }
        let json = cm.data.as_ref().and_then(|d| d.get(RECORD_KEY));
        let Some(json) = json else { return Ok(None) };
        serde_json::from_str(json)
            .map(Some)
            .map_err(|e| Error::Config {
                object: format!("configmaps/{name}"),
                message: format!("{RECORD_KEY}: {e}"),
            })
    }

    async fn save(&self, cluster: &str, record: &ClusterRecord) -> Result<(), Error> {
        let reg = self.registration(cluster)?;
        let json = serde_json::to_string(record).unwrap_or_default();
        let cm = record_config_map(cluster, json, &reg.owner);
        self.apply(&record_name(cluster), &cm).await
    }
}

impl Platform for KubePlatform {
    type Backups = KubeBackups;

    fn backups(&self) -> Arc<KubeBackups> {
        self.backups.clone()
    }

    /// In the operator's process ([`standby`]).
    async fn standby_reads(
        &self,
        cluster: &str,
        location: &crate::backup::Location,
    ) -> Result<Arc<crate::platform::local::backups::LocalBackups>> {
        Ok(self.standby_store(cluster, location).await?)
    }

    async fn prepare(
        &self,
        cluster: &str,
        resource: &EtcdCluster,
        voters: usize,
        active: bool,
    ) -> Result<()> {
        self.register(cluster, resource, voters)?;
        if active {
            self.ensure_shared(cluster).await?;
        }
        if let Err(e) = self.sync_follower(cluster, resource, active).await {
            tracing::warn!(%cluster, "continuous backups: {e}");
        }
        Ok(())
    }

    fn forget(&self, cluster: &str) {
        let mut clusters = self.clusters.lock().unwrap_or_else(|e| e.into_inner());
        clusters.remove(cluster);
        drop(clusters);
        let mut followers = self.followers.lock().unwrap_or_else(|e| e.into_inner());
        followers.remove(cluster);
        self.backups.forget(cluster);
        self.lists.forget(cluster);
        self.written.forget(cluster);
    }

    async fn members(&self, cluster: &str) -> Result<Vec<PlatformMember>> {
        Ok(self.members_of(cluster).await?)
    }

    async fn allocate(&self, cluster: &str, names: &[String]) -> Result<Vec<MemberAddr>> {
        let addr = |name: &String| {
            let host = member_host(name, cluster, &self.namespace);
            MemberAddr {
                name: name.clone(),
                peer_url: format!("http://{host}:{PEER_PORT}"),
                client_url: format!("http://{host}:{CLIENT_PORT}"),
            }
        };
        Ok(names.iter().map(addr).collect())
    }

    async fn create(
        &self,
        cluster: &str,
        config: &MemberConfig,
        restore_from: Option<&RestoreSource>,
    ) -> Result<()> {
        Ok(self.create_member(cluster, config, restore_from).await?)
    }

    async fn start(&self, cluster: &str, member: &str) -> Result<()> {
        Ok(self.start_member(cluster, member).await?)
    }

    async fn restart(&self, cluster: &str, member: &str, settings: &Settings) -> Result<()> {
        Ok(self.upgrade_member(cluster, member, settings).await?)
    }

    async fn reconfigure(
        &self,
        cluster: &str,
        member: &str,
        addr: &MemberAddr,
        tls: &crate::member::MemberTls,
    ) -> Result<()> {
        Ok(self.reconfigure_member(cluster, member, addr, tls).await?)
    }

    async fn delete(&self, cluster: &str, member: &str) -> Result<()> {
        Ok(self.delete_member(cluster, member).await?)
    }

    async fn expand_volume(&self, cluster: &str, member: &str, size: &str) -> Result<()> {
        Ok(self.expand(cluster, member, size).await?)
    }

    async fn force_new_cluster(&self, cluster: &str, member: &str) -> Result<()> {
        Ok(self.set_force_new_cluster(cluster, member, true).await?)
    }

    async fn end_force_new_cluster(&self, cluster: &str, member: &str) -> Result<()> {
        Ok(self.set_force_new_cluster(cluster, member, false).await?)
    }

    async fn retire_members(&self, cluster: &str, tag: &str) -> Result<String> {
        Ok(self.retire(cluster, tag).await?)
    }

    async fn delete_cluster(&self, cluster: &str) -> Result<()> {
        Ok(self.delete_all(cluster).await?)
    }

    async fn load_record(&self, cluster: &str) -> Result<Option<ClusterRecord>> {
        Ok(self.load(cluster).await?)
    }

    async fn save_record(&self, cluster: &str, record: &ClusterRecord) -> Result<()> {
        Ok(self.save(cluster, record).await?)
    }

    async fn save_status(&self, cluster: &str, resource: &EtcdCluster) -> Result<()> {
        Ok(self.status(cluster, resource).await?)
    }

    async fn announce(&self, cluster: &str, notice: &Notice) {
        let Ok(reg) = self.registration(cluster) else {
            return;
        };
        // kube-rs folds Events of the same reason and action into one
        // series that keeps the first one's words: an action of the
        // reason and the words' hash makes each notice with other words
        // its own Event (the same words again count as a series).
        let words = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            notice.message.hash(&mut h);
            h.finish()
        };
        let type_ = match notice.type_ {
            NoticeType::Normal => EventType::Normal,
            NoticeType::Warning => EventType::Warning,
        };
        let event = KubeEvent {
            type_,
            reason: notice.reason.into(),
            note: Some(crate::kube_names::event_note(&notice.message)),
            action: format!("{}-{words:016x}", notice.reason),
            secondary: None,
        };
        if let Err(e) = crate::fence::check() {
            tracing::warn!(%cluster, "not publishing an event ({}): {e}", notice.reason);
            return;
        }
        if let Err(e) = self.recorder.publish(&event, &reg.object).await {
            tracing::warn!(%cluster, "cannot publish an event ({}): {e}", notice.reason);
        }
    }
}
