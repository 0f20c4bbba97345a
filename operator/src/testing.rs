//! Helpers for tests (of this crate, the chaos monkey and the soak runner)
//! that run the real `etcd-operator` binary against real etcd processes.
//!
//! An [`Env`] owns a temporary folder (manifests and state), the operator
//! process, and every etcd member it started: dropping it (also when a test
//! panics) stops them all. Every wait is bounded ([`WAIT`]) and polls a
//! condition.

pub mod acked;
pub mod azure;
pub mod bench;
pub mod files;
mod losses;
pub mod member;
pub mod mutate;
pub mod proxy;
pub mod s3;
pub mod server;
pub mod writer;

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

pub use crate::metrics::scrape as metrics;
pub use member::bootstrap_config;

use crate::crd::EtcdCluster;
use crate::platform::local::layout::{Layout, MemberRecord, read_json};

/// The longest any condition is waited for.
pub const WAIT: Duration = Duration::from_secs(60);

/// A test's operator, manifests and state.
#[derive(Debug)]
pub struct Env {
    /// The temporary folder holding everything.
    pub dir: tempfile::TempDir,
    /// The manifests folder the operator watches.
    pub manifests: PathBuf,
    /// The operator's state folder.
    pub state: PathBuf,
    /// The operator binary to run (by default the one built beside the test).
    pub operator_bin: Option<PathBuf>,
    /// `RUST_LOG` of the operator.
    pub log_filter: String,
    /// `--etcd-binaries` of the operator (default: the workspace's).
    pub etcd_binaries: PathBuf,
    /// Environment variables set for the operator (such as `PATH`).
    pub operator_env: Vec<(String, String)>,
    /// Extra arguments of `etcd-operator run`.
    pub operator_args: Vec<String>,
    operator: Option<Child>,
}

/// The workspace's etcd binaries (installed by ci/setup).
pub fn binaries() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../.etcd")
}

/// The etcd server of `version` among [`binaries`].
pub fn etcd_binary(version: &str) -> PathBuf {
    let etcd = binaries().join(version).join("etcd");
    assert!(
        etcd.is_file(),
        "no etcd {version} at {} (ci/setup installs 3.4.23 and 3.5.1)",
        etcd.display()
    );
    etcd
}

/// A loopback address whose etcd ports are free, stable for `seed`, not in
/// `taken`: for a test that starts etcd by hand, or needs an address where
/// nothing answers.
pub fn free_loopback(seed: &str, taken: &HashSet<Ipv4Addr>) -> Ipv4Addr {
    crate::platform::local::addr::allocate(seed, taken).expect("a free loopback address")
}

/// A binary of this workspace built beside the running test (tests live in
/// `target/<profile>/deps/`, binaries in `target/<profile>/`). `ETCD_OPERATOR_BIN`
/// (and the like, upper-cased with `_BIN`) overrides it.
pub fn workspace_binary(name: &str) -> PathBuf {
    let var = format!("{}_BIN", name.to_uppercase().replace('-', "_"));
    if let Some(p) = std::env::var_os(&var) {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test's own path");
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let bin = dir.join(name);
    assert!(
        bin.is_file(),
        "{} is not built: run `cargo build --workspace` (or `make test`), or set {var}",
        bin.display()
    );
    bin
}

pub use crate::member::flags::single_member_args;

/// etcdctl of 3.4.23.
pub fn etcdctl() -> PathBuf {
    binaries().join("3.4.23/etcdctl")
}

/// A minimal manifest.
pub fn manifest(name: &str, size: u32, version: &str) -> String {
    format!(
        "apiVersion: etcdoperator.dev/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: \"{name}\"\n\
         spec:\n  size: {size}\n  version: \"{version}\"\n"
    )
}

impl Env {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("etcd-operator-test-")
            .tempdir()
            .expect("temp dir");
        let manifests = dir.path().join("clusters");
        std::fs::create_dir_all(&manifests).expect("manifests dir");
        let state = dir.path().join("state");
        Env {
            dir,
            manifests,
            state,
            operator_bin: None,
            log_filter: "etcd_operator=debug".into(),
            etcd_binaries: binaries(),
            operator_env: Vec::new(),
            operator_args: Vec::new(),
            operator: None,
        }
    }

    pub fn layout(&self) -> Layout {
        Layout::new(&self.state)
    }

    /// Path of the operator's log.
    pub fn operator_log(&self) -> PathBuf {
        self.dir.path().join("operator.log")
    }

    /// Starts the operator; its log goes to [`Env::operator_log`].
    pub fn start_operator(&mut self) {
        assert!(self.operator.is_none(), "operator already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("operator.log"))
            .expect("log");
        let bin = self
            .operator_bin
            .clone()
            .unwrap_or_else(|| workspace_binary("etcd-operator"));
        let child = Command::new(bin)
            .args(["run", "--platform", "local", "--manifests"])
            .arg(&self.manifests)
            .arg("--state-dir")
            .arg(&self.state)
            .arg("--etcd-binaries")
            .arg(&self.etcd_binaries)
            .args(&self.operator_args)
            .env("RUST_LOG", &self.log_filter)
            .envs(self.operator_env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start etcd-operator");
        self.operator = Some(child);
    }

    /// Serves the operator's endpoints on a free loopback port (call before
    /// [`Env::start_operator`]); see [`Env::metrics_addr`].
    pub fn with_metrics(&mut self) {
        self.operator_args
            .extend(["--metrics-addr".to_string(), "127.0.0.1:0".to_string()]);
    }

    /// Where the running operator serves `/metrics` (waits for it).
    pub fn metrics_addr(&self) -> std::net::SocketAddr {
        let path = crate::controller::local::metrics_addr_path(&self.state);
        self.wait_for("the operator's metrics address", || {
            std::fs::read_to_string(&path).ok()?.trim().parse().ok()
        })
    }

    /// The operator's metrics, parsed.
    pub fn scrape(&self) -> Vec<metrics::Sample> {
        let (code, body) = metrics::get(self.metrics_addr(), "/metrics").expect("GET /metrics");
        assert_eq!(code, 200, "GET /metrics: {body}");
        metrics::parse(&body)
    }

    /// The running operator's process, from its lock file.
    pub fn operator_process(&self) -> Option<crate::platform::local::process::ProcessId> {
        crate::platform::local::running_operator(&self.state)
    }

    /// Whether the operator started by [`Env::start_operator`] still runs
    /// (`false` once it exited, for whatever reason).
    pub fn operator_running(&mut self) -> bool {
        self.operator
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Stops the operator with SIGTERM and waits for it.
    pub fn stop_operator(&mut self) {
        if let Some(mut child) = self.operator.take() {
            let pid = i32::try_from(child.id())
                .ok()
                .and_then(rustix::process::Pid::from_raw)
                .expect("pid");
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the operator with SIGKILL (an OOM kill, a node lost) and waits
    /// for it: nothing of it runs on; its members do.
    pub fn kill_operator(&mut self) {
        if let Some(mut child) = self.operator.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Writes a manifest atomically (as `kubectl apply` would: all or nothing).
    pub fn write_manifest(&self, file: &str, text: &str) {
        let tmp = self.dir.path().join(format!(".{file}.tmp"));
        std::fs::write(&tmp, text).expect("write manifest");
        std::fs::rename(&tmp, self.manifests.join(file)).expect("rename manifest");
    }

    pub fn remove_manifest(&self, file: &str) {
        std::fs::remove_file(self.manifests.join(file)).expect("remove manifest");
    }

    /// The published resource of a cluster.
    /// The cluster's status as `etcd-operator status` gets it: from the
    /// running operator when it answers (its status file is rewritten
    /// only on change or every
    /// [`STATUS_FILE_REFRESH`](crate::platform::local::status_file::STATUS_FILE_REFRESH)),
    /// else from the file.
    pub fn status(&self, cluster: &str) -> Option<EtcdCluster> {
        match crate::controller::live::ask(&self.state) {
            Ok(answer) => answer
                .clusters
                .into_iter()
                .find(|c| c.metadata.name.as_deref() == Some(cluster)),
            Err(_) => self.status_file(cluster),
        }
    }

    /// The cluster's status file, as last written.
    pub fn status_file(&self, cluster: &str) -> Option<EtcdCluster> {
        read_json(&self.layout().status_path(cluster))
            .ok()
            .flatten()
    }

    pub fn member(&self, cluster: &str, member: &str) -> Option<MemberRecord> {
        self.layout().read_member(cluster, member).ok().flatten()
    }

    /// Waits (bounded) until `f` returns `Some`.
    pub fn wait_for<T>(&self, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(v) = f() {
                return v;
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(self.dir.path().join("operator.log"))
                    .unwrap_or_default();
                // Idle passes and routine backups would fill the tail.
                let routine = |l: &&str| {
                    l.contains("outcome=\"converged\"")
                        || l.contains("backup taken and verified")
                        || l.contains("retention deleted")
                };
                let tail: Vec<&str> = log.lines().rev().filter(|l| !routine(l)).take(60).collect();
                // A failure is logged once when it starts: it may be far
                // above the tail.
                let mut trouble: Vec<&str> = log
                    .lines()
                    .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
                    .collect();
                trouble.dedup();
                let trouble = &trouble[trouble.len().saturating_sub(20)..];
                panic!(
                    "timed out after {WAIT:?} waiting for {what}\n--- the operator's last warnings and errors ---\n{}\n--- operator log (last lines but idle passes and routine backups, newest first) ---\n{}",
                    trouble.join("\n"),
                    tail.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until `cluster` is Running with `size` ready members; returns
    /// its resource.
    pub fn wait_running(&self, cluster: &str, size: usize) -> EtcdCluster {
        self.wait_for(
            &format!("{cluster} running with {size} ready members"),
            || {
                let c = self.status(cluster)?;
                let s = c.status.as_ref()?;
                let ready = s.members.iter().filter(|m| m.ready).count();
                (s.phase.as_str() == "Running" && ready == size && s.members.len() == size)
                    .then_some(c)
            },
        )
    }

    /// Waits (for `what`) until `cluster` is Running with `size` ready
    /// members, none of them named in `gone` (each replaced by a new
    /// member); returns its resource.
    pub fn wait_replaced(
        &self,
        what: &str,
        cluster: &str,
        size: usize,
        gone: &[&str],
    ) -> EtcdCluster {
        self.wait_for(what, || {
            let c = self.wait_running(cluster, size);
            let s = c.status.as_ref()?;
            let replaced = s.members.iter().all(|m| !gone.contains(&m.name.as_str()));
            replaced.then_some(c)
        })
    }

    /// Runs the `etcd-operator` binary with `args` on this environment's
    /// state folder and etcd binaries (`backup`, `backups`, `check-backup`...).
    pub fn operator_cli(&self, args: &[&str]) -> Output {
        std::process::Command::new(workspace_binary("etcd-operator"))
            .args(args)
            .arg("--state-dir")
            .arg(&self.state)
            .arg("--etcd-binaries")
            .arg(binaries())
            .output()
            .expect("run etcd-operator")
    }

    /// The credentials of `user` (`root`, `reader`) of the standby
    /// `cluster`'s etcd auth, once the operator made them (bounded wait).
    pub fn standby_credentials(&self, cluster: &str, user: &str) -> crate::etcd::Credentials {
        self.wait_for(
            &format!("the password of {user} of standby {cluster}"),
            || {
                crate::platform::local::standby_auth::credentials(&self.state, cluster, user)
                    .expect("a readable password file")
            },
        )
    }

    /// Runs etcdctl (API v3) against `endpoints`.
    pub fn etcdctl(&self, endpoints: &[String], args: &[&str]) -> Output {
        Command::new(etcdctl())
            .env("ETCDCTL_API", "3")
            .arg("--endpoints")
            .arg(endpoints.join(","))
            .arg("--command-timeout=5s")
            .args(args)
            .output()
            .expect("run etcdctl")
    }

    /// What happened from `since` on, one line each, in time order: the
    /// operator's log, the `notable` lines of the logs of `cluster`'s members
    /// still on disk (leadership and membership changes, dropped
    /// proposals), and `extra` lines (a writer's timeline), each starting
    /// with an RFC 3339 UTC time. For reading where a write gap went.
    pub fn story(&self, cluster: &str, since: SystemTime, extra: &[String]) -> String {
        let since = humantime::format_rfc3339_micros(since).to_string();
        let mut lines: Vec<String> = Vec::new();
        let log = std::fs::read_to_string(self.operator_log()).unwrap_or_default();
        lines.extend(
            log.lines()
                .filter(|l| !l.contains("outcome=\"converged\""))
                .map(|l| {
                    format!(
                        "{} operator {}",
                        l.get(..27).unwrap_or(l),
                        l.get(27..).unwrap_or_default()
                    )
                }),
        );
        let layout = self.layout();
        for member in layout.member_names(cluster).unwrap_or_default() {
            let text =
                std::fs::read_to_string(layout.log_path(cluster, &member)).unwrap_or_default();
            lines.extend(text.lines().filter_map(|l| notable_etcd_line(&member, l)));
        }
        lines.extend(extra.iter().map(|l| {
            format!(
                "{} writer {}",
                l.get(..27).unwrap_or(l),
                l.get(27..).unwrap_or_default()
            )
        }));
        lines.retain(|l| l.as_str() >= since.as_str());
        lines.sort();
        lines.join("\n")
    }

    /// pid of a member's process, if it runs.
    pub fn pid(&self, cluster: &str, member: &str) -> Option<i32> {
        let r = self.member(cluster, member)?;
        r.process
            .filter(crate::platform::local::process::alive)
            .map(|p| p.pid)
    }
}

/// A line of an etcd member's (zap, JSON) log that says something about
/// leadership, membership or dropped proposals: its time, member and message.
fn notable_etcd_line(member: &str, line: &str) -> Option<String> {
    const NOTABLE: [&str; 10] = [
        "leader",
        "elected",
        "became",
        "campaign",
        "remove",
        "dropp",
        "transfer",
        "vote",
        "timed out",
        "slow",
    ];
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let ts = v.get("ts")?.as_str()?;
    let msg = v.get("msg")?.as_str()?;
    let lower = msg.to_lowercase();
    NOTABLE
        .iter()
        .any(|n| lower.contains(n))
        .then(|| format!("{ts} etcd {member}: {msg}"))
}

impl Default for Env {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.stop_operator();
        crate::platform::local::kill_all(&self.state);
    }
}

/// Client URLs of a cluster's members.
pub fn client_urls(c: &EtcdCluster) -> Vec<String> {
    c.status
        .iter()
        .flat_map(|s| s.members.iter().map(|m| m.client_url.clone()))
        .collect()
}

/// SIGKILLs a process.
pub fn kill9(pid: i32) {
    let pid = rustix::process::Pid::from_raw(pid).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).expect("kill -9");
}
