//! The Kubernetes platform (untested here: this machine has no cluster).
//! The operator is already deployed; the runner applies the EtcdCluster
//! resource, reads its status from the API, reaches each member through a
//! `kubectl port-forward` to its pod (labels `etcdoperator.dev/cluster` and
//! `etcdoperator.dev/member`), runs
//! the chaos monkey with `--platform kube`, and deletes the resource at the
//! end.

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_operator::crd::{EtcdCluster, LABEL_CLUSTER, LABEL_MEMBER};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};

use super::Error;
use super::procs::Proc;
use crate::probe::{StatusSource, UrlMap};
use crate::scenario::ClusterSpec;

type Forwards = Arc<Mutex<HashMap<String, (String, u16, Proc)>>>;

/// The Kubernetes platform.
pub struct Kube {
    api: Api<EtcdCluster>,
    pods: Api<Pod>,
    namespace: String,
    kubeconfig: Option<PathBuf>,
    cluster: ClusterSpec,
    cache: Arc<Mutex<Option<EtcdCluster>>>,
    forwards: Forwards,
    logs: PathBuf,
    secrets: Api<k8s_openapi::api::core::v1::Secret>,
    /// The client certificate of a cluster whose clients use TLS (its
    /// Secret `CLUSTER-client-tls`), read again at every refresh.
    tls: Arc<Mutex<Option<etcd_operator::tls::ClientTls>>>,
}

impl std::fmt::Debug for Kube {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kube")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// An API error while preparing (bad kubeconfig, no CRD): bad input.
fn setup_err(what: &str) -> impl FnOnce(kube::Error) -> Error + '_ {
    move |e| Error::Setup(format!("{what}: {e}"))
}

/// An API error during the run: the run could not be done.
fn kerr(what: &str) -> impl FnOnce(kube::Error) -> Error + '_ {
    move |e| Error::Kube(format!("{what}: {e}"))
}

/// The label selector of one member's pod: its cluster and its name (the
/// labels the operator puts on member pods), so a same-named member of
/// another cluster in the namespace never matches.
pub fn pod_selector(cluster: &str, member: &str) -> String {
    format!("{LABEL_CLUSTER}={cluster},{LABEL_MEMBER}={member}")
}

impl Kube {
    /// Connects with `kubeconfig` (or the default) to `namespace`.
    pub async fn prepare(
        cluster: &ClusterSpec,
        kubeconfig: Option<&Path>,
        namespace: &str,
        logs: &Path,
    ) -> Result<Kube, Error> {
        let config = match kubeconfig {
            Some(path) => {
                let kc = kube::config::Kubeconfig::read_from(path)
                    .map_err(|e| Error::Setup(format!("cannot read {}: {e}", path.display())))?;
                kube::Config::from_custom_kubeconfig(
                    kc,
                    &kube::config::KubeConfigOptions::default(),
                )
                .await
                .map_err(|e| Error::Setup(format!("kubeconfig {}: {e}", path.display())))?
            }
            None => kube::Config::infer().await.map_err(|e| {
                Error::Setup(format!("no kubeconfig found ({e}); pass --kubeconfig"))
            })?,
        };
        let client = kube::Client::try_from(config)
            .map_err(setup_err("cannot create a Kubernetes client"))?;
        std::fs::create_dir_all(logs).map_err(|e| Error::io("cannot create the logs folder", e))?;
        let api: Api<EtcdCluster> = Api::namespaced(client.clone(), namespace);
        api.list(&ListParams::default().limit(1))
            .await
            .map_err(setup_err(
                "cannot list EtcdClusters (is the CRD applied? `kubectl apply -f deploy/`)",
            ))?;
        Ok(Kube {
            api,
            pods: Api::namespaced(client.clone(), namespace),
            secrets: Api::namespaced(client, namespace),
            tls: Arc::default(),
            namespace: namespace.into(),
            kubeconfig: kubeconfig.map(Path::to_path_buf),
            cluster: cluster.clone(),
            cache: Arc::default(),
            forwards: Arc::default(),
            logs: logs.into(),
        })
    }

    /// From now on the cluster is `c` (apply to make it so).
    pub fn set_cluster(&mut self, c: &ClusterSpec) {
        self.cluster = c.clone();
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The kubeconfig given, if any.
    pub fn kubeconfig(&self) -> Option<&Path> {
        self.kubeconfig.as_deref()
    }

    /// Applies the resource (server-side apply), paused or not.
    pub async fn apply(&self, paused: bool) -> Result<(), Error> {
        let mut spec = self.cluster.spec();
        spec.paused = paused;
        let doc = serde_json::json!({
            "apiVersion": etcd_operator::crd::API_VERSION,
            "kind": etcd_operator::crd::KIND,
            "metadata": {"name": self.cluster.name},
            "spec": spec,
        });
        self.api
            .patch(
                &self.cluster.name,
                &PatchParams::apply("soak").force(),
                &Patch::Apply(doc),
            )
            .await
            .map_err(kerr("cannot apply the EtcdCluster"))?;
        Ok(())
    }

    /// Reads the resource into the cache and keeps a port-forward to every
    /// member's pod; call about once a second.
    pub async fn refresh(&self) {
        let Ok(c) = self.api.get(&self.cluster.name).await else {
            return;
        };
        let members: Vec<(String, String)> = c
            .status
            .iter()
            .flat_map(|s| {
                s.members
                    .iter()
                    .map(|m| (m.name.clone(), m.client_url.clone()))
            })
            .collect();
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = Some(c);
        if members.iter().any(|(_, u)| u.starts_with("https://")) {
            self.refresh_tls().await;
        }
        for (name, url) in members {
            let alive = {
                let mut f = self.forwards.lock().unwrap_or_else(|e| e.into_inner());
                let running = f.get_mut(&name).map(|(_, _, p)| p.exited().is_none());
                if running == Some(false) {
                    f.remove(&name);
                }
                running == Some(true)
            };
            if !alive && let Err(e) = self.forward(&name, &url).await {
                tracing::debug!("port-forward to {name}: {e}");
            }
        }
    }

    async fn refresh_tls(&self) {
        let name = etcd_operator::platform::kube::tls::client_secret_name(&self.cluster.name);
        let Ok(Some(secret)) = self.secrets.get_opt(&name).await else {
            tracing::debug!("no readable secret {name} for the cluster's TLS members");
            return;
        };
        let text = |k: &str| {
            let d = secret.data.as_ref()?.get(k)?;
            String::from_utf8(d.0.clone()).ok()
        };
        if let (Some(ca), Some(cert), Some(key)) =
            (text("ca.crt"), text("tls.crt"), text("tls.key"))
        {
            *self.tls.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(etcd_operator::tls::ClientTls {
                    ca,
                    cert_key: etcd_operator::tls::CertKey { cert, key },
                    server_name: None,
                });
        }
    }

    /// The client certificate for a forwarded member URL, checked against
    /// the member's DNS name (the URL is a local port).
    pub fn tls_for(&self) -> crate::client::TlsFor {
        let (tls, forwards) = (self.tls.clone(), self.forwards.clone());
        Arc::new(move |url: &str| {
            let tls = tls.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
            let f = forwards.lock().unwrap_or_else(|e| e.into_inner());
            let original = f
                .values()
                .find(|(_, port, _)| url.ends_with(&format!("127.0.0.1:{port}")))
                .map(|(u, _, _)| u.clone());
            let host = original.and_then(|u| etcd_operator::tls::url_host(&u).map(str::to_string));
            Some(tls.with_server_name(host))
        })
    }

    async fn forward(&self, member: &str, url: &str) -> Result<(), Error> {
        let pods = self
            .pods
            .list(&ListParams::default().labels(&pod_selector(&self.cluster.name, member)))
            .await
            .map_err(kerr("cannot list pods"))?;
        let Some(pod) = pods.items.first().and_then(|p| p.metadata.name.clone()) else {
            return Ok(());
        };
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| Error::io("cannot find a free port", e))?
            .port();
        let mut cmd = Command::new("kubectl");
        if let Some(k) = &self.kubeconfig {
            cmd.arg("--kubeconfig").arg(k);
        }
        cmd.args([
            "port-forward",
            "--address",
            "127.0.0.1",
            "-n",
            &self.namespace,
        ])
        .arg(format!("pod/{pod}"))
        .arg(format!("{port}:2379"));
        let p = Proc::spawn(
            "kubectl port-forward",
            cmd,
            &self.logs.join(format!("port-forward-{member}.log")),
        )?;
        self.forwards
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(member.into(), (url.into(), port, p));
        Ok(())
    }

    /// Where the published status is read (the cache).
    pub fn status_source(&self) -> StatusSource {
        let cache = self.cache.clone();
        Arc::new(move || cache.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// Member client URL -> its port-forward.
    pub fn url_map(&self) -> UrlMap {
        let f = self.forwards.clone();
        Arc::new(move |url: &str| {
            let f = f.lock().unwrap_or_else(|e| e.into_inner());
            f.values()
                .find(|(u, _, _)| u == url)
                .map(|(_, port, _)| {
                    let scheme = if url.starts_with("https://") {
                        "https"
                    } else {
                        "http"
                    };
                    format!("{scheme}://127.0.0.1:{port}")
                })
                .unwrap_or_else(|| url.to_string())
        })
    }

    /// Deletes the resource and stops the port-forwards.
    pub async fn teardown(&self) {
        if let Err(e) = self
            .api
            .delete(&self.cluster.name, &DeleteParams::default())
            .await
        {
            tracing::warn!("cannot delete the EtcdCluster {}: {e}", self.cluster.name);
        }
        self.forwards
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// How often [`Kube::refresh`] should run.
    pub const REFRESH: Duration = Duration::from_secs(1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use etcd_operator::platform::kube::objects::member_labels;

    #[test]
    fn the_pod_selector_matches_the_members_pod_only() {
        let selects = |selector: &str, labels: &std::collections::BTreeMap<String, String>| {
            selector.split(',').all(|term| {
                term.split_once('=')
                    .is_some_and(|(k, v)| labels.get(k).is_some_and(|x| x == v))
            })
        };
        let sel = pod_selector("a", "a-1");
        assert!(selects(&sel, &member_labels("a", "a-1")), "{sel}");
        assert!(!selects(&sel, &member_labels("a", "a-2")), "another member");
        assert!(
            !selects(&sel, &member_labels("b", "a-1")),
            "a same-named member of another cluster"
        );
    }
}
