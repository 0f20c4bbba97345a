//! Kubernetes: members are pods labelled by the operator
//! (`etcdoperator.dev/cluster=NAME`, `etcdoperator.dev/member=MEMBER`,
//! `app.kubernetes.io/managed-by=etcd-operator`), the operator is the pod
//! labelled `app.kubernetes.io/name=etcd-operator`, all in one namespace.
//!
//! A kill deletes the pod with grace period 0 and a precondition on its
//! uid (so a pod recreated under the same name is never hit); a destroy
//! first deletes the member's PersistentVolumeClaims (labelled the same
//! way; Kubernetes removes a claim once no pod uses it), then the pod.
//! Roles are asked of etcd at `http://POD_IP:2379` when the pod has an IP
//! this machine can reach. A member etcd gives no answer for (pod IPs are
//! not reachable from outside the cluster) takes its role from the
//! operator's published status of the cluster (the `EtcdCluster` named by
//! the pod's cluster label, same namespace), judged by
//! [`roles::from_status`]; failing that it is unknown. A member with an
//! `https://` client URL (its recorded config says so) is asked with the
//! client certificate in the Secret `CLUSTER-client-tls` (the monkey then
//! needs `get` on secrets; without it the published status answers).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use etcd_operator::crd::{
    EtcdCluster, EtcdClusterStatus, LABEL_CLUSTER, LABEL_MEMBER, LABEL_NAME, member_pod_selector,
    member_selector,
};
use etcd_operator::etcd::Clients;
use etcd_operator::faults::{Fault, Role};
use etcd_operator::plan::member_order;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams, Preconditions};
use kube::{Client, ResourceExt};

use super::{
    Error, LastingPlan, MemberKey, Observed, ObservedCluster, Operator, Platform, old_enough,
};
use crate::config::{Config, FaultOptions};
use crate::rng::Rng;
use crate::roles::{self, Ask, RoleSource, Seen};
use crate::select::MemberView;

mod netpol;
mod pods;

pub use netpol::{Lasting, MANAGED_BY_MONKEY};
use pods::{
    client_url, container_running, handle, recorded_client_url, running, running_since, started,
};

/// etcd's client port in a member pod.
pub const CLIENT_PORT: u16 = 2379;
/// Value of `app.kubernetes.io/name` on the operator's pod.
pub const OPERATOR_NAME: &str = "etcd-operator";
/// How long reading a cluster's published status may take.
pub const STATUS_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The member pods of one namespace.
#[derive(Clone)]
pub struct Kube {
    client: Client,
    namespace: String,
    selector: Option<String>,
    clients: Arc<Clients>,
    /// Clusters whose roles were already said to come from their status
    /// (said once at info level; every tick at debug).
    told: Arc<Mutex<HashSet<String>>>,
}

impl std::fmt::Debug for Kube {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kube")
            .field("namespace", &self.namespace)
            .field("selector", &self.selector)
            .finish_non_exhaustive()
    }
}

/// A pod as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handle {
    /// Pod name.
    pub pod: String,
    /// Its uid: the delete only hits this very pod.
    pub uid: Option<String>,
    /// Its cluster and member labels (`None` for the operator).
    pub member: Option<MemberKey>,
}

impl Kube {
    /// The member pods in `namespace` (the client's default namespace when
    /// `None`) that also match `selector`.
    pub fn new(client: Client, namespace: Option<String>, selector: Option<String>) -> Self {
        let namespace = namespace.unwrap_or_else(|| client.default_namespace().to_string());
        Kube {
            client,
            namespace,
            selector: selector.filter(|s| !s.trim().is_empty()),
            clients: Arc::new(Clients::new(roles::STATUS_TIMEOUT)),
            told: Arc::default(),
        }
    }

    /// The namespace hit.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The operator's labels, the cluster requirement and the user's selector.
    fn member_selector(&self, clusters: Option<&[String]>) -> String {
        let cluster = match clusters {
            None => LABEL_CLUSTER.to_string(),
            Some(names) => format!("{LABEL_CLUSTER} in ({})", names.join(",")),
        };
        // Members only: a backup Job's or the follower's pod is no member
        // (it carries no member label), whatever else it shares.
        let mut s = member_pod_selector(&cluster);
        if let Some(extra) = &self.selector {
            s.push(',');
            s.push_str(extra);
        }
        s
    }

    async fn list(&self, selector: &str) -> Result<Vec<Pod>, Error> {
        let lp = ListParams::default().labels(selector);
        self.pods()
            .list(&lp)
            .await
            .map(|l| l.items)
            .map_err(|source| Error::Kube {
                what: format!("cannot list pods in {} matching {selector}", self.namespace),
                source,
            })
    }

    /// The status the operator published for `cluster`; `None` when there
    /// is none or it cannot be read (said in the logs: roles stay unknown,
    /// the tick goes on).
    /// Registers the cluster's client certificate (its Secret
    /// `CLUSTER-client-tls`) for members asked at `https://` URLs, checked
    /// against each member's DNS name.
    async fn register_tls(&self, cluster: &str, pods: &[(String, Pod)], asks: &[Ask]) {
        if !asks
            .iter()
            .flat_map(|a| &a.url)
            .any(|u| u.starts_with("https://"))
        {
            return;
        }
        let name = etcd_operator::platform::kube::tls::client_secret_name(cluster);
        let api: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(self.client.clone(), &self.namespace);
        let secret = match tokio::time::timeout(STATUS_READ_TIMEOUT, api.get_opt(&name)).await {
            Ok(Ok(Some(s))) => s,
            other => {
                tracing::debug!("cannot read secret {name} for TLS members: {other:?}");
                return;
            }
        };
        let text = |k: &str| {
            let d = secret.data.as_ref()?.get(k)?;
            String::from_utf8(d.0.clone()).ok()
        };
        let (Some(ca), Some(cert), Some(key)) = (text("ca.crt"), text("tls.crt"), text("tls.key"))
        else {
            return;
        };
        let tls = etcd_operator::tls::ClientTls {
            ca,
            cert_key: etcd_operator::tls::CertKey { cert, key },
            server_name: None,
        };
        for ((_, pod), ask) in pods.iter().zip(asks) {
            let Some(url) = ask.url.as_deref().filter(|u| u.starts_with("https://")) else {
                continue;
            };
            let host = recorded_client_url(pod)
                .and_then(|u| etcd_operator::tls::url_host(&u).map(str::to_string));
            self.clients.set_tls(url, Some(tls.with_server_name(host)));
        }
    }

    async fn published(&self, cluster: &str) -> Option<EtcdClusterStatus> {
        let api: Api<EtcdCluster> = Api::namespaced(self.client.clone(), &self.namespace);
        let what = format!(
            "EtcdCluster {}/{cluster} (for the roles etcd did not give)",
            self.namespace
        );
        match tokio::time::timeout(STATUS_READ_TIMEOUT, api.get_opt(cluster)).await {
            Err(_) => {
                tracing::warn!("cannot read {what}: no answer within {STATUS_READ_TIMEOUT:?}");
                None
            }
            Ok(Ok(Some(c))) => {
                if c.status.is_none() {
                    tracing::debug!("{what} has no status yet");
                }
                c.status
            }
            Ok(Ok(None)) => {
                tracing::debug!("{what} does not exist");
                None
            }
            Ok(Err(kube::Error::Api(s))) if s.code == 403 => {
                tracing::warn!(
                    "cannot read {what}: forbidden; the monkey needs get on \
                     etcdclusters.etcdoperator.dev ({})",
                    s.message
                );
                None
            }
            Ok(Err(e)) => {
                tracing::warn!("cannot read {what}: {e}");
                None
            }
        }
    }

    /// Says where the roles of `cluster` came from when some came from its
    /// published status.
    fn tell(&self, cluster: &str, members: &[Observed<Handle>]) {
        let from_status: Vec<String> = members
            .iter()
            .filter(|m| m.role_source == Some(RoleSource::Status))
            .map(|m| {
                format!(
                    "{}:{}",
                    m.view.name,
                    crate::faultlog::role_name(m.view.role)
                )
            })
            .collect();
        if from_status.is_empty() {
            return;
        }
        let first = self
            .told
            .lock()
            .map(|mut t| t.insert(cluster.to_string()))
            .unwrap_or(false);
        let line = format!(
            "roles of cluster {cluster} from its EtcdCluster status (etcd did not answer at the pod IPs): {}",
            from_status.join(" ")
        );
        if first {
            tracing::info!("{line}");
        } else {
            tracing::debug!("{line}");
        }
    }

    async fn delete_pod(&self, h: &Handle) -> Result<(), Error> {
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: h.uid.clone().map(|uid| Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self.pods().delete(&h.pod, &dp).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {
                Err(Error::Gone(format!("pod {}", h.pod)))
            }
            Err(source) => Err(Error::Kube {
                what: format!("cannot delete pod {}/{}", self.namespace, h.pod),
                source,
            }),
        }
    }

    async fn delete_claims(&self, (cluster, member): &MemberKey) -> Result<(), Error> {
        let claims: Api<PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), &self.namespace);
        let selector = member_selector(cluster, member);
        let kube_err = |what: String| move |source| Error::Kube { what, source };
        let list = claims
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(kube_err(format!(
                "cannot list the volume claims of {cluster}/{member}"
            )))?;
        for claim in list.items {
            let name = claim.name_any();
            match claims.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(kube_err(format!("cannot delete volume claim {name}"))(e)),
            }
        }
        Ok(())
    }
}

impl Platform for Kube {
    type Handle = Handle;

    /// From each cluster's resource.
    async fn standbys(&self, clusters: &[String]) -> HashSet<String> {
        let mut out = HashSet::new();
        for c in clusters {
            if super::following(self.published(c).await.as_ref()) {
                out.insert(c.clone());
            }
        }
        out
    }

    async fn clusters(&self) -> Result<Vec<String>, Error> {
        let pods = self.list(&self.member_selector(None)).await?;
        let mut names: Vec<String> = pods
            .iter()
            .filter_map(|p| p.labels().get(LABEL_CLUSTER).cloned())
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    async fn observe(
        &self,
        clusters: &[String],
        paused: &HashSet<MemberKey>,
        min_age: Duration,
        now: SystemTime,
    ) -> Result<Vec<ObservedCluster<Handle>>, Error> {
        if clusters.is_empty() {
            return Ok(Vec::new());
        }
        let pods = self.list(&self.member_selector(Some(clusters))).await?;
        let mut by_cluster: BTreeMap<String, Vec<(String, Pod)>> = BTreeMap::new();
        for pod in pods {
            let labels = pod.labels();
            let Some(cluster) = labels.get(LABEL_CLUSTER).cloned() else {
                continue;
            };
            // Only what was asked for, whatever the server returned.
            if !clusters.contains(&cluster) {
                continue;
            }
            let member = labels
                .get(LABEL_MEMBER)
                .cloned()
                .unwrap_or_else(|| pod.name_any());
            by_cluster.entry(cluster).or_default().push((member, pod));
        }
        let mut out = Vec::new();
        for (cluster, mut pods) in by_cluster {
            pods.sort_by(|(a, _), (b, _)| member_order(a, b));
            let mut members = Vec::new();
            let mut asks = Vec::new();
            let mut seen = Vec::new();
            for (member, pod) in &pods {
                let key = (cluster.clone(), member.clone());
                let up = running(pod) && !paused.contains(&key);
                asks.push(Ask {
                    name: member.clone(),
                    url: if up { client_url(pod) } else { None },
                });
                seen.push(Seen {
                    name: member.clone(),
                    running: up && container_running(pod),
                    since: running_since(pod),
                });
                members.push(Observed {
                    view: MemberView {
                        name: member.clone(),
                        role: Role::Unknown,
                        running: up,
                        eligible: up && old_enough(started(pod), min_age, now),
                    },
                    handle: up.then(|| handle(pod, Some(key))),
                    role_source: None,
                });
            }
            self.register_tls(&cluster, &pods, &asks).await;
            let mut roles = roles::lookup(&self.clients, &asks).await;
            let sources = if roles.contains(&Role::Unknown) {
                match self.published(&cluster).await {
                    Some(status) => {
                        let published = roles::from_status(&status, &seen, SystemTime::now());
                        roles::fill(&mut roles, &published)
                    }
                    None => roles::etcd_sources(&roles),
                }
            } else {
                roles::etcd_sources(&roles)
            };
            for ((m, role), source) in members.iter_mut().zip(roles).zip(sources) {
                m.view.role = role;
                m.role_source = source;
            }
            self.tell(&cluster, &members);
            out.push(ObservedCluster {
                name: cluster,
                members,
            });
        }
        Ok(out)
    }

    async fn inject(&self, fault: Fault, h: &Handle) -> Result<(), Error> {
        match fault {
            Fault::Kill => self.delete_pod(h).await,
            Fault::Destroy => {
                let Some(member) = &h.member else {
                    return Err(Error::Unsupported(
                        "the operator has no data to destroy".into(),
                    ));
                };
                self.delete_claims(member).await?;
                self.delete_pod(h).await
            }
            Fault::Pause | Fault::Resume => Err(Error::Unsupported(
                "pods cannot be paused through the Kubernetes API".into(),
            )),
            other => Err(Error::Unsupported(format!(
                "{} is not injected by inject()",
                other.as_str()
            ))),
        }
    }

    async fn resume(&self, _h: &Handle) -> Result<(), Error> {
        Err(Error::Unsupported(
            "pods cannot be paused through the Kubernetes API".into(),
        ))
    }

    type Lasting = Lasting;

    async fn prepare(&self, _cfg: &Config) -> Result<Option<String>, Error> {
        Ok(None)
    }

    async fn start(&self, plan: &LastingPlan<Handle>) -> Result<(Lasting, String), Error> {
        if plan.fault != Fault::Partition {
            return Err(Error::Unsupported(format!(
                "{} is not supported on kube",
                plan.fault.as_str()
            )));
        }
        self.isolate(plan).await
    }

    async fn settled(&self, _lasting: &mut Lasting) -> Option<String> {
        None
    }

    async fn heal(&self, lasting: &Lasting) -> Result<(), Error> {
        self.remove_policies(&lasting.policies).await
    }

    async fn damage(
        &self,
        fault: Fault,
        _h: &Handle,
        _options: &FaultOptions,
        _rng: Rng,
    ) -> Result<String, Error> {
        Err(Error::Unsupported(format!(
            "{} is not supported on kube",
            fault.as_str()
        )))
    }

    async fn operator(&self) -> Result<Option<Operator<Handle>>, Error> {
        let mut pods = self.list(&format!("{LABEL_NAME}={OPERATOR_NAME}")).await?;
        pods.retain(running);
        pods.sort_by_key(|p| p.name_any());
        Ok(pods.first().map(|pod| Operator {
            name: pod.name_any(),
            handle: handle(pod, None),
        }))
    }
}

#[cfg(test)]
mod tests;
