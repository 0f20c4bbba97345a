//! The local platform's restore check: a backup is restored (with the
//! etcd tools, as a restore into a new cluster is) into a scratch folder
//! under its cluster's state folder, served by one scratch etcd member on
//! a free loopback address, and its `HashKV` at the backup's revision is
//! compared with a live member's ([`crate::backup::proof`]). The scratch
//! member is stopped and its folder deleted afterwards, also on error.

use std::path::Path;
use std::time::{Duration, Instant};

use super::binaries::Binaries;
use super::scratch::Scratch;
use crate::backup::proof::{self, RestoreCheck, Verdict};
use crate::backup::{BackupMeta, Error, Result, Source as Live};
use crate::etcd::{Clients, ErrorKind};
use crate::plan::KvHash;

/// The scratch folder's name in the cluster's state folder, also the
/// scratch member's name.
const SCRATCH: &str = "restore-check";
/// How long the scratch member may take to serve after it started.
const SERVE_WITHIN: Duration = Duration::from_secs(60);

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
    let scratch = Scratch::start(
        state_dir,
        binaries,
        &backup.cluster,
        SCRATCH,
        "restore check",
        backup,
        snapshot,
    )
    .await?;
    let client = scratch.client.clone();
    tracing::info!(cluster = %backup.cluster, backup = %backup.name, url = %client, "restore check: scratch member started");

    let clients = Clients::new(Duration::from_secs(2));
    // A snapshot of a store never written to says revision 0, which
    // HashKV would take as "the newest"; etcd's first revision is 1.
    let revision = backup.revision.max(1);
    let Some(restored) = serve_hash(&clients, &scratch, revision).await? else {
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
async fn serve_hash(clients: &Clients, scratch: &Scratch, revision: i64) -> Result<Option<KvHash>> {
    let url = scratch.client.as_str();
    let deadline = Instant::now() + SERVE_WITHIN;
    loop {
        match clients.hash_kv(url, revision).await {
            Ok(h) => return Ok(Some(h)),
            Err(e) if matches!(&e.kind, ErrorKind::Refused(m) if m.contains("future revision")) => {
                return Ok(None);
            }
            Err(e) => {
                if !scratch.alive() || Instant::now() > deadline {
                    return Err(Error::Tool(format!(
                        "the scratch member restored from the backup did not serve ({e}); its log ends: {}",
                        scratch.log_tail()
                    )));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Stops the scratch member, deletes its folder, and says what was found.
async fn finish(
    scratch: Scratch,
    backup: &BackupMeta,
    live: Live<'_>,
    result: Verdict,
    backup_hash: Option<u32>,
    live_hash: Option<u32>,
    message: String,
) -> RestoreCheck {
    scratch.stop().await;
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
