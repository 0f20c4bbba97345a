//! The official etcd tools, used to check snapshots and to restore them:
//! `etcdutl` (3.5 and later) and `etcdctl` (3.4 carries the snapshot
//! commands itself).

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde::Deserialize;
use tokio::process::Command;

use super::{Error, Result};
use crate::platform::local::binaries::Binaries;
use crate::version::Version;

/// What `snapshot status -w json` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotStatus {
    /// Hash of the database content.
    pub hash: u64,
    /// Revision the snapshot holds.
    pub revision: i64,
    /// Number of keys (etcd's own internal keys included).
    pub total_key: i64,
    /// Database size.
    pub total_size: i64,
}

/// One tool able to read snapshots.
#[derive(Clone, Debug)]
pub struct Tool {
    /// Label for reports, such as "etcdutl 3.5.1".
    pub label: String,
    /// The executable.
    pub path: PathBuf,
}

/// Every snapshot tool on this machine: etcdutl of the newest version that
/// has one, and etcdctl of the newest 3.4.
pub fn snapshot_tools(binaries: &Binaries) -> Vec<Tool> {
    let versions = binaries.versions();
    let mut out = Vec::new();
    if let Some((v, t)) = versions
        .iter()
        .find_map(|v| Some((v, binaries.find(*v)?.etcdutl?)))
    {
        out.push(Tool {
            label: format!("etcdutl {v}"),
            path: t,
        });
    }
    if let Some((v, t)) = versions
        .iter()
        .filter(|v| v.minor <= 4)
        .find_map(|v| Some((v, binaries.find(*v)?.etcdctl?)))
    {
        out.push(Tool {
            label: format!("etcdctl {v}"),
            path: t,
        });
    }
    out
}

/// The longest an etcd tool may take on one snapshot (it reads the whole
/// file: minutes only for databases of many GiB). A hung tool is killed.
const TOOL_TIMEOUT: Duration = Duration::from_secs(600);

/// Runs `cmd` to its end, or kills it after [`TOOL_TIMEOUT`].
async fn output(mut cmd: Command, label: &str) -> Result<Output> {
    cmd.kill_on_drop(true);
    match tokio::time::timeout(TOOL_TIMEOUT, cmd.output()).await {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(e)) => Err(Error::Tool(format!("cannot run {label}: {e}"))),
        Err(_) => Err(Error::Tool(format!(
            "{label} did not finish within {} s and was killed",
            TOOL_TIMEOUT.as_secs()
        ))),
    }
}

/// `snapshot status` of `file` by `tool`.
pub async fn status(tool: &Tool, file: &Path) -> Result<SnapshotStatus> {
    let mut cmd = Command::new(&tool.path);
    cmd.env_clear()
        .envs(crate::child_env::vars())
        .env("ETCDCTL_API", "3")
        .args(["snapshot", "status"])
        .arg(file)
        .args(["-w", "json"]);
    let out = output(cmd, &tool.label).await?;
    if !out.status.success() {
        return Err(Error::Corrupt {
            path: file.to_path_buf(),
            message: format!(
                "{} snapshot status failed: {}",
                tool.label,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let json = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or("");
    serde_json::from_str(json).map_err(|e| {
        Error::Tool(format!(
            "{} printed no snapshot status ({e}): {text}",
            tool.label
        ))
    })
}

/// Checks `file` with every tool; they must all open it and agree on its
/// hash and revision. Returns the status and a line per tool.
pub async fn verify(binaries: &Binaries, file: &Path) -> Result<(SnapshotStatus, Vec<String>)> {
    let tools = snapshot_tools(binaries);
    // Side by side: each reads the whole file, from the page cache.
    let statuses = futures::future::join_all(tools.iter().map(|t| status(t, file))).await;
    let mut agreed: Option<SnapshotStatus> = None;
    let mut lines = Vec::new();
    for (tool, s) in tools.iter().zip(statuses) {
        let s = s?;
        if let Some(a) = agreed
            && (a.hash != s.hash || a.revision != s.revision)
        {
            return Err(Error::Corrupt {
                path: file.to_path_buf(),
                message: format!(
                    "the tools disagree: {} says hash {} revision {}, {} says hash {} revision {}",
                    lines.first().cloned().unwrap_or_default(),
                    a.hash,
                    a.revision,
                    tool.label,
                    s.hash,
                    s.revision
                ),
            });
        }
        agreed = Some(s);
        lines.push(format!(
            "{} snapshot status: hash {} revision {} keys {}",
            tool.label, s.hash, s.revision, s.total_key
        ));
    }
    match agreed {
        Some(s) => Ok((s, lines)),
        None => Err(Error::Tool(
            "no etcdutl or etcdctl on this machine to check snapshots; run ci/setup".into(),
        )),
    }
}

/// The snapshot tool of etcd `version`: etcdutl from 3.5, etcdctl for 3.4.
pub fn tool_for(binaries: &Binaries, version: Version) -> Result<Tool> {
    let tools = binaries
        .find(version)
        .ok_or_else(|| Error::Tool(format!("no etcd {version} tools; run ci/setup")))?;
    match (tools.etcdutl, tools.etcdctl) {
        (Some(u), _) => Ok(Tool {
            label: format!("etcdutl {version}"),
            path: u,
        }),
        (None, Some(c)) if version.minor <= 4 => Ok(Tool {
            label: format!("etcdctl {version}"),
            path: c,
        }),
        _ => Err(Error::Tool(format!(
            "no etcdutl (or etcdctl for 3.4) beside etcd {version}"
        ))),
    }
}

/// What a member restored from a snapshot is called and how it joins.
#[derive(Clone, Debug)]
pub struct RestoreTarget<'a> {
    /// Member name.
    pub name: &'a str,
    /// `--initial-cluster` of the new cluster.
    pub initial_cluster: &'a str,
    /// `--initial-cluster-token` of the new cluster.
    pub token: &'a str,
    /// The member's peer URL.
    pub peer_url: &'a str,
    /// The data folder to create (must not exist).
    pub data_dir: &'a Path,
}

/// Restores `snapshot` into a new data folder for a member of `version`,
/// with the tool of that version (etcdutl from 3.5, etcdctl for 3.4).
pub async fn restore(
    binaries: &Binaries,
    version: Version,
    snapshot: &Path,
    target: &RestoreTarget<'_>,
) -> Result<()> {
    let Tool { path: tool, label } = tool_for(binaries, version)?;
    let mut cmd = Command::new(&tool);
    cmd.env_clear()
        .envs(crate::child_env::vars())
        .env("ETCDCTL_API", "3")
        .args(["snapshot", "restore"])
        .arg(snapshot)
        .args(["--name", target.name])
        .args(["--initial-cluster", target.initial_cluster])
        .args(["--initial-cluster-token", target.token])
        .args(["--initial-advertise-peer-urls", target.peer_url])
        .arg("--data-dir")
        .arg(target.data_dir);
    let out = output(cmd, &label).await?;
    if !out.status.success() {
        return Err(Error::Tool(format!(
            "{label} snapshot restore of {} failed: {}",
            snapshot.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}
