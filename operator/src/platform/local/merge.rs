//! A restore with continuous backups, on the local platform: the base
//! backup is restored into a scratch folder under the cluster's state
//! folder, served by one private scratch etcd member on a free loopback
//! address, the chain's segments are replayed into it (one transaction per
//! original revision, [`crate::backup::replay`]), and its database becomes
//! the snapshot every member of the cluster restores from. No client can
//! reach the scratch member, so the revisions replayed are the original
//! ones. The scratch member is then stopped cleanly (etcd commits its
//! database as it stops) and its database file, sealed with its SHA-256
//! as etcd's snapshot stream sends it, is the snapshot: moved, not
//! streamed (streaming 515 MiB took 3.8 s, as long as the restore and the
//! replay before it), and its revision checked with the etcd tool. The
//! result is staged like any restore source, so an operator restart finds
//! it. The scratch member is stopped and its folder deleted afterwards,
//! also on error.

use std::path::Path;
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions, GetOptions};

use super::binaries::Binaries;
use super::scratch::Scratch;
use crate::backup::chain::Chain;
use crate::backup::replay::{self, Replayed};
use crate::backup::{BackupMeta, Error, Result, Source, snapshot, tools};
use crate::version::Version;

/// The scratch folder's name in the cluster's state folder, also the
/// scratch member's name.
const SCRATCH: &str = "replay";
/// How long the scratch member may take to serve after it started.
const SERVE_WITHIN: Duration = Duration::from_secs(60);
/// How long the scratch member may take to stop on SIGTERM.
const STOP_WITHIN: Duration = Duration::from_secs(10);

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
    let mut scratch = Scratch::start(
        state_dir,
        binaries,
        cluster,
        SCRATCH,
        "replay",
        base,
        snapshot_file,
    )
    .await?;
    wait_serving(&scratch).await?;
    let client = scratch.client.clone();
    let source = Source {
        member: SCRATCH,
        url: &client,
        tls: None,
    };
    let replayed = replay::apply(source, chain).await?;
    let db = scratch.stop_clean(STOP_WITHIN).await?;
    seal(binaries, base, &db, dest, replayed.revision).await?;
    scratch.stop().await;
    Ok(replayed)
}

/// Makes the stopped scratch member's database `db` the snapshot file
/// `dest` ([`snapshot::seal_db`]: no stream), and checks what it holds:
/// the etcd tool of the backup's version must open it and find the
/// revision the replay reached. A file that fails is deleted.
async fn seal(
    binaries: &Binaries,
    base: &BackupMeta,
    db: &Path,
    dest: &Path,
    revision: i64,
) -> Result<()> {
    let version: Version = base
        .etcd_version
        .parse()
        .map_err(|_| Error::Tool(format!("backup {} names no etcd version", base.name)))?;
    let tool = tools::tool_for(binaries, version)?;
    let (from, to) = (db.to_path_buf(), dest.to_path_buf());
    tokio::task::spawn_blocking(move || snapshot::seal_db(&from, &to))
        .await
        .map_err(|e| Error::Tool(format!("sealing the replayed database failed: {e}")))??;
    let checked = match tools::status(&tool, dest).await {
        Ok(s) if s.revision == revision => Ok(()),
        Ok(s) => Err(Error::Corrupt {
            path: dest.to_path_buf(),
            message: format!(
                "the replayed database holds revision {}, the replay reached {revision}",
                s.revision
            ),
        }),
        Err(e) => Err(e),
    };
    if checked.is_err() {
        let _ = std::fs::remove_file(dest);
    }
    checked
}

/// Waits (bounded) until the scratch member answers a read.
async fn wait_serving(scratch: &Scratch) -> Result<()> {
    let url = scratch.client.as_str();
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
        if !scratch.alive() || Instant::now() > deadline {
            return Err(Error::Tool(format!(
                "the replay member restored from the backup did not serve ({e}); its log ends: {}",
                scratch.log_tail()
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
