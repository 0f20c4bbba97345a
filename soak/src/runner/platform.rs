//! The two platforms behind one face: create the cluster, read its status,
//! reach its members, tend it (restart a dead operator; refresh the kube
//! cache and port-forwards) and tear it down.

use std::sync::Arc;

use super::Error;
use super::kube::Kube;
use super::local::Local;
use crate::probe::{self, UrlMap};

pub(super) enum Platform {
    Local(Box<Local>),
    Kube(Box<Kube>),
}

impl Platform {
    pub(super) async fn create(&self, paused: bool) -> Result<(), Error> {
        match self {
            Platform::Local(l) => l.write_manifest(paused),
            Platform::Kube(k) => k.apply(paused).await,
        }
    }

    /// Changes the cluster's spec.
    pub(super) async fn change(
        &mut self,
        c: &crate::scenario::ClusterSpec,
        paused: bool,
    ) -> Result<(), Error> {
        match self {
            Platform::Local(l) => l.set_cluster(c),
            Platform::Kube(k) => k.set_cluster(c),
        }
        self.create(paused).await
    }

    /// The cluster as the operator got it (local platform: its backups'
    /// place as the run set it); `None` on Kubernetes.
    pub(super) fn primary(&self) -> Option<crate::scenario::ClusterSpec> {
        match self {
            Platform::Local(l) => Some(l.cluster().clone()),
            Platform::Kube(_) => None,
        }
    }

    /// Creates another cluster beside the scenario's (a standby; local
    /// platform only, as the scenario's checks say).
    pub(super) fn create_other(&self, c: &crate::scenario::ClusterSpec) -> Result<(), Error> {
        match self {
            Platform::Local(l) => l.write_other(c),
            Platform::Kube(_) => Err(Error::Setup(format!(
                "standby: {} cannot be created on Kubernetes (local platform only)",
                c.name
            ))),
        }
    }

    /// Destroys the place of cluster `name` ([`Local::destroy`]; local
    /// platform only, as the scenario's checks say): the members killed
    /// and when.
    pub(super) fn destroy(&mut self, name: &str) -> Result<(usize, crate::history::Ms), Error> {
        match self {
            Platform::Local(l) => tokio::task::block_in_place(|| l.destroy(name)),
            Platform::Kube(_) => Err(Error::Setup(format!(
                "standby.losePrimaryAt: {name} cannot be destroyed on Kubernetes (local platform \
                 only)"
            ))),
        }
    }

    /// Where the published status of another cluster is read (local
    /// platform; on Kubernetes it reads nothing).
    pub(super) fn status_of(&self, name: &str) -> probe::StatusSource {
        match self {
            Platform::Local(l) => l.status_of(name),
            Platform::Kube(_) => Arc::new(|| None),
        }
    }

    /// The chains of continuous backups in the run's object store, read
    /// back as a restore would read them (local platform with `store:`).
    pub(super) async fn store_chains(&self) -> Option<crate::data::StoreChains> {
        match self {
            Platform::Local(l) => l.store_chains().await,
            Platform::Kube(_) => None,
        }
    }

    pub(super) fn status(&self) -> probe::StatusSource {
        match self {
            Platform::Local(l) => l.status_source(),
            Platform::Kube(k) => k.status_source(),
        }
    }

    /// The client certificate for `https://` member URLs (as mapped).
    pub(super) fn tls_for(&self) -> crate::client::TlsFor {
        match self {
            Platform::Local(l) => l.tls_for(),
            Platform::Kube(k) => k.tls_for(),
        }
    }

    pub(super) fn url_map(&self) -> UrlMap {
        match self {
            Platform::Local(_) => Arc::new(|u: &str| u.to_string()),
            Platform::Kube(k) => k.url_map(),
        }
    }

    pub(super) async fn tend(&mut self) -> Option<String> {
        match self {
            Platform::Local(l) => l.supervise(),
            Platform::Kube(k) => {
                let notes = k.refresh().await;
                k.unsaid.say(notes)
            }
        }
    }

    /// [`Platform::tend`] where its notes have nowhere to go yet (the
    /// cluster being brought up): kept for the next `tend` to say, so the
    /// report says how each member was first reached.
    pub(super) async fn tend_keeping(&mut self) {
        match self {
            Platform::Local(l) => {
                l.supervise();
            }
            Platform::Kube(k) => {
                let notes = k.refresh().await;
                k.unsaid.keep(notes);
            }
        }
    }

    pub(super) fn log_tail(&self) -> String {
        match self {
            Platform::Local(l) => format!(
                "\n--- operator log (last lines) ---\n{}",
                l.operator_log_tail(30)
            ),
            Platform::Kube(_) => String::new(),
        }
    }

    /// The operator's metrics (local platform: the runner's own operator;
    /// on Kubernetes it runs in the cluster, out of the runner's reach).
    pub(super) async fn operator_metrics(&self) -> Result<String, String> {
        match self {
            Platform::Local(l) => tokio::task::block_in_place(|| l.operator_metrics()),
            Platform::Kube(_) => Err("the operator runs in the cluster; scrape it there \
                 (deploy/monitoring/servicemonitor.yaml)"
                .into()),
        }
    }

    pub(super) async fn teardown(&mut self) {
        match self {
            Platform::Local(l) => tokio::task::block_in_place(|| l.teardown()),
            Platform::Kube(k) => k.teardown().await,
        }
    }
}
