//! A stand-in kubelet for the platform's Jobs on the fake API server: each
//! new Job's container is run here, for real, and its end reported as
//! Kubernetes would (the Job's status, a pod labelled `job-name`, the
//! container's log):
//!
//! * a backup Job's `etcd-operator backup-job ...` runs the library's
//!   runner with a folder standing in for the backup claim and the etcd
//!   tools of `.etcd/`;
//! * a restore Job's `etcdutl` (or `etcdctl`) `snapshot restore` runs the
//!   binary of the image's version with the claims' folders for its
//!   mounts.
//!
//! A Deployment (the follower of continuous backups) runs for as long as
//! it exists: its `etcd-operator backup-follow` runs the library's follower
//! in a task with the claim's folder, behind a Running pod whose log is
//! the follower's output; a changed Deployment is restarted, a deleted one
//! stopped.
//!
//! Claims are folders under one temporary folder; client URLs the cluster
//! DNS would resolve are mapped to the test's loopback addresses. The task
//! stops when the kubelet is dropped.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::fake::Fake;
use super::rbac::collection;
use crate::backup::job::{JobTls, Op, Place, StoreArgs};
use crate::platform::kube::jobs::BACKUPS_MOUNT;
use crate::platform::kube::pod::DATA_MOUNT;
use crate::platform::local::binaries::Binaries;
use crate::testing::binaries;

mod env;
use env::{container_env, in_mounts, secret_mounts};

/// Where the fake server keeps Jobs.
pub const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";

/// `etcd-operator backup-job`'s arguments.
#[derive(Parser, Debug)]
struct BackupJob {
    #[command(flatten)]
    place: Place,
    #[command(subcommand)]
    op: Op,
}

/// Where the fake server keeps Deployments.
pub const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

/// `etcd-operator backup-follow`'s arguments.
#[derive(Parser, Debug)]
struct BackupFollow {
    #[arg(long)]
    cluster: String,
    #[arg(long)]
    url: Vec<String>,
    #[arg(long)]
    segment_interval: String,
    #[arg(long)]
    max_events: Option<i64>,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    tls: JobTls,
}

/// The stand-in kubelet.
pub struct Kubelet {
    claims: tempfile::TempDir,
    ran: Arc<Mutex<Vec<Value>>>,
    task: JoinHandle<()>,
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A Job's container (the first) and the claims its volumes name.
fn container(job: &Value) -> (Value, BTreeMap<String, String>) {
    let spec = &job["spec"]["template"]["spec"];
    let claims = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| {
            let claim = v["persistentVolumeClaim"]["claimName"].as_str()?;
            Some((v["name"].as_str()?.to_string(), claim.to_string()))
        })
        .collect();
    (spec["containers"][0].clone(), claims)
}

fn strings(v: &Value) -> Vec<String> {
    let items = v.as_array().into_iter().flatten();
    items
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

impl Kubelet {
    /// Runs the Jobs `fake` gets; `dns` maps client URLs to reachable ones.
    pub fn start(fake: Fake, dns: BTreeMap<String, String>) -> Kubelet {
        let claims = tempfile::tempdir().expect("a folder for claims");
        let root = claims.path().to_path_buf();
        let ran = Arc::new(Mutex::new(Vec::new()));
        let done = ran.clone();
        let task = tokio::spawn(async move {
            let mut seen = HashSet::new();
            let mut running = BTreeMap::new();
            loop {
                deployments(&fake, &root, &dns, &mut running);
                for (path, job) in fake.all(&format!("{JOBS}/")) {
                    if seen.insert(path.clone()) {
                        let name = job["metadata"]["name"].as_str().unwrap_or_default();
                        let c = &job["spec"]["template"]["spec"]["containers"][0];
                        if let Err(why) = container_env(&fake, c) {
                            never_starts(&fake, name, &why);
                            continue;
                        }
                        let (ok, log) = run(&fake, &job, &root, &dns).await;
                        finish(&fake, &path, name, ok, &log);
                        done.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(job.clone());
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        Kubelet { claims, ran, task }
    }

    /// The folder standing in for `claim`.
    pub fn claim(&self, claim: &str) -> PathBuf {
        self.claims.path().join(claim)
    }

    /// The names of the Jobs run so far.
    pub fn ran(&self) -> Vec<String> {
        let jobs = self.jobs();
        let name = |j: &Value| {
            j["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        jobs.iter().map(name).collect()
    }

    /// The first Job run whose name starts with `prefix`, as it was
    /// created.
    pub fn job(&self, prefix: &str) -> Option<Value> {
        let named = |j: &Value| {
            j["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(prefix))
        };
        self.jobs().into_iter().find(named)
    }

    /// The Jobs run so far, as they were created (the platform deletes
    /// them once read).
    pub fn jobs(&self) -> Vec<Value> {
        self.ran.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Runs `job`'s container; returns whether it succeeded, and its log.
async fn run(
    fake: &Fake,
    job: &Value,
    root: &Path,
    dns: &BTreeMap<String, String>,
) -> (bool, String) {
    let (c, claims) = container(job);
    let folder = |volume: &str| claim_folder(root, &claims, volume);
    match job["metadata"]["labels"]["etcdoperator.dev/job"].as_str() {
        Some("backup") => {
            let mut args = vec!["backup-job".to_string()];
            args.extend(strings(&c["args"]).into_iter().skip(1));
            let mounts = secret_mounts(fake, root, &job["spec"]["template"]["spec"], &c);
            let args = args.into_iter().map(|a| dns.get(&a).cloned().unwrap_or(a));
            let args = args.map(|a| in_mounts(a, &mounts));
            let parsed = match BackupJob::try_parse_from(args) {
                Ok(p) => p,
                Err(e) => return (false, e.to_string()),
            };
            let Ok(env) = container_env(fake, &c) else {
                return (false, "checked before".into());
            };
            let state = folder("backups");
            std::fs::create_dir_all(&state).expect("a claim folder");
            let tools = Arc::new(Binaries::new(vec![binaries()]));
            let report = crate::platform::local::backup_job::run(
                &state,
                &parsed.place,
                &parsed.op,
                tools,
                env,
            )
            .await;
            (report.error.is_none(), format!("{}\n", report.line()))
        }
        Some("restore") => {
            let aliases = &job["spec"]["template"]["spec"]["hostAliases"];
            restore(&c, aliases, root, &claims).await
        }
        other => (false, format!("no such job kind {other:?}")),
    }
}

/// The folder of the claim mounted as `volume`.
fn claim_folder(root: &Path, claims: &BTreeMap<String, String>, volume: &str) -> PathBuf {
    root.join(claims.get(volume).map_or("none", String::as_str))
}

/// The pod's `/etc/hosts` as the kubelet writes it: the machine's, then
/// the pod's `hostAliases`, in a file under `root`.
fn hosts_file(aliases: &Value, root: &Path) -> Option<PathBuf> {
    let aliases = aliases.as_array().filter(|a| !a.is_empty())?;
    let mut text = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    for a in aliases {
        let ip = a["ip"].as_str().unwrap_or_default();
        text.push_str(&format!("\n{ip} {}\n", strings(&a["hostnames"]).join(" ")));
    }
    let path = root.join("etc-hosts");
    std::fs::write(&path, text).expect("a hosts file");
    Some(path)
}

/// A restore Job's tool, with its mounts mapped to the claims' folders and
/// its pod's `hostAliases` in the `/etc/hosts` it sees (a mount namespace
/// of its own, as root; without aliases it sees the machine's, where the
/// cluster's DNS names do not resolve, as a pod's DNS name does not
/// before the pod exists).
async fn restore(
    c: &Value,
    aliases: &Value,
    root: &Path,
    claims: &BTreeMap<String, String>,
) -> (bool, String) {
    let folder = |volume: &str| claim_folder(root, claims, volume);
    let image = c["image"].as_str().unwrap_or_default();
    let version = image.rsplit_once(":v").map_or("", |(_, v)| v);
    let command = strings(&c["command"]);
    let Some(tool) = command.first().and_then(|t| t.rsplit('/').next()) else {
        return (false, "no command".into());
    };
    let map = |arg: &str| -> String {
        for (mount, volume) in [(BACKUPS_MOUNT, "backups"), (DATA_MOUNT, "data")] {
            if let Some(rest) = arg.strip_prefix(mount) {
                let base = folder(volume);
                return format!("{}{rest}", base.display());
            }
        }
        arg.to_string()
    };
    std::fs::create_dir_all(folder("data")).expect("a claim folder");
    let program = binaries().join(version).join(tool);
    let mut cmd = match hosts_file(aliases, root) {
        Some(hosts) => {
            let mut cmd = tokio::process::Command::new("unshare");
            cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
                .arg(r#"mount --bind "$0" /etc/hosts && exec "$@""#)
                .arg(hosts)
                .arg(&program);
            cmd
        }
        None => tokio::process::Command::new(&program),
    };
    cmd.args(command.iter().skip(1).map(|a| map(a)));
    for e in c["env"].as_array().into_iter().flatten() {
        let (k, v) = (e["name"].as_str(), e["value"].as_str());
        if let (Some(k), Some(v)) = (k, v) {
            cmd.env(k, v);
        }
    }
    match cmd.output().await {
        Ok(out) => {
            let log = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            (out.status.success(), log)
        }
        Err(e) => (false, format!("cannot run {tool} {version}: {e}")),
    }
}

/// Job `name`'s pod as the kubelet leaves it when its container cannot be
/// made (`why`): Pending, waiting with `CreateContainerConfigError`, the
/// Job never ending by itself.
fn never_starts(fake: &Fake, name: &str, why: &str) {
    let status = json!({"phase": "Pending", "containerStatuses": [{
        "name": "backup", "image": "etcd-operator:test", "imageID": "", "ready": false,
        "restartCount": 0,
        "state": {"waiting": {"reason": "CreateContainerConfigError", "message": why}},
    }]});
    job_pod(fake, name, status);
}

/// Puts the pod of Job `name` (labelled `job-name`) with `status`;
/// returns its path.
fn job_pod(fake: &Fake, name: &str, status: Value) -> String {
    let pod = format!("{name}-x1y2z");
    fake.put(
        &collection("pods"),
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": "default", "uid": format!("uid-{pod}"),
                         "labels": {"job-name": name}},
            "status": status,
        }),
    );
    format!("{}/{pod}", collection("pods"))
}

/// Reports the end of Job `name` as Kubernetes would.
fn finish(fake: &Fake, path: &str, name: &str, ok: bool, log: &str) {
    let status = if ok {
        json!({"status": {"succeeded": 1}})
    } else {
        json!({"status": {"failed": 1, "conditions": [{
            "type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit",
        }]}})
    };
    fake.change(path, &status);
    let phase = if ok { "Succeeded" } else { "Failed" };
    let pod = job_pod(fake, name, json!({"phase": phase}));
    fake.set_log(&pod, log);
}

/// Starts the Deployments that are new or changed, stops those deleted or
/// changed; `running` holds each one's spec and task by path.
fn deployments(
    fake: &Fake,
    root: &Path,
    dns: &BTreeMap<String, String>,
    running: &mut BTreeMap<String, (Value, Follower)>,
) {
    let now: BTreeMap<String, Value> = fake
        .all(&format!("{DEPLOYMENTS}/"))
        .into_iter()
        .map(|(path, d)| (path, d["spec"]["template"].clone()))
        .collect();
    running.retain(|path, (spec, _)| now.get(path) == Some(spec));
    for (path, template) in now {
        if running.contains_key(&path) {
            continue;
        }
        let name = path.rsplit('/').next().unwrap_or_default().to_string();
        let follower = start_follower(fake.clone(), &name, &template, root, dns);
        running.insert(path, (template, follower));
    }
}

/// A follower's task and pod: stopped and deleted when dropped.
struct Follower {
    task: JoinHandle<()>,
    fake: Fake,
    pod: String,
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.task.abort();
        self.fake.remove(&self.pod);
    }
}

/// Runs the follower of a Deployment's pod `template` behind a Running pod.
fn start_follower(
    fake: Fake,
    name: &str,
    template: &Value,
    root: &Path,
    dns: &BTreeMap<String, String>,
) -> Follower {
    let spec = &template["spec"];
    let c = &spec["containers"][0];
    let args = strings(&c["args"]);
    let mounts = secret_mounts(&fake, root, spec, c);
    let args: Vec<String> = args
        .into_iter()
        .map(|a| dns.get(&a).cloned().unwrap_or(a))
        .map(|a| in_mounts(a, &mounts))
        .collect();
    let claims = container(&json!({"spec": {"template": template}})).1;
    let env = container_env(&fake, c);
    let state = claim_folder(root, &claims, "backups");
    std::fs::create_dir_all(&state).expect("a claim folder");
    let pod = format!("{name}-5d9c8-x1y2z");
    let pods = collection("pods");
    let mut labels = template["metadata"]["labels"].clone();
    labels["pod-template-hash"] = json!("5d9c8");
    fake.put(
        &pods,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": "default", "uid": format!("uid-{pod}"),
                         "labels": labels},
            "status": {"phase": "Running"},
        }),
    );
    let log_path = format!("{pods}/{pod}");
    let pod_path = log_path.clone();
    let on = fake.clone();
    let task = tokio::spawn(async move {
        let parsed = match BackupFollow::try_parse_from(args) {
            Ok(p) => p,
            Err(e) => {
                fake.set_log(&log_path, &e.to_string());
                return;
            }
        };
        let spec = crate::crd::ContinuousSpec {
            segment_interval: parsed.segment_interval,
            max_events: parsed.max_events,
        };
        let Ok(policy) = crate::validate::continuous::check(&spec) else {
            fake.set_log(&log_path, "invalid continuous spec");
            return;
        };
        let (env, object) = match (env, parsed.store.location()) {
            (Ok(env), Ok(object)) => (env, object),
            (Err(e), _) | (_, Err(e)) => {
                fake.set_log(&log_path, &e);
                return;
            }
        };
        let mut location = crate::backup::Location::of(&parsed.cluster, None);
        location.object = object;
        let log = Mutex::new(String::new());
        let emit = |line: &str| {
            let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
            log.push_str(line);
            log.push('\n');
            fake.set_log(&log_path, &log);
        };
        let tools = Arc::new(Binaries::new(vec![binaries()]));
        let members = crate::platform::local::follow_job::Members {
            urls: parsed.url,
            tls: parsed.tls,
        };
        crate::platform::local::follow_job::run(
            &state, location, members, policy, tools, env, &emit,
        )
        .await;
    });
    Follower {
        task,
        fake: on,
        pod: pod_path,
    }
}
