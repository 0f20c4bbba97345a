//! The local platform: members are etcd processes recorded under the
//! operator's state folder (`STATE/clusters/NAME/members/MEMBER/member.json`),
//! the operator is the process named in `STATE/operator.lock`.
//!
//! Every signal goes through the operator library's `process::signal`,
//! which opens a pidfd and then checks the pid's start time, so a process
//! that exited and whose pid was reused is never hit.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use etcd_operator::etcd::Clients;
use etcd_operator::faults::Fault;
use etcd_operator::platform::local::layout::Layout;
use etcd_operator::platform::local::process::{self, ProcessId};
use etcd_operator::platform::local::running_operator;
use etcd_operator::tls::ClientTls;
use rustix::process::Signal;

use super::{
    Error, LastingPlan, MemberKey, Observed, ObservedCluster, Operator, Platform, old_enough,
};
use crate::config::{Config, FaultOptions};
use crate::rng::Rng;
use crate::roles::{self, Ask};
use crate::select::MemberView;

mod faults;
mod member;
pub mod paused;
pub mod store;

pub use faults::{Lasting, NetLasting};

/// SIGKILL cannot be caught; this only bounds a process stuck in the kernel.
const EXIT_WAIT: Duration = Duration::from_secs(30);

/// The process name of the operator (`/proc/PID/comm`).
const OPERATOR_COMM: &str = "etcd-operator";

/// The members under one state folder.
#[derive(Debug)]
pub struct Local {
    layout: Layout,
    clients: Clients,
    /// The cgroup v2 mount, once network faults were prepared.
    cgroup_root: std::sync::OnceLock<PathBuf>,
}

/// A process as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handle {
    /// The process (pid and start time).
    pub process: ProcessId,
    /// The member's etcd data folder (`None` for the operator).
    pub data_dir: Option<PathBuf>,
    /// The member's own loopback address (`None` for the operator).
    pub ip: Option<std::net::Ipv4Addr>,
    /// The member's client URL (`None` for the operator).
    pub client_url: Option<String>,
    /// Where it listens, when it is the object store (`--target store`):
    /// its pause is recorded for `--cleanup` ([`store::Record`]).
    pub store: Option<std::net::SocketAddrV4>,
}

impl Local {
    /// The members under `state_dir`.
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        Local {
            layout: Layout::new(state_dir),
            clients: Clients::new(roles::STATUS_TIMEOUT),
            cgroup_root: std::sync::OnceLock::new(),
        }
    }

    /// The state folder.
    pub fn state_dir(&self) -> &Path {
        self.layout.root()
    }

    async fn observe_cluster(
        &self,
        cluster: &str,
        paused: &HashSet<MemberKey>,
        min_age: Duration,
        now: SystemTime,
    ) -> Result<ObservedCluster<Handle>, Error> {
        let names = self
            .layout
            .member_names(cluster)
            .map_err(io_err(format!("cannot list the members of {cluster}")))?;
        let mut members = Vec::new();
        let mut asks = Vec::new();
        for name in names {
            let record = self
                .layout
                .read_member(cluster, &name)
                .map_err(io_err(format!("cannot read member {cluster}/{name}")))?;
            // A member folder without a record is still being created.
            let Some(record) = record else { continue };
            let process = record.process.filter(process::alive);
            let is_paused = paused.contains(&(cluster.to_string(), name.clone()));
            let running = process.is_some() && !is_paused;
            let started = record
                .started_at
                .as_deref()
                .and_then(|t| humantime::parse_rfc3339_weak(t).ok());
            asks.push(Ask {
                name: name.clone(),
                url: running.then(|| record.config.addr.client_url.clone()),
            });
            members.push(Observed {
                view: MemberView {
                    eligible: running && old_enough(started, min_age, now),
                    name: name.clone(),
                    role: etcd_operator::faults::Role::Unknown,
                    running,
                },
                handle: process.map(|p| Handle {
                    process: p,
                    data_dir: Some(self.layout.data_dir(cluster, &name)),
                    ip: Some(record.ip),
                    client_url: Some(record.config.addr.client_url.clone()),
                    store: None,
                }),
                role_source: None,
            });
        }
        self.register_tls(cluster, &asks);
        let roles = roles::lookup(&self.clients, &asks).await;
        let sources = roles::etcd_sources(&roles);
        for ((m, role), source) in members.iter_mut().zip(roles).zip(sources) {
            m.view.role = role;
            m.role_source = source;
        }
        Ok(ObservedCluster {
            name: cluster.to_string(),
            members,
        })
    }
}

impl Local {
    /// Members with `https://` client URLs are asked with the client
    /// certificate the cluster's published status names.
    fn register_tls(&self, cluster: &str, asks: &[Ask]) {
        if !asks
            .iter()
            .flat_map(|a| &a.url)
            .any(|u| u.starts_with("https://"))
        {
            return;
        }
        let status: Option<etcd_operator::crd::EtcdCluster> =
            etcd_operator::platform::local::layout::read_json(&self.layout.status_path(cluster))
                .ok()
                .flatten();
        let tls = match ClientTls::from_status(status.as_ref().and_then(|c| c.status.as_ref())) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(%cluster, "cannot read the client certificate for TLS members: {e}");
                None
            }
        };
        for url in asks.iter().flat_map(|a| &a.url) {
            self.clients.set_tls(url, tls.clone());
        }
    }
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

fn gone(h: &Handle) -> Error {
    Error::Gone(format!("process {}", h.process.pid))
}

/// Sends `sig`; `Gone` if the process is no longer the observed one.
pub(crate) fn send(h: &Handle, sig: Signal) -> Result<(), Error> {
    match process::signal(&h.process, sig) {
        Ok(true) => Ok(()),
        Ok(false) => Err(gone(h)),
        Err(e) => Err(Error::Io {
            what: format!("cannot signal process {}", h.process.pid),
            source: e,
        }),
    }
}

pub(crate) async fn wait_gone(h: &Handle) -> Result<(), Error> {
    match tokio::time::timeout(EXIT_WAIT, process::wait_exit(h.process)).await {
        Ok(r) => r
            .map(|_| ())
            .map_err(io_err(format!("cannot wait for process {}", h.process.pid))),
        Err(_) => Err(Error::Io {
            what: format!("process {} did not exit", h.process.pid),
            source: io::Error::from(io::ErrorKind::TimedOut),
        }),
    }
}

/// Kills the process and wipes its data folder. The process is stopped
/// first and its data moved aside while it is frozen, so the operator can
/// never restart it in place with its old data in between; the moved copy
/// is deleted once the process is gone.
async fn destroy(h: &Handle) -> Result<(), Error> {
    let Some(data) = &h.data_dir else {
        return Err(Error::Unsupported(
            "the operator has no data to destroy".into(),
        ));
    };
    send(h, Signal::STOP)?;
    let aside = data.with_file_name(format!(".data-destroyed-{}", h.process.pid));
    match std::fs::rename(data, &aside) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            let _ = process::signal(&h.process, Signal::CONT);
            return Err(Error::Io {
                what: format!("cannot move {} aside", data.display()),
                source: e,
            });
        }
    }
    send(h, Signal::KILL)?;
    wait_gone(h).await?;
    match std::fs::remove_dir_all(&aside) {
        Ok(()) => Ok(()),
        // The operator may have deleted the whole member folder meanwhile.
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => {
            tracing::warn!(
                "the data is gone from {}, but {} is left: {e}",
                data.display(),
                aside.display()
            );
            Ok(())
        }
    }
}

impl Local {
    /// SIGSTOPs the process; a store's pause is recorded first, so that
    /// `--cleanup` resumes it if this monkey is killed.
    fn pause(&self, h: &Handle) -> Result<(), Error> {
        let Some(addr) = h.store else {
            return send(h, Signal::STOP);
        };
        let record = store::Record::mine(h.process, addr)?;
        record.write(self.state_dir())?;
        let sent = send(h, Signal::STOP);
        if sent.is_err() {
            record.remove(self.state_dir());
        }
        sent
    }

    /// SIGCONTs the process, and forgets a store's pause.
    fn resume_process(&self, h: &Handle) -> Result<(), Error> {
        let sent = send(h, Signal::CONT);
        if let (Some(addr), Ok(_) | Err(Error::Gone(_))) = (h.store, &sent) {
            store::Record::mine(h.process, addr)?.remove(self.state_dir());
        }
        sent
    }
}

impl Platform for Local {
    type Handle = Handle;

    /// From each cluster's published status file.
    async fn standbys(&self, clusters: &[String]) -> HashSet<String> {
        clusters
            .iter()
            .filter(|c| {
                let status: Option<etcd_operator::crd::EtcdCluster> =
                    etcd_operator::platform::local::layout::read_json(&self.layout.status_path(c))
                        .ok()
                        .flatten();
                super::following(status.as_ref().and_then(|s| s.status.as_ref()))
            })
            .cloned()
            .collect()
    }

    async fn clusters(&self) -> Result<Vec<String>, Error> {
        self.layout.cluster_names().map_err(io_err(format!(
            "cannot list the clusters under {}",
            self.layout.clusters_dir().display()
        )))
    }

    async fn observe(
        &self,
        clusters: &[String],
        paused: &HashSet<MemberKey>,
        min_age: Duration,
        now: SystemTime,
    ) -> Result<Vec<ObservedCluster<Handle>>, Error> {
        let mut out = Vec::new();
        for cluster in clusters {
            let c = self.observe_cluster(cluster, paused, min_age, now).await?;
            if !c.members.is_empty() {
                out.push(c);
            }
        }
        Ok(out)
    }

    async fn inject(&self, fault: Fault, h: &Handle) -> Result<(), Error> {
        match fault {
            Fault::Kill => {
                send(h, Signal::KILL)?;
                wait_gone(h).await
            }
            Fault::Destroy => destroy(h).await,
            Fault::Pause => self.pause(h),
            Fault::Resume => self.resume_process(h),
            other => Err(Error::Unsupported(format!(
                "{} is not injected by inject()",
                other.as_str()
            ))),
        }
    }

    async fn resume(&self, h: &Handle) -> Result<(), Error> {
        self.resume_process(h)
    }

    type Lasting = Lasting;

    async fn prepare(&self, cfg: &Config) -> Result<Option<String>, Error> {
        if let Some(at) = cfg.store_at() {
            // A process there that is not the store is refused at once.
            store::identify(&self.layout, at).map_err(|e| match e {
                Error::Refused(m) => Error::Setup(m),
                other => other,
            })?;
        }
        faults::prepare(self, cfg)
    }

    async fn start(&self, plan: &LastingPlan<Handle>) -> Result<(Lasting, String), Error> {
        faults::start(self, plan).await
    }

    async fn settled(&self, lasting: &mut Lasting) -> Option<String> {
        faults::settled(self, lasting).await
    }

    async fn heal(&self, lasting: &Lasting) -> Result<(), Error> {
        faults::heal(lasting)
    }

    async fn damage(
        &self,
        fault: Fault,
        h: &Handle,
        options: &FaultOptions,
        rng: Rng,
    ) -> Result<String, Error> {
        faults::damage(fault, h, options, rng).await
    }

    async fn operator(&self) -> Result<Option<Operator<Handle>>, Error> {
        let Some(process) = running_operator(self.layout.root()) else {
            tracing::debug!(
                "no etcd-operator holds {}",
                self.layout.lock_path().display()
            );
            return Ok(None);
        };
        // The lock names the process exactly (pid and start time); the
        // name check guards against a lock written by something else.
        let comm =
            std::fs::read_to_string(format!("/proc/{}/comm", process.pid)).unwrap_or_default();
        if comm.trim_end() != OPERATOR_COMM {
            tracing::debug!(
                "pid {} in the lock file is {:?}, not {OPERATOR_COMM}",
                process.pid,
                comm.trim_end()
            );
            return Ok(None);
        }
        Ok(Some(Operator {
            name: OPERATOR_COMM.to_string(),
            handle: Handle {
                process,
                data_dir: None,
                ip: None,
                client_url: None,
                store: None,
            },
        }))
    }

    /// The process listening on exactly `at` (see [`store`] for what is
    /// refused), named in the fault log `store@ADDR`.
    async fn store(&self, at: store::StoreAt) -> Result<Option<Operator<Handle>>, Error> {
        let Some(process) = store::identify(&self.layout, at)? else {
            tracing::debug!("no process listens on {}", at.addr);
            return Ok(None);
        };
        Ok(Some(Operator {
            name: format!("store@{}", at.addr),
            handle: Handle {
                process,
                data_dir: None,
                ip: None,
                client_url: None,
                store: Some(at.addr),
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_not_an_operator() {
        let dir = tempfile::tempdir().expect("tempdir");
        let me = ProcessId::of(i32::try_from(std::process::id()).expect("pid")).expect("alive");
        let layout = Layout::new(dir.path());
        std::fs::write(
            layout.lock_path(),
            format!("pid {} start {}\n", me.pid, me.start_time),
        )
        .expect("lock");
        assert_eq!(
            running_operator(dir.path()),
            Some(me),
            "the lock names us exactly"
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("rt");
        let target = Local::new(dir.path());
        let op = rt.block_on(target.operator()).expect("no error");
        assert!(op.is_none(), "a test binary is not an etcd-operator");
    }
}
