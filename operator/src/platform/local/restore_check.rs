//! The local platform's restore check: a backup is restored (with the
//! etcd tools, as a restore into a new cluster is) into a scratch folder
//! under its cluster's state folder, served by one scratch etcd member on
//! a free loopback address, and its `HashKV` at the backup's revision is
//! compared with a live member's ([`crate::backup::proof`]). The scratch
//! member is stopped and its folder deleted afterwards, also on error.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::binaries::Binaries;
use super::process::{self, ProcessId};
use super::{addr, safe_path};
use crate::backup::proof::{self, RestoreCheck, Verdict};
use crate::backup::tools::{self, RestoreTarget};
use crate::backup::{BackupMeta, Error, Result, Source as Live};
use crate::etcd::{Clients, ErrorKind};
use crate::member::{CLIENT_PORT, PEER_PORT};
use crate::plan::KvHash;
use crate::version::Version;

/// The scratch folder's name in the cluster's state folder.
const SCRATCH: &str = "restore-check";
/// The scratch member's name.
const MEMBER: &str = "restore-check";
/// How long the scratch member may take to serve after it started.
const SERVE_WITHIN: Duration = Duration::from_secs(60);

/// Deletes the scratch folder and kills the scratch member when dropped:
/// nothing of a check outlives it, whatever way it ends.
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

/// Restores `backup` (the snapshot file `snapshot`) into a scratch member
/// and compares its KV hash with `live`'s at the backup's revision. Errors
/// are failures to check at all (no tools, no address, the restore or the
/// scratch member failed, the live member did not answer); a check that
/// ran gives its [`RestoreCheck`], whatever it concluded.
pub async fn check(
    state_dir: &Path,
    binaries: &Binaries,
    backup: &BackupMeta,
    snapshot: &Path,
    live: Live<'_>,
) -> Result<RestoreCheck> {
    let clusters = state_dir.join("clusters");
    let folder = safe_path::cluster_path(&clusters, &backup.cluster, &[SCRATCH])
        .map_err(|e| io("cannot place the scratch folder")(e.into_io()))?;
    // A folder left by a check killed midway holds nothing of value.
    safe_path::remove_dir_all(&clusters, &backup.cluster, &[SCRATCH])
        .map_err(io("cannot clear the scratch folder"))?;
    std::fs::create_dir_all(&folder).map_err(io("cannot create the scratch folder"))?;
    let mut scratch = Scratch {
        clusters,
        cluster: backup.cluster.clone(),
        member: None,
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
                "no etcd {version} to serve the restored backup; run ci/setup"
            ))
        })?
        .etcd;
    let seed = format!("{}/{}/{SCRATCH}", state_dir.display(), backup.cluster);
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
    tools::restore(binaries, version, snapshot, &target).await?;
    let args: Vec<String> = [
        "--name",
        MEMBER,
        "--data-dir",
        &data.to_string_lossy(),
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
    let id = process::spawn(&etcd, &args, &log).map_err(io("cannot start the scratch member"))?;
    scratch.member = Some(id);
    tracing::info!(cluster = %backup.cluster, backup = %backup.name, url = %client, "restore check: scratch member started");

    let clients = Clients::new(Duration::from_secs(2));
    // A snapshot of a store never written to says revision 0, which
    // HashKV would take as "the newest"; etcd's first revision is 1.
    let revision = backup.revision.max(1);
    let Some(restored) = serve_hash(&clients, &client, revision, id, &log).await? else {
        return Ok(finish(
            scratch,
            backup,
            live,
            Verdict::Mismatch,
            None,
            None,
            format!(
                "restored, but it ends before revision {revision}, the revision its meta names: \
                 the snapshot is not the backup it is said to be"
            ),
        )
        .await);
    };
    if live.url.starts_with("https://") {
        clients.set_tls(live.url, live.tls.cloned());
    }
    let live_hash = match clients.hash_kv(live.url, revision).await {
        Ok(h) => h,
        Err(e) if compacted(&e.kind) => {
            return Ok(finish(
                scratch,
                backup,
                live,
                Verdict::Unverifiable,
                Some(restored.hash),
                None,
                format!(
                    "the live cluster already compacted past revision {revision}: \
                     nothing to compare the restored backup with"
                ),
            )
            .await);
        }
        Err(e) => {
            return Err(Error::Tool(format!(
                "the live member {} gave no KV hash: {e}",
                live.member
            )));
        }
    };
    let mut restored = restored;
    if let Some(to) = proof::compact_to(
        revision,
        restored.compact_revision,
        live_hash.compact_revision,
    ) {
        // The same history on both sides: the live cluster forgot what
        // lies before `to`, so the scratch member forgets it too.
        clients
            .compact(&client, to)
            .await
            .map_err(|e| Error::Tool(format!("cannot compact the scratch member: {e}")))?;
        restored = clients
            .hash_kv(&client, revision)
            .await
            .map_err(|e| Error::Tool(format!("the scratch member gave no KV hash: {e}")))?;
    }
    let (verdict, message) = proof::judge(revision, restored, live_hash);
    Ok(finish(
        scratch,
        backup,
        live,
        verdict,
        Some(restored.hash),
        Some(live_hash.hash),
        message,
    )
    .await)
}

/// Whether etcd refused a hash because the revision is compacted.
fn compacted(kind: &ErrorKind) -> bool {
    matches!(kind, ErrorKind::Refused(m) if m.contains("compacted"))
}

/// Waits (bounded) until the scratch member serves, and returns its hash
/// at `revision`; `None` when the restored backup does not reach that
/// revision (it is not what its meta says).
async fn serve_hash(
    clients: &Clients,
    url: &str,
    revision: i64,
    id: ProcessId,
    log: &Path,
) -> Result<Option<KvHash>> {
    let deadline = Instant::now() + SERVE_WITHIN;
    loop {
        match clients.hash_kv(url, revision).await {
            Ok(h) => return Ok(Some(h)),
            Err(e) if matches!(&e.kind, ErrorKind::Refused(m) if m.contains("future revision")) => {
                return Ok(None);
            }
            Err(e) => {
                if !process::alive(&id) || Instant::now() > deadline {
                    let tail = std::fs::read_to_string(log).unwrap_or_default();
                    let tail: Vec<&str> = tail.lines().rev().take(5).collect();
                    return Err(Error::Tool(format!(
                        "the scratch member restored from the backup did not serve ({e}); its log ends: {}",
                        tail.join(" | ")
                    )));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Stops the scratch member, deletes its folder, and says what was found.
async fn finish(
    mut scratch: Scratch,
    backup: &BackupMeta,
    live: Live<'_>,
    result: Verdict,
    backup_hash: Option<u32>,
    live_hash: Option<u32>,
    message: String,
) -> RestoreCheck {
    if let Some(id) = scratch.member.take() {
        let _ = process::stop(id, Duration::from_secs(5)).await;
    }
    drop(scratch);
    RestoreCheck {
        time: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        result,
        revision: backup.revision.max(1),
        backup_hash,
        live_hash,
        live_member: live.member.to_string(),
        message,
    }
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    crate::backup::io_err(what)
}
