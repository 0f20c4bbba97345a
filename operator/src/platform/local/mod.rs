//! The local platform: each member a real etcd process on its own loopback
//! address, its data and log in the state folder.
//!
//! Members are detached: they outlive the operator, and a new operator
//! adopts them (it finds them by pid and start time, and watches them
//! through a pidfd) without restarting them.

pub mod addr;
mod aside;
pub mod backup_job;
pub mod backup_place;
pub mod backups;
pub mod binaries;
#[cfg(test)]
mod chain_tests;
pub mod deleted;
pub mod events;
pub mod follow_job;
pub mod layout;
pub mod merge;
pub mod object_backups;
pub mod object_chain;
#[cfg(test)]
mod owned_tests;
pub mod process;
mod records;
pub mod restore_check;
pub mod safe_path;
mod scratch;
pub mod space;
pub mod standby_auth;
mod state;
pub mod status_file;
pub mod tls;

use self::state::lock;
pub use self::state::{kill_all, running_members, running_operator};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc;

use self::backups::LocalBackups;
use self::binaries::Binaries;
use self::layout::{Layout, MemberRecord, tail, write_json};
use self::process::ProcessId;
use self::records::Kept;
use super::{
    ClusterRecord, Error, Event, MemberAddr, MemberConfig, Platform, PlatformMember, Result,
    Settings, io_err,
};
use crate::backup::RestoreSource;
use crate::crd::EtcdCluster;
use crate::member::flags::{Listen, etcd_args};
use crate::member::hints::failure_hint;
use crate::member::{CLIENT_PORT, MemberTls, PEER_PORT};

/// How long a member gets to stop on SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How long a deleted cluster's folder is kept by default (`run
/// --keep-deleted`).
pub const DEFAULT_KEEP_DELETED: Duration = Duration::from_secs(7 * 86_400);

/// Members as local processes.
#[derive(Debug)]
pub struct LocalPlatform {
    layout: Layout,
    binaries: Arc<Binaries>,
    backups: Arc<LocalBackups>,
    events: mpsc::UnboundedSender<Event>,
    watched: Arc<Mutex<HashSet<ProcessId>>>,
    /// The latest status of each cluster, kept even when its file cannot
    /// be written (a full disk): `etcd-operator status` asks for it.
    statuses: Mutex<BTreeMap<String, EtcdCluster>>,
    /// What each cluster's status file holds, and since when (see
    /// [`status_file`]).
    written: Mutex<HashMap<String, (EtcdCluster, Instant)>>,
    /// Records and checked paths kept in memory ([`records`]).
    kept: Kept,
    /// Each cluster's resource as last prepared: kept with its data when
    /// the cluster is deleted ([`deleted`]).
    resources: Mutex<HashMap<String, EtcdCluster>>,
    /// How long a deleted cluster's folder is kept ([`deleted`]).
    keep_deleted: Duration,
    /// What was announced about each cluster ([`events`]).
    announced: events::EventLogs,
    _lock: File,
}

impl LocalPlatform {
    /// Opens the state folder (creating it), taking its lock so that one
    /// operator at a time manages it. Member exits are sent to `events`.
    pub fn open(
        state_dir: impl Into<PathBuf>,
        binaries: Arc<Binaries>,
        events: mpsc::UnboundedSender<Event>,
    ) -> Result<Self> {
        let state_dir: PathBuf = state_dir.into();
        std::fs::create_dir_all(state_dir.join("clusters")).map_err(io_err(format!(
            "cannot create the state folder {}",
            state_dir.display()
        )))?;
        // Absolute, so members' addresses (derived from it) differ between
        // state folders given by the same relative path.
        let layout = Layout::new(std::fs::canonicalize(&state_dir).unwrap_or(state_dir.clone()));
        let lock = lock(&layout)?;
        Ok(LocalPlatform {
            layout,
            backups: Arc::new(LocalBackups::new(state_dir, binaries.clone())),
            binaries,
            events,
            watched: Arc::default(),
            statuses: Mutex::default(),
            written: Mutex::default(),
            kept: Kept::default(),
            resources: Mutex::default(),
            keep_deleted: DEFAULT_KEEP_DELETED,
            announced: events::EventLogs::default(),
            _lock: lock,
        })
    }

    /// Keeps a deleted cluster's folder for `keep` (default
    /// [`DEFAULT_KEEP_DELETED`]) before it is purged.
    pub fn with_keep_deleted(mut self, keep: Duration) -> Self {
        self.keep_deleted = keep;
        self
    }

    /// The state folder's layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The latest status of every cluster, as published (also when its
    /// file could not be written).
    pub fn statuses(&self) -> Vec<EtcdCluster> {
        let statuses = self.statuses.lock().unwrap_or_else(|e| e.into_inner());
        statuses.values().cloned().collect()
    }

    /// The events announced about `cluster`, oldest first ([`events`]).
    pub fn events(&self, cluster: &str) -> Vec<events::ClusterEvent> {
        match self.path(cluster, &[events::FILE]) {
            Ok(path) => self.announced.get(cluster, &path),
            Err(_) => Vec::new(),
        }
    }

    /// The binaries in use.
    pub fn binaries(&self) -> &Arc<Binaries> {
        &self.binaries
    }

    /// Sends an event when the process exits (once per process).
    fn watch(&self, cluster: &str, member: &str, id: ProcessId) {
        let mut watched = self.watched.lock().unwrap_or_else(|e| e.into_inner());
        if !watched.insert(id) {
            return;
        }
        let (events, set) = (self.events.clone(), self.watched.clone());
        let (cluster, member) = (cluster.to_string(), member.to_string());
        tokio::spawn(async move {
            let exit = process::wait_exit(id).await.unwrap_or_else(|e| {
                tracing::warn!(%cluster, %member, "cannot watch member process: {e}");
                process::Exit::Unknown
            });
            set.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            let crashed = exit.crashed();
            let _ = events.send(Event::Exited {
                cluster,
                member,
                crashed,
            });
        });
    }

    fn spawn_member(&self, cluster: &str, record: &mut MemberRecord) -> Result<()> {
        let name = record.config.addr.name.clone();
        let version = record.config.version;
        let tools = self.binaries.find(version).ok_or_else(|| {
            Error::Version(format!(
                "no etcd {version} binary for member {name}; run ci/setup"
            ))
        })?;
        let data = self.path(cluster, &["members", &name, "data"])?;
        std::fs::create_dir_all(&data)
            .map_err(io_err(format!("cannot create {}", data.display())))?;
        let tls_dir = self.path(cluster, &["members", &name, "tls"])?;
        let mut args = etcd_args(&record.config, &data, &tls_dir, Listen::Advertised);
        if record.config.backend.standby {
            args.extend(self.standby_token_flag(cluster)?);
        }
        let log = self.path(cluster, &["members", &name, "etcd.log"])?;
        let id = process::spawn(&tools.etcd, &args, &log)
            .map_err(io_err(format!("cannot start {}", tools.etcd.display())))?;
        record.process = Some(id);
        record.started_at = Some(humantime::format_rfc3339_millis(SystemTime::now()).to_string());
        self.save_member(cluster, record)?;
        self.watch(cluster, &name, id);
        tracing::info!(%cluster, member = %name, pid = id.pid, %version, "started etcd");
        Ok(())
    }

    /// Fills a new member's data folder from a snapshot.
    async fn restore_data(
        &self,
        cluster: &str,
        config: &MemberConfig,
        snapshot: &RestoreSource,
    ) -> Result<()> {
        let data = self.path(cluster, &["members", &config.addr.name, "data"])?;
        self.remove_dir(cluster, &["members", &config.addr.name, "data"])?;
        let target = crate::backup::tools::RestoreTarget {
            name: &config.addr.name,
            initial_cluster: &config.initial_cluster,
            token: &config.token,
            peer_url: &config.addr.peer_url,
            data_dir: &data,
        };
        let snapshot = std::path::Path::new(snapshot.as_str());
        crate::backup::tools::restore(&self.binaries, config.version, snapshot, &target)
            .await
            .map_err(Error::Restore)
    }

    fn running(record: &MemberRecord) -> Option<ProcessId> {
        record.process.filter(process::alive)
    }

    /// The size and modification time of a member's database file, read
    /// without asking etcd (one `fstat` of a handle kept on the file, see
    /// [`records`]): while they stand still, etcd committed nothing, so it
    /// raised no alarm either (an alarm is stored in the database too).
    /// `None` when the file cannot be read. Read only, so the path is not
    /// walked for links as [`Self::path`] does; the last part (`db`) must
    /// be no symlink.
    pub fn db_stamp(&self, cluster: &str, member: &str) -> Option<(u64, SystemTime)> {
        self.kept.db_stamp(cluster, member, || {
            self.layout.data_dir(cluster, member).join("member/snap/db")
        })
    }

    /// The end of a member's log, for error messages.
    pub fn log_tail(&self, cluster: &str, member: &str, lines: usize) -> String {
        tail(&self.layout.log_path(cluster, member), lines)
    }

    fn taken_ips(&self) -> HashSet<Ipv4Addr> {
        let mut taken = HashSet::new();
        for cluster in self.layout.cluster_names().unwrap_or_default() {
            for member in self.layout.member_names(&cluster).unwrap_or_default() {
                if let Ok(Some(r)) = self.layout.read_member(&cluster, &member) {
                    taken.insert(r.ip);
                }
            }
        }
        taken
    }
}

impl Platform for LocalPlatform {
    type Backups = LocalBackups;

    fn backups(&self) -> Arc<LocalBackups> {
        self.backups.clone()
    }

    /// The operator's own store: it reads folders and buckets alike.
    async fn standby_reads(
        &self,
        _cluster: &str,
        _location: &crate::backup::Location,
    ) -> Result<Arc<LocalBackups>> {
        Ok(self.backups.clone())
    }

    /// Nothing to do: a member's process and folder are all it needs.
    async fn prepare(
        &self,
        cluster: &str,
        resource: &EtcdCluster,
        _: usize,
        _: bool,
    ) -> Result<()> {
        let mut resources = self.resources.lock().unwrap_or_else(|e| e.into_inner());
        resources.insert(cluster.to_string(), resource.clone());
        Ok(())
    }

    /// Nothing to forget: what is kept in memory about a cluster (its
    /// records, see [`records`]) is forgotten when it is deleted, and the
    /// exit watchers end with their processes.
    fn forget(&self, _: &str) {}

    async fn members(&self, cluster: &str) -> Result<Vec<PlatformMember>> {
        self.path(cluster, &[])?;
        let names = self
            .layout
            .member_names(cluster)
            .map_err(io_err(format!("cannot list the members of {cluster}")))?;
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let Ok(record) = self.record(cluster, &name) else {
                continue; // a folder without a record is a member half-created
            };
            let running = Self::running(&record);
            if let Some(id) = running {
                self.watch(cluster, &name, id);
            }
            out.push(PlatformMember {
                has_data: self.layout.has_data(cluster, &name),
                running: running.is_some(),
                version: record.config.version,
                tuning: record.config.tuning,
                backend: record.config.backend.clone(),
                pod: record.config.pod.clone(),
                volume: None,
                bootstrap: record.config.bootstrap,
                started_at: record
                    .started_at
                    .as_deref()
                    .and_then(|t| humantime::parse_rfc3339_weak(t).ok()),
                call_url: Some(record.config.addr.client_url.clone()),
                metrics_url: crate::tls::url_host(&record.config.addr.client_url)
                    .map(|h| crate::member::metrics::url(h, crate::member::flags::METRICS_PORT)),
                crash_looping: false,
                problem: None,
                pod_ready: None,
                moving: None,
                tls: record.config.tls,
                addr: record.config.addr,
            });
        }
        Ok(out)
    }

    async fn allocate(&self, cluster: &str, names: &[String]) -> Result<Vec<MemberAddr>> {
        let mut taken = self.taken_ips();
        let mut out = Vec::new();
        for name in names {
            let seed = format!("{}/{cluster}/{name}", self.layout.root().display());
            let ip = addr::allocate(&seed, &taken)
                .map_err(io_err(format!("cannot find an address for {name}")))?;
            taken.insert(ip);
            out.push(MemberAddr {
                name: name.clone(),
                peer_url: format!("http://{ip}:{PEER_PORT}"),
                client_url: format!("http://{ip}:{CLIENT_PORT}"),
            });
        }
        Ok(out)
    }

    async fn create(
        &self,
        cluster: &str,
        config: &MemberConfig,
        restore_from: Option<&RestoreSource>,
    ) -> Result<()> {
        let name = &config.addr.name;
        if let Ok(existing) = self.record(cluster, name)
            && Self::running(&existing).is_some()
        {
            return Ok(());
        }
        let ip = url_ip(&config.addr.peer_url).ok_or_else(|| {
            Error::Version(format!(
                "peer URL {} is not an IPv4 URL",
                config.addr.peer_url
            ))
        })?;
        let mut record = MemberRecord {
            config: config.clone(),
            ip,
            process: None,
            started_at: None,
        };
        self.save_member(cluster, &record)?;
        if let Some(snapshot) = restore_from {
            self.restore_data(cluster, config, snapshot).await?;
            // This start only (the field is never recorded).
            record.config.fresh_restore = true;
        }
        self.spawn_member(cluster, &mut record)
    }

    async fn start(&self, cluster: &str, member: &str) -> Result<()> {
        let mut record = self.record(cluster, member)?;
        if Self::running(&record).is_some() {
            return Ok(());
        }
        self.spawn_member(cluster, &mut record)
    }

    async fn restart(&self, cluster: &str, member: &str, settings: &Settings) -> Result<()> {
        let mut record = self.record(cluster, member)?;
        settings.apply(&mut record.config);
        self.save_member(cluster, &record)?;
        if let Some(id) = Self::running(&record) {
            process::stop(id, STOP_GRACE)
                .await
                .map_err(io_err(format!("cannot stop {member}")))?;
        }
        self.spawn_member(cluster, &mut record)
    }

    async fn reconfigure(
        &self,
        cluster: &str,
        member: &str,
        addr: &MemberAddr,
        tls: &MemberTls,
    ) -> Result<()> {
        let mut record = self.record(cluster, member)?;
        if let Some(id) = Self::running(&record) {
            process::stop(id, STOP_GRACE)
                .await
                .map_err(io_err(format!("cannot stop {member}")))?;
        }
        record.config.addr = addr.clone();
        record.config.tls = tls.clone();
        self.save_member(cluster, &record)?;
        self.spawn_member(cluster, &mut record)
    }

    async fn delete(&self, cluster: &str, member: &str) -> Result<()> {
        self.path(cluster, &["members", member])?;
        if let Ok(record) = self.record(cluster, member)
            && let Some(id) = record.process
        {
            process::kill(id)
                .await
                .map_err(io_err(format!("cannot stop {member}")))?;
        }
        self.kept.forget_member(cluster, member);
        self.remove_dir(cluster, &["members", member])
    }

    async fn force_new_cluster(&self, cluster: &str, member: &str) -> Result<()> {
        let mut record = self.record(cluster, member)?;
        if let Some(id) = Self::running(&record) {
            process::stop(id, STOP_GRACE)
                .await
                .map_err(io_err(format!("cannot stop {member}")))?;
        }
        record.config.force_new_cluster = true;
        self.save_member(cluster, &record)?;
        self.spawn_member(cluster, &mut record)
    }

    async fn end_force_new_cluster(&self, cluster: &str, member: &str) -> Result<()> {
        let mut record = self.record(cluster, member)?;
        if record.config.force_new_cluster {
            record.config.force_new_cluster = false;
            self.save_member(cluster, &record)?;
        }
        Ok(())
    }

    async fn retire_members(&self, cluster: &str, tag: &str) -> Result<String> {
        self.retire(cluster, tag).await
    }

    async fn delete_cluster(&self, cluster: &str) -> Result<()> {
        self.announced.forget(cluster);
        self.set_cluster_aside(cluster).await
    }

    async fn announce(&self, cluster: &str, notice: &super::Notice) {
        match self.path(cluster, &[events::FILE]) {
            Ok(path) => self.announced.announce(cluster, &path, notice),
            Err(e) => tracing::warn!(%cluster, "cannot keep an event ({}): {e}", notice.reason),
        }
    }

    async fn load_record(&self, cluster: &str) -> Result<Option<ClusterRecord>> {
        self.cluster_record(cluster)
    }

    async fn save_record(&self, cluster: &str, record: &ClusterRecord) -> Result<()> {
        self.write_cluster_record(cluster, record)
    }

    async fn failure_hint(&self, cluster: &str, member: &str) -> Option<String> {
        failure_hint(&self.log_tail(cluster, member, crate::member::hints::HINT_LINES))
    }

    async fn save_status(&self, cluster: &str, resource: &EtcdCluster) -> Result<()> {
        let path = self.path(cluster, &["status.json"])?;
        let mut statuses = self.statuses.lock().unwrap_or_else(|e| e.into_inner());
        statuses.insert(cluster.to_string(), resource.clone());
        drop(statuses);
        let now = Instant::now();
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        let free = || status_file::free_under(&self.layout.clusters_dir());
        if !status_file::due(written.get(cluster), resource, now, free()) {
            return Ok(());
        }
        // Written again at the next call, whatever this write does.
        written.remove(cluster);
        drop(written);
        write_json(&path, resource).map_err(io_err(format!("cannot write {}", path.display())))?;
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        written.insert(cluster.to_string(), (resource.clone(), now));
        Ok(())
    }
}

/// The IPv4 address of an `http://IP:PORT` URL.
fn url_ip(url: &str) -> Option<Ipv4Addr> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    rest.split(':').next()?.parse().ok()
}
