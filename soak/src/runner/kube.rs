//! The Kubernetes platform (untested here: this machine has no cluster).
//! The operator is already deployed; the runner applies the EtcdCluster
//! resource, reads its status from the API, reaches each member through
//! kube-rs's own port-forward to its pod (labels `etcdoperator.dev/cluster`
//! and `etcdoperator.dev/member`), or at its client URL where that resolves
//! and a port-forward cannot be opened ([`super::forward`]; no kubectl),
//! runs the chaos monkey with `--platform kube`, and deletes the resource
//! at the end.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_operator::crd::EtcdCluster;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};

use super::Error;
use super::forward::Forwards;
use crate::probe::{StatusSource, UrlMap};
use crate::scenario::ClusterSpec;

/// The Kubernetes platform.
pub struct Kube {
    api: Api<EtcdCluster>,
    namespace: String,
    kubeconfig: Option<PathBuf>,
    cluster: ClusterSpec,
    cache: Arc<Mutex<Option<EtcdCluster>>>,
    forwards: Forwards,
    secrets: Api<k8s_openapi::api::core::v1::Secret>,
    /// The client certificate of a cluster whose clients use TLS (its
    /// Secret `CLUSTER-client-tls`), read again at every refresh.
    tls: Arc<Mutex<Option<etcd_operator::tls::ClientTls>>>,
    /// What the routes to the members said while the cluster was being
    /// brought up, for the report's notes ([`super::notes::Notes`]).
    pub(super) unsaid: super::notes::Notes,
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
        etcd_operator::tls::install_crypto_provider();
        let client = kube::Client::try_from(config)
            .map_err(setup_err("cannot create a Kubernetes client"))?;
        std::fs::create_dir_all(logs).map_err(|e| Error::io("cannot create the logs folder", e))?;
        let api: Api<EtcdCluster> = Api::namespaced(client.clone(), namespace);
        api.list(&ListParams::default().limit(1))
            .await
            .map_err(setup_err(
                "cannot list EtcdClusters (is the operator installed? `kubectl apply -k deploy/`)",
            ))?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        Ok(Kube {
            api,
            secrets: Api::namespaced(client, namespace),
            tls: Arc::default(),
            namespace: namespace.into(),
            kubeconfig: kubeconfig.map(Path::to_path_buf),
            cluster: cluster.clone(),
            cache: Arc::default(),
            forwards: Forwards::new(pods, &cluster.name),
            unsaid: super::notes::Notes::default(),
        })
    }

    /// From now on the cluster is `c` (apply to make it so).
    pub fn set_cluster(&mut self, c: &ClusterSpec) {
        self.cluster = c.clone();
        self.forwards.set_cluster(&c.name);
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
        let mut spec = self.cluster.spec.clone();
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

    /// Reads the resource into the cache and keeps a route to every
    /// member; call about once a second. Returns what to say about routes
    /// new or changed (port-forward or client URL).
    pub async fn refresh(&self) -> Vec<String> {
        let Ok(c) = self.api.get(&self.cluster.name).await else {
            return Vec::new();
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
        let notes = self.forwards.tend(&members).await;
        for n in &notes {
            tracing::info!("{n}");
        }
        notes
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
        let tls = self.tls.clone();
        let original = self.forwards.original();
        Arc::new(move |url: &str| {
            let tls = tls.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
            let host =
                original(url).and_then(|u| etcd_operator::tls::url_host(&u).map(str::to_string));
            Some(tls.with_server_name(host))
        })
    }

    /// Where the published status is read (the cache).
    pub fn status_source(&self) -> StatusSource {
        let cache = self.cache.clone();
        Arc::new(move || cache.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// Member client URL -> where it is reached from here.
    pub fn url_map(&self) -> UrlMap {
        Arc::new(self.forwards.mapper())
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
        self.forwards.clear();
    }

    /// How often [`Kube::refresh`] should run.
    pub const REFRESH: Duration = Duration::from_secs(1);
}
