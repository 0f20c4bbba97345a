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
//! this machine can reach; otherwise they are unknown.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use etcd_operator::crd::{LABEL_CLUSTER, LABEL_MANAGED_BY, LABEL_MEMBER, LABEL_NAME, MANAGED_BY};
use etcd_operator::etcd::Clients;
use etcd_operator::faults::{Fault, Role};
use etcd_operator::plan::member_order;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams, Preconditions};
use kube::{Client, ResourceExt};

use super::{Error, MemberKey, Observed, ObservedCluster, Operator, Platform, old_enough};
use crate::roles::{self, Ask};
use crate::select::MemberView;

/// etcd's client port in a member pod.
pub const CLIENT_PORT: u16 = 2379;
/// Value of `app.kubernetes.io/name` on the operator's pod.
pub const OPERATOR_NAME: &str = "etcd-operator";

/// The member pods of one namespace.
#[derive(Clone)]
pub struct Kube {
    client: Client,
    namespace: String,
    selector: Option<String>,
    clients: std::sync::Arc<Clients>,
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
            clients: std::sync::Arc::new(Clients::new(roles::STATUS_TIMEOUT)),
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
        let mut s = format!("{LABEL_MANAGED_BY}={MANAGED_BY},{cluster}");
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
        let selector = format!("{LABEL_CLUSTER}={cluster},{LABEL_MEMBER}={member}");
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

fn running(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

fn started(pod: &Pod) -> Option<SystemTime> {
    let t = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .or(pod.metadata.creation_timestamp.as_ref())?;
    let ms = u64::try_from(t.0.as_millisecond()).ok()?;
    Some(UNIX_EPOCH + Duration::from_millis(ms))
}

fn client_url(pod: &Pod) -> Option<String> {
    let ip: std::net::IpAddr = pod.status.as_ref()?.pod_ip.as_deref()?.parse().ok()?;
    Some(format!(
        "http://{}",
        std::net::SocketAddr::new(ip, CLIENT_PORT)
    ))
}

fn handle(pod: &Pod, member: Option<MemberKey>) -> Handle {
    Handle {
        pod: pod.name_any(),
        uid: pod.uid(),
        member,
    }
}

impl Platform for Kube {
    type Handle = Handle;

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
            for (member, pod) in &pods {
                let key = (cluster.clone(), member.clone());
                let up = running(pod) && !paused.contains(&key);
                asks.push(Ask {
                    name: member.clone(),
                    url: if up { client_url(pod) } else { None },
                });
                members.push(Observed {
                    view: MemberView {
                        name: member.clone(),
                        role: Role::Unknown,
                        running: up,
                        eligible: up && old_enough(started(pod), min_age, now),
                    },
                    handle: up.then(|| handle(pod, Some(key))),
                });
            }
            let roles = roles::lookup(&self.clients, &asks).await;
            for (m, role) in members.iter_mut().zip(roles) {
                m.view.role = role;
            }
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
        }
    }

    async fn resume(&self, _h: &Handle) -> Result<(), Error> {
        Err(Error::Unsupported(
            "pods cannot be paused through the Kubernetes API".into(),
        ))
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
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).expect("pod json")
    }

    #[test]
    fn pod_facts() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "demo-0", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"phase": "Running", "podIP": "127.0.0.1", "startTime": "2026-01-01T00:00:10Z"}
        }));
        assert!(running(&p));
        assert_eq!(client_url(&p).as_deref(), Some("http://127.0.0.1:2379"));
        let t = started(&p).expect("start");
        assert_eq!(
            t.duration_since(UNIX_EPOCH).expect("epoch").as_secs(),
            1_767_225_610
        );
        let v6 = pod(serde_json::json!({"status": {"podIP": "::1"}}));
        assert_eq!(client_url(&v6).as_deref(), Some("http://[::1]:2379"));
        let gone = pod(serde_json::json!({
            "metadata": {"name": "x", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"phase": "Running"}
        }));
        assert!(!running(&gone));
        assert!(!running(&pod(
            serde_json::json!({"status": {"phase": "Pending"}})
        )));
    }
}
