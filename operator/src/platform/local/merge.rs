//! A restore with continuous backups, on the local platform: the base
//! backup is restored into a scratch folder under the cluster's state
//! folder, served by one private scratch etcd member on a free loopback
//! address, the chain's segments are replayed into it (one transaction per
//! original revision, [`crate::backup::replay`]), and its snapshot becomes
//! the snapshot every member of the cluster restores from. No client can
//! reach the scratch member, so the revisions replayed are the original
//! ones; the result is staged like any restore source, so an operator
//! restart finds it. The scratch member is stopped and its folder deleted
//! afterwards, also on error.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions, GetOptions};

use super::binaries::Binaries;
use super::process::{self, ProcessId};
use super::{addr, safe_path};
use crate::backup::chain::Chain;
use crate::backup::replay::{self, Replayed};
use crate::backup::tools::{self, RestoreTarget};
use crate::backup::{BackupMeta, Error, Result, Source, check_file, snapshot};
use crate::member::{CLIENT_PORT, PEER_PORT};
use crate::version::Version;

/// The scratch folder's name in the cluster's state folder.
const SCRATCH: &str = "replay";
/// The scratch member's name.
const MEMBER: &str = "replay";
/// How long the scratch member may take to serve after it started.
const SERVE_WITHIN: Duration = Duration::from_secs(60);

/// Kills the scratch member and deletes the scratch folder when dropped.
struct Scratch {
    clusters: PathBuf,
    cluster: String,
    member: Option<ProcessId>,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(id) = self.member.take() {
            let _ = process::signal(&id, rustix::process::Signal::KILL);
        }
        let _ = safe_path::remove_dir_all(&self.clusters, &self.cluster, &[SCRATCH]);
    }
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    crate::backup::io_err(what)
}

/// Restores `base` (the snapshot file `snapshot`) for `cluster`, replays
/// `chain` into it, and writes the result, checked, to `dest`.
pub async fn merge(
    state_dir: &Path,
    binaries: &Binaries,
    cluster: &str,
    base: &BackupMeta,
    snapshot_file: &Path,
    chain: &Chain,
    dest: &Path,
) -> Result<Replayed> {
    let clusters = state_dir.join("clusters");
    let folder = safe_path::cluster_path(&clusters, cluster, &[SCRATCH])
        .map_err(|e| io("cannot place the replay folder")(e.into_io()))?;
    safe_path::remove_dir_all(&clusters, cluster, &[SCRATCH])
        .map_err(io("cannot clear the replay folder"))?;
    std::fs::create_dir_all(&folder).map_err(io("cannot create the replay folder"))?;
    let mut scratch = Scratch {
        clusters,
        cluster: cluster.to_string(),
        member: None,
    };
    let version: Version = base.etcd_version.parse().map_err(|_| {
        Error::Tool(format!(
            "backup {} names etcd version {:?}, which is no version",
            base.name, base.etcd_version
        ))
    })?;
    let etcd = binaries
        .find(version)
        .ok_or_else(|| Error::Tool(format!("no etcd {version} to replay into; run ci/setup")))?
        .etcd;
    let seed = format!("{}/{cluster}/{SCRATCH}", state_dir.display());
    let ip = addr::allocate(&seed, &HashSet::new()).map_err(io("no loopback address"))?;
    let peer = format!("http://{ip}:{PEER_PORT}");
    let client = format!("http://{ip}:{CLIENT_PORT}");
    let data = folder.join("data");
    let initial = format!("{MEMBER}={peer}");
    let target = RestoreTarget {
        name: MEMBER,
        initial_cluster: &initial,
        token: SCRATCH,
        peer_url: &peer,
        data_dir: &data,
    };
    tools::restore(binaries, version, snapshot_file, &target).await?;
    let data_arg = data.to_string_lossy().to_string();
    let args: Vec<String> = [
        "--name",
        MEMBER,
        "--data-dir",
        &data_arg,
        "--listen-client-urls",
        &client,
        "--advertise-client-urls",
        &client,
        "--listen-peer-urls",
        &peer,
        "--initial-advertise-peer-urls",
        &peer,
        "--initial-cluster",
        &initial,
        "--initial-cluster-token",
        SCRATCH,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let log = folder.join("etcd.log");
    let id = process::spawn(&etcd, &args, &log).map_err(io("cannot start the replay member"))?;
    scratch.member = Some(id);
    wait_serving(&client, id, &log).await?;
    let source = Source {
        member: MEMBER,
        url: &client,
        tls: None,
    };
    let replayed = replay::apply(source, chain).await?;
    snapshot::stream_to(source, dest).await?;
    let owned = dest.to_path_buf();
    tokio::task::spawn_blocking(move || check_file(&owned, None))
        .await
        .map_err(|e| Error::Tool(format!("checking the replayed snapshot failed: {e}")))??;
    if let Some(id) = scratch.member.take() {
        let _ = process::stop(id, Duration::from_secs(5)).await;
    }
    drop(scratch);
    Ok(replayed)
}

/// Waits (bounded) until the scratch member answers a read.
async fn wait_serving(url: &str, id: ProcessId, log: &Path) -> Result<()> {
    let deadline = Instant::now() + SERVE_WITHIN;
    loop {
        let opts = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(1))
            .with_timeout(Duration::from_secs(2));
        let tried = async {
            let mut c = Client::connect([url], Some(opts)).await?;
            c.get(vec![0u8], Some(GetOptions::new().with_count_only()))
                .await
        };
        let e = match tokio::time::timeout(Duration::from_secs(3), tried).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer".to_string(),
        };
        if !process::alive(&id) || Instant::now() > deadline {
            let tail = std::fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(5).collect();
            return Err(Error::Tool(format!(
                "the replay member restored from the backup did not serve ({e}); its log ends: {}",
                tail.join(" | ")
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
