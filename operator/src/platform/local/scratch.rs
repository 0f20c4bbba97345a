//! A scratch etcd member: a backup restored (with the etcd tools, as a
//! restore into a new cluster is) into a folder under its cluster's state
//! folder and served alone on a free loopback address. The restore check
//! ([`super::restore_check`]) hashes it; the replay of a backup chain
//! ([`super::merge`]) writes into it. The member is killed and its folder
//! deleted when the [`Scratch`] is dropped, whatever way its user ends.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::binaries::Binaries;
use super::process::{self, ProcessId};
use super::{addr, safe_path};
use crate::backup::tools::{self, RestoreTarget};
use crate::backup::{BackupMeta, Error, Result};
use crate::member::{CLIENT_PORT, PEER_PORT};
use crate::version::Version;

/// A running scratch member and its folder.
pub struct Scratch {
    clusters: PathBuf,
    cluster: String,
    /// The folder's name in the cluster's state folder, also the member's
    /// name and cluster token.
    name: &'static str,
    member: Option<ProcessId>,
    /// Its client URL.
    pub client: String,
    /// Its etcd log.
    pub log: PathBuf,
    /// Its data folder.
    data: PathBuf,
}

impl Scratch {
    /// Restores `snapshot` (the file of `backup`) for `cluster` into the
    /// folder `name` (cleared first: a folder left by a run killed midway
    /// holds nothing of value) and starts one member on it. `what` names
    /// the scratch member's purpose in errors.
    pub async fn start(
        state_dir: &Path,
        binaries: &Binaries,
        cluster: &str,
        name: &'static str,
        what: &str,
        backup: &BackupMeta,
        snapshot: &Path,
    ) -> Result<Scratch> {
        let clusters = state_dir.join("clusters");
        let folder = safe_path::cluster_path(&clusters, cluster, &[name])
            .map_err(|e| io(format!("cannot place the {what} folder"))(e.into_io()))?;
        safe_path::remove_dir_all(&clusters, cluster, &[name])
            .map_err(io(format!("cannot clear the {what} folder")))?;
        std::fs::create_dir_all(&folder).map_err(io(format!("cannot create the {what} folder")))?;
        // Deletes the folder from here on, also on error.
        let mut scratch = Scratch {
            clusters,
            cluster: cluster.to_string(),
            name,
            member: None,
            client: String::new(),
            log: folder.join("etcd.log"),
            data: folder.join("data"),
        };
        let version: Version = backup.etcd_version.parse().map_err(|_| {
            Error::Tool(format!(
                "backup {} names etcd version {:?}, which is no version",
                backup.name, backup.etcd_version
            ))
        })?;
        let etcd = binaries
            .find(version)
            .ok_or_else(|| {
                Error::Tool(format!(
                    "no etcd {version} to serve the {what} member; run ci/setup"
                ))
            })?
            .etcd;
        let seed = format!("{}/{cluster}/{name}", state_dir.display());
        let ip =
            addr::allocate(&seed, &HashSet::new()).map_err(io("no loopback address".into()))?;
        let peer = format!("http://{ip}:{PEER_PORT}");
        let client = format!("http://{ip}:{CLIENT_PORT}");
        let data = scratch.data.clone();
        let initial = format!("{name}={peer}");
        let target = RestoreTarget {
            name,
            initial_cluster: &initial,
            token: name,
            peer_url: &peer,
            data_dir: &data,
        };
        tools::restore(binaries, version, snapshot, &target).await?;
        let args: Vec<String> = crate::member::flags::single_member_args(name, ip, &data)
            .into_iter()
            .chain(crate::backup::replay::member_flags())
            .collect();
        let id = process::spawn(&etcd, &args, &scratch.log)
            .map_err(io(format!("cannot start the {what} member")))?;
        scratch.member = Some(id);
        scratch.client = client;
        Ok(scratch)
    }

    /// Whether the member still runs.
    pub fn alive(&self) -> bool {
        self.member.as_ref().is_some_and(process::alive)
    }

    /// The last lines of its log, for an error.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(5).collect();
        tail.join(" | ")
    }

    /// Stops the member with SIGTERM and waits up to `grace` for it to end
    /// (etcd commits its database as it stops), and returns its database
    /// file, in the folder (deleted when the [`Scratch`] is). An error when
    /// it does not end in time (it is killed: its database might miss its
    /// last commits) or was not running.
    pub async fn stop_clean(&mut self, grace: Duration) -> Result<PathBuf> {
        let id = self
            .member
            .take()
            .ok_or_else(|| Error::Tool("the scratch member does not run".into()))?;
        let stopped = process::signal(&id, rustix::process::Signal::TERM).unwrap_or(false)
            && tokio::time::timeout(grace, process::wait_exit(id))
                .await
                .is_ok_and(|r| r.is_ok());
        if !stopped {
            let _ = process::kill(id).await;
            return Err(Error::Tool(format!(
                "the scratch member did not stop within {grace:?} of SIGTERM; its log ends: {}",
                self.log_tail()
            )));
        }
        Ok(self.data.join("member").join("snap").join("db"))
    }

    /// Stops the member (SIGTERM, then SIGKILL) and deletes the folder.
    pub async fn stop(mut self) {
        if let Some(id) = self.member.take() {
            let _ = process::stop(id, Duration::from_secs(5)).await;
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(id) = self.member.take() {
            let _ = process::signal(&id, rustix::process::Signal::KILL);
        }
        let _ = safe_path::remove_dir_all(&self.clusters, &self.cluster, &[self.name]);
    }
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> Error {
    move |e| Error::Io { what, source: e }
}
