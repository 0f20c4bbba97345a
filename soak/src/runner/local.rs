//! The local platform: the runner owns everything. It writes the cluster's
//! manifest, runs `etcd-operator run --platform local` (restarting it if it
//! dies, as a Deployment would), and at the end stops the operator and
//! SIGKILLs every member recorded in the state folder.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use etcd_operator::crd::EtcdCluster;
use etcd_operator::platform::local::binaries::Binaries;
use etcd_operator::platform::local::layout::{Layout, read_json};

use super::Error;
use super::procs::Proc;
use crate::probe::StatusSource;
use crate::scenario::ClusterSpec;

/// Grace of the operator on SIGTERM.
const OPERATOR_GRACE: std::time::Duration = std::time::Duration::from_secs(20);

/// Checks that an etcd binary of `version` (the scenario's `field`) exists
/// in `etcd_binaries` or on PATH. Touches nothing.
pub fn check_etcd(version: &str, field: &str, etcd_binaries: &Path) -> Result<(), Error> {
    let v = version
        .parse()
        .map_err(|e| Error::Setup(format!("{field}: {e}")))?;
    if Binaries::new(vec![etcd_binaries.into()]).find(v).is_none() {
        return Err(Error::Setup(format!(
            "{field}: no etcd {version} binary in {} (as VERSION/etcd) or on PATH: run \
             `bash ci/setup`, or pass --etcd-binaries",
            etcd_binaries.display()
        )));
    }
    Ok(())
}

/// Checks that no etcd member recorded in the work folder `work` still
/// runs (a run left behind). Touches nothing.
pub fn check_work_dir(work: &Path) -> Result<(), Error> {
    let state = work.join("state");
    if !etcd_operator::platform::local::running_members(&state).is_empty() {
        return Err(Error::Setup(format!(
            "etcd members recorded in {} still run: stop them or use another work folder",
            state.display()
        )));
    }
    Ok(())
}

/// The local platform.
#[derive(Debug)]
pub struct Local {
    _temp: Option<tempfile::TempDir>,
    manifests: PathBuf,
    state: PathBuf,
    operator_bin: PathBuf,
    etcd_binaries: PathBuf,
    logs: PathBuf,
    operator: Option<Proc>,
    cluster: ClusterSpec,
    /// The scenario's object store, when it asks for one.
    store: Option<super::store::Store>,
    /// Times the operator was restarted after dying.
    pub restarts: u32,
}

impl Local {
    /// Checks the etcd binary and lays out the work folder (`work`, or a
    /// temporary one): `manifests/` and `state/`. Logs go to `logs`.
    pub fn prepare(
        cluster: &ClusterSpec,
        operator_bin: &Path,
        etcd_binaries: &Path,
        work: Option<&Path>,
        logs: &Path,
    ) -> Result<Local, Error> {
        check_etcd(&cluster.spec.version, "cluster.version", etcd_binaries)?;
        if let Some(w) = work {
            check_work_dir(w)?;
        }
        let (temp, root) = match work {
            Some(w) => (None, w.to_path_buf()),
            None => {
                let t = tempfile::Builder::new()
                    .prefix("soak-")
                    .tempdir()
                    .map_err(|e| Error::io("cannot create a temporary folder", e))?;
                let p = t.path().to_path_buf();
                (Some(t), p)
            }
        };
        let manifests = root.join("manifests");
        let state = root.join("state");
        for d in [&manifests, &state, &logs.to_path_buf()] {
            std::fs::create_dir_all(d)
                .map_err(|e| Error::io(format!("cannot create {}", d.display()), e))?;
        }
        Ok(Local {
            _temp: temp,
            manifests,
            state,
            operator_bin: operator_bin.into(),
            etcd_binaries: std::path::absolute(etcd_binaries)
                .unwrap_or_else(|_| etcd_binaries.into()),
            logs: logs.into(),
            operator: None,
            cluster: cluster.clone(),
            store: None,
            restarts: 0,
        })
    }

    /// Backups go to `store` from now on (the cluster's backup location
    /// is its bucket, the operator gets its credentials).
    pub fn with_store(mut self, store: super::store::Store) -> Result<Local, Error> {
        self.cluster = store.place(&self.cluster);
        self.store = Some(store);
        Ok(self)
    }

    /// The chains of continuous backups in the run's object store, read
    /// back (`None`: no store, or no continuous backups).
    pub async fn store_chains(&self) -> Option<crate::data::StoreChains> {
        let store = self.store.as_ref()?;
        super::store_check::read_back(store, &self.cluster).await
    }

    /// Where the run's object store listens, when there is one.
    pub fn store_addr(&self) -> Option<std::net::SocketAddr> {
        self.store.as_ref().map(super::store::Store::addr)
    }

    /// From now on the cluster is `c` (write the manifest to apply it),
    /// its backups in the run's store when there is one.
    pub fn set_cluster(&mut self, c: &ClusterSpec) {
        self.cluster = match &self.store {
            Some(s) => s.place(c),
            None => c.clone(),
        };
    }

    /// The operator's state folder.
    pub fn state(&self) -> &Path {
        &self.state
    }

    /// Writes the cluster's manifest (atomically), paused or not.
    pub fn write_manifest(&self, paused: bool) -> Result<(), Error> {
        self.write_cluster(&self.cluster, paused)
    }

    /// The cluster as the operator gets it (its backups in the run's
    /// store when there is one).
    pub fn cluster(&self) -> &ClusterSpec {
        &self.cluster
    }

    /// Writes the manifest of another cluster `c` (a standby) beside the
    /// cluster's, for the same operator; torn down with everything else.
    pub fn write_other(&self, c: &ClusterSpec) -> Result<(), Error> {
        self.write_cluster(c, false)
    }

    fn write_cluster(&self, c: &ClusterSpec, paused: bool) -> Result<(), Error> {
        let file = self.manifests.join(format!("{}.yaml", c.name));
        let tmp = self.manifests.join(format!(".{}.yaml.tmp", c.name));
        std::fs::write(&tmp, c.manifest(paused))
            .and_then(|()| std::fs::rename(&tmp, &file))
            .map_err(|e| Error::io(format!("cannot write {}", file.display()), e))
    }

    /// Starts the operator.
    pub fn start_operator(&mut self) -> Result<(), Error> {
        let mut cmd = Command::new(&self.operator_bin);
        cmd.args(["run", "--platform", "local", "--manifests"])
            .arg(&self.manifests)
            .arg("--state-dir")
            .arg(&self.state)
            .arg("--etcd-binaries")
            .arg(&self.etcd_binaries)
            // Read at the end for the report (any free port).
            .args(["--metrics-addr", "127.0.0.1:0"]);
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("ETCD_OPERATOR_") {
                cmd.env_remove(k);
            }
        }
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        if let Some(s) = &self.store {
            cmd.envs(s.credentials());
        }
        let p = Proc::spawn("etcd-operator", cmd, &self.logs.join("operator.log"))?;
        self.operator = Some(p);
        Ok(())
    }

    /// Where the published status is read.
    pub fn status_source(&self) -> StatusSource {
        self.status_of(&self.cluster.name)
    }

    /// Where the published status of the cluster `name` is read.
    pub fn status_of(&self, name: &str) -> StatusSource {
        let path = Layout::new(&self.state).status_path(name);
        Arc::new(move || read_json::<EtcdCluster>(&path).ok().flatten())
    }

    /// The client certificate the cluster's status names, read at each new
    /// connection (it is renewed while the run goes on).
    pub fn tls_for(&self) -> crate::client::TlsFor {
        let status = self.status_source();
        Arc::new(move |_url: &str| {
            let c = status()?;
            etcd_operator::tls::ClientTls::from_status(c.status.as_ref())
                .ok()
                .flatten()
        })
    }

    /// Restarts the operator if it died; says what happened.
    pub fn supervise(&mut self) -> Option<String> {
        let status = self.operator.as_mut()?.exited()?;
        let tail = self
            .operator
            .as_ref()
            .map(|p| p.log_tail(5))
            .unwrap_or_default();
        self.restarts += 1;
        let note = match self.start_operator() {
            Ok(()) => format!("etcd-operator exited ({status}); restarted it"),
            Err(e) => format!("etcd-operator exited ({status}) and could not be restarted: {e}"),
        };
        tracing::warn!("{note}; its last lines:\n{tail}");
        Some(note)
    }

    /// The operator's `/metrics` now, or why it cannot be read.
    pub fn operator_metrics(&self) -> Result<String, String> {
        let path = etcd_operator::controller::local::metrics_addr_path(&self.state);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let addr = text
            .trim()
            .parse()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        match etcd_operator::metrics::scrape::get(addr, "/metrics") {
            Ok((200, body)) => Ok(body),
            Ok((code, body)) => Err(format!("GET http://{addr}/metrics: {code} {body}")),
            Err(e) => Err(format!("GET http://{addr}/metrics: {e}")),
        }
    }

    /// The end of the operator's log.
    pub fn operator_log_tail(&self, lines: usize) -> String {
        super::procs::tail(&self.logs.join("operator.log"), lines)
    }

    /// Destroys the place of cluster `name` (the primary, when it is lost):
    /// every member of the cluster SIGKILLed at once, then the operator
    /// (within milliseconds: it runs the cluster's continuous backups, and
    /// what it held and had not written to the store is lost with the
    /// place; it can neither restart a member nor flush anything after),
    /// then any member it restarted in between; its manifest is removed and
    /// its folder (records, members' data) deleted, so the operator,
    /// started again at once for the clusters that remain (as a Deployment
    /// would restart it), never learns the cluster existed. Its backups
    /// (the default folder `STATE/backups/NAME`, or the store) stay: they
    /// are the other place. The members go first because the same operator
    /// runs the standby's applier: killed first, it would cut the
    /// standby's live stream while the primary still acknowledged writes.
    /// Returns the members killed and when they were (unix ms).
    pub fn destroy(&mut self, name: &str) -> Result<(usize, crate::history::Ms), Error> {
        let at = crate::history::now_ms();
        let killed = self.kill_members(name);
        if let Some(op) = self.operator.as_mut() {
            op.kill();
        }
        let again = self.kill_members(name);
        if again > 0 {
            tracing::warn!("{again} members of {name} were restarted before the operator died");
        }
        let manifest = self.manifests.join(format!("{name}.yaml"));
        match std::fs::remove_file(&manifest) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(Error::io(
                    format!("cannot remove {}", manifest.display()),
                    e,
                ));
            }
        }
        self.keep_member_logs();
        let dir = Layout::new(&self.state).cluster_dir(name);
        std::fs::remove_dir_all(&dir)
            .map_err(|e| Error::io(format!("cannot remove {}", dir.display()), e))?;
        self.start_operator()?;
        Ok((killed, at))
    }

    /// SIGKILLs every running member of cluster `name` at once and waits
    /// (at most 30 s) until they are gone; how many there were.
    fn kill_members(&self, name: &str) -> usize {
        use etcd_operator::platform::local::process;
        let ids: Vec<_> = etcd_operator::platform::local::running_members(&self.state)
            .into_iter()
            .filter(|(c, _, _)| c == name)
            .map(|(_, _, id)| id)
            .collect();
        for id in &ids {
            let _ = process::signal(id, rustix::process::Signal::KILL);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while ids.iter().any(process::alive) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        ids.len()
    }

    /// Copies every member's log into the logs folder.
    fn keep_member_logs(&self) {
        let layout = Layout::new(&self.state);
        let dest = self.logs.join("members");
        for cluster in layout.cluster_names().unwrap_or_default() {
            for member in layout.member_names(&cluster).unwrap_or_default() {
                let from = layout.log_path(&cluster, &member);
                if from.is_file() && std::fs::create_dir_all(&dest).is_ok() {
                    let _ = std::fs::copy(&from, dest.join(format!("{member}.log")));
                }
            }
        }
    }

    /// Stops the operator and kills every member; copies member logs into
    /// the logs folder. Idempotent.
    pub fn teardown(&mut self) {
        if let Some(mut op) = self.operator.take() {
            op.stop(OPERATOR_GRACE);
        }
        let killed = etcd_operator::platform::local::kill_all(&self.state);
        if killed > 0 {
            tracing::info!("stopped {killed} etcd members");
        }
        self.keep_member_logs();
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        self.teardown();
    }
}
