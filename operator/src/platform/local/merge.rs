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

use std::path::Path;
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions, GetOptions};

use super::binaries::Binaries;
use super::scratch::Scratch;
use crate::backup::chain::Chain;
use crate::backup::replay::{self, Replayed};
use crate::backup::{BackupMeta, Error, Result, Source, check_file, snapshot};

/// The scratch folder's name in the cluster's state folder, also the
/// scratch member's name.
const SCRATCH: &str = "replay";
/// How long the scratch member may take to serve after it started.
const SERVE_WITHIN: Duration = Duration::from_secs(60);

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
    let scratch = Scratch::start(
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
    snapshot::stream_to(source, dest).await?;
    let owned = dest.to_path_buf();
    tokio::task::spawn_blocking(move || check_file(&owned, None))
        .await
        .map_err(|e| Error::Tool(format!("checking the replayed snapshot failed: {e}")))??;
    scratch.stop().await;
    Ok(replayed)
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
