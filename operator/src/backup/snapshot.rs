//! Taking one backup into a folder (the local store's save): stream a
//! snapshot from a member into a temporary file, fsync, rename, verify,
//! write the meta.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use etcd_client::{Client, ConnectOptions};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::{BackupMeta, Error, Result, Source, check_file, io_err, to_hex, tools, write_meta};
use crate::platform::local::binaries::Binaries;

/// Longest pause between two chunks of a snapshot before giving up.
const STALL: Duration = Duration::from_secs(30);

/// What streaming a snapshot produced.
#[derive(Clone, Debug)]
pub struct Streamed {
    /// Bytes written.
    pub size: u64,
    /// SHA-256 of the file, hex.
    pub sha256: String,
    /// Server version of the member.
    pub version: String,
}

/// Streams a snapshot of `source` to `dest` (through a hidden temporary
/// file in the same folder, fsynced and renamed).
pub async fn stream_to(source: Source<'_>, dest: &Path) -> Result<Streamed> {
    let fail = |message: String| Error::Snapshot {
        member: source.member.into(),
        url: source.url.into(),
        message,
    };
    let mut opts = ConnectOptions::new().with_connect_timeout(Duration::from_secs(5));
    if let Some(tls) = source.tls.filter(|_| crate::tls::is_https(source.url)) {
        opts = opts.with_tls(tls.options());
    }
    let mut client = tokio::time::timeout(STALL, Client::connect([source.url], Some(opts)))
        .await
        .map_err(|_| fail("no connection".into()))?
        .map_err(|e| fail(e.to_string()))?;
    let version = tokio::time::timeout(STALL, client.status())
        .await
        .map_err(|_| fail("no answer to status".into()))?
        .map_err(|e| fail(e.to_string()))?
        .version()
        .to_string();
    let dir = dest.parent().unwrap_or(Path::new("."));
    let file_name = dest
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("snapshot");
    let tmp = dir.join(format!(".tmp-{file_name}"));
    let result = async {
        let mut stream = tokio::time::timeout(STALL, client.snapshot())
            .await
            .map_err(|_| fail("no answer to snapshot".into()))?
            .map_err(|e| fail(e.to_string()))?;
        let file = tokio::fs::File::create(&tmp)
            .await
            .map_err(io_err(format!("cannot create {}", tmp.display())))?;
        let mut out = tokio::io::BufWriter::with_capacity(1 << 20, file);
        let mut hash = Sha256::new();
        let mut size = 0u64;
        loop {
            let msg = tokio::time::timeout(STALL, stream.message())
                .await
                .map_err(|_| fail(format!("stalled for {STALL:?}")))?
                .map_err(|e| fail(e.to_string()))?;
            let Some(msg) = msg else { break };
            let blob = msg.blob();
            hash.update(blob);
            size += blob.len() as u64;
            out.write_all(blob)
                .await
                .map_err(io_err(format!("cannot write {}", tmp.display())))?;
        }
        out.flush()
            .await
            .map_err(io_err(format!("cannot write {}", tmp.display())))?;
        let file = out.into_inner();
        file.sync_all()
            .await
            .map_err(io_err(format!("cannot fsync {}", tmp.display())))?;
        drop(file);
        tokio::fs::rename(&tmp, dest)
            .await
            .map_err(io_err(format!("cannot rename to {}", dest.display())))?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(Streamed {
            size,
            sha256: to_hex(&hash.finalize()),
            version,
        })
    }
    .await;
    if result.is_err() {
        let _ = tokio::fs::remove_file(&tmp).await;
    }
    result
}

/// Takes a verified backup of `cluster` from `source` into `dir`.
pub async fn take(
    cluster: &str,
    source: Source<'_>,
    dir: &Path,
    binaries: &Binaries,
) -> Result<BackupMeta> {
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(io_err(format!("cannot create {}", dir.display())))?;
    let now = SystemTime::now();
    let name = unique_name(dir, cluster, now);
    let path = dir.join(format!("{name}.db"));
    let result = async {
        let streamed = stream_to(source, &path).await?;
        let (sha, verified) = verify(&path, &streamed.sha256, binaries).await?;
        let (status, tools_lines) = verified;
        let mut verified_by = vec![format!("sha256 trailer and file hash {sha}")];
        verified_by.extend(tools_lines);
        let meta = BackupMeta {
            name: name.clone(),
            cluster: cluster.into(),
            time: humantime::format_rfc3339_millis(now).to_string(),
            unix_ms: u64::try_from(
                now.duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_millis(),
            )
            .unwrap_or(u64::MAX),
            revision: status.revision,
            total_keys: status.total_key,
            size: streamed.size,
            sha256: streamed.sha256,
            etcd_version: streamed.version,
            member: source.member.into(),
            verified_by,
            restore_check: None,
        };
        write_meta(dir, &meta)?;
        Ok(meta)
    }
    .await;
    if result.is_err() {
        let _ = tokio::fs::remove_file(&path).await;
    }
    result
}

/// Integrity (trailer and streamed hash) and the tools' agreement.
async fn verify(
    path: &Path,
    sha: &str,
    binaries: &Binaries,
) -> Result<(String, (tools::SnapshotStatus, Vec<String>))> {
    let owned = path.to_path_buf();
    let expected = sha.to_string();
    let checked = tokio::task::spawn_blocking(move || check_file(&owned, Some(&expected)))
        .await
        .map_err(|e| Error::Tool(format!("verification task failed: {e}")))??;
    let tools = tools::verify(binaries, path).await?;
    Ok((checked, tools))
}

/// `CLUSTER-YYYYMMDD-HHMMSS-mmm`, with a suffix if taken.
fn unique_name(dir: &Path, cluster: &str, at: SystemTime) -> String {
    let stamp = humantime::format_rfc3339_millis(at).to_string();
    let digits: String = stamp.chars().filter(char::is_ascii_digit).collect();
    let base = format!(
        "{cluster}-{}-{}-{}",
        &digits[..8.min(digits.len())],
        &digits[8.min(digits.len())..14.min(digits.len())],
        &digits[14.min(digits.len())..]
    );
    let mut name = base.clone();
    let mut n = 2;
    while dir.join(format!("{name}.db")).exists() || dir.join(format!("{name}.json")).exists() {
        name = format!("{base}-{n}");
        n += 1;
    }
    name
}
