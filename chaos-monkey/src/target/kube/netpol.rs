//! `--fault partition` on Kubernetes: a NetworkPolicy per victim pod that
//! lets no traffic in from, or out to, the members it is cut from (by their
//! `etcdoperator.dev/member` label), and keeps everything else: pods of the
//! namespace without such a label, and pods of other namespaces. Traffic
//! from outside the pod network (a node, the host) is cut too: a
//! NetworkPolicy cannot allow it without an `ipBlock`, which some network
//! plugins apply to pod IPs as well. It takes a network plugin that
//! enforces NetworkPolicies. No privileges: `create` and `delete` on
//! `networkpolicies`.

use std::sync::atomic::{AtomicU32, Ordering};

use etcd_operator::crd::{LABEL_CLUSTER, LABEL_MANAGED_BY, LABEL_MEMBER};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use super::{Handle, Kube};
use crate::target::{Error, LastingPlan};

/// `app.kubernetes.io/managed-by` on the monkey's NetworkPolicies.
pub const MANAGED_BY_MONKEY: &str = "chaos-monkey";

static COUNTER: AtomicU32 = AtomicU32::new(1);

/// A partition in force on Kubernetes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lasting {
    /// The NetworkPolicies made for it.
    pub policies: Vec<String>,
}

/// The policy that cuts `member` of `cluster` from `blocked` members.
pub fn policy(
    name: &str,
    namespace: &str,
    cluster: &str,
    member: &str,
    blocked: &[&str],
) -> NetworkPolicy {
    let peers = serde_json::json!([
        {"podSelector": {"matchExpressions": [
            {"key": LABEL_MEMBER, "operator": "NotIn", "values": blocked}
        ]}},
        {"namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [namespace]}
        ]}}
    ]);
    let v = serde_json::json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {LABEL_MANAGED_BY: MANAGED_BY_MONKEY, LABEL_CLUSTER: cluster},
        },
        "spec": {
            "podSelector": {"matchLabels": {LABEL_CLUSTER: cluster, LABEL_MEMBER: member}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": peers}],
            "egress": [{"to": peers}],
        }
    });
    serde_json::from_value(v).unwrap_or_default()
}

impl Kube {
    fn policies(&self) -> Api<NetworkPolicy> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// One policy per victim; all removed again if one cannot be made.
    pub(super) async fn isolate(
        &self,
        plan: &LastingPlan<Handle>,
    ) -> Result<(Lasting, String), Error> {
        if plan.fault != etcd_operator::faults::Fault::Partition {
            return Err(Error::Unsupported(format!(
                "{} is not supported on kube",
                plan.fault.as_str()
            )));
        }
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut made = Vec::new();
        for &v in &plan.victims {
            let (member, _) = &plan.members[v];
            let blocked = plan.cut_from(v);
            let name = format!("chaos-monkey-{member}-{}-{n}", std::process::id());
            let p = policy(&name, &self.namespace, &plan.cluster, member, &blocked);
            if let Err(source) = self.policies().create(&PostParams::default(), &p).await {
                let _ = self.remove_policies(&made).await;
                return Err(Error::Kube {
                    what: format!("cannot create NetworkPolicy {}/{name}", self.namespace),
                    source,
                });
            }
            made.push(name);
        }
        let detail = format!("NetworkPolicies {}", made.join(", "));
        Ok((Lasting { policies: made }, detail))
    }

    /// Deletes the policies (missing ones are fine).
    pub(super) async fn remove_policies(&self, names: &[String]) -> Result<(), Error> {
        let mut first = None;
        for name in names {
            match self.policies().delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(source) => {
                    first.get_or_insert(Error::Kube {
                        what: format!("cannot delete NetworkPolicy {}/{name}", self.namespace),
                        source,
                    });
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// `--cleanup`: deletes every NetworkPolicy the monkey made in the
    /// namespace; returns their names.
    pub async fn cleanup(&self) -> Result<Vec<String>, Error> {
        let lp = ListParams::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGED_BY_MONKEY}"));
        let list = self
            .policies()
            .list(&lp)
            .await
            .map_err(|source| Error::Kube {
                what: format!("cannot list NetworkPolicies in {}", self.namespace),
                source,
            })?;
        let names: Vec<String> = list.items.iter().map(|p| p.name_any()).collect();
        self.remove_policies(&names).await?;
        Ok(names)
    }
}
