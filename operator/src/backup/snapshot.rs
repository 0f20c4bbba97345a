//! Taking one backup into a folder (the local store's save): stream a
//! snapshot from a member into a temporary file, fsync, rename, verify,
//! write the meta.
//!
//! The SHA-256 trailer is checked on the stream, as the bytes go by, with
//! one hasher for both hashes (the file's is its content's hasher fed the
//! trailer too), not by reading the file again: a file just written comes back from the
//! page cache, so a second read proves nothing the stream did not. The
//! etcd tools then open the file, side by side.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use etcd_client::{Client, ConnectOptions};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::{BackupMeta, Error, Result, Source, io_err, to_hex, tools, write_meta};
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
    let opts = ConnectOptions::new().with_connect_timeout(Duration::from_secs(5));
    let opts = crate::etcd::reach(opts, source.url, source.tls, None);
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
    let tmp = tmp_beside(dest);
    let result = async {
        let mut stream = tokio::time::timeout(STALL, client.snapshot())
            .await
            .map_err(|_| fail("no answer to snapshot".into()))?
            .map_err(|e| fail(e.to_string()))?;
        let file = tokio::fs::File::create(&tmp)
            .await
            .map_err(io_err(format!("cannot create {}", tmp.display())))?;
        let mut out = tokio::io::BufWriter::with_capacity(1 << 20, file);
        let mut trailer = Trailer::default();
        let mut size = 0u64;
        loop {
            let msg = tokio::time::timeout(STALL, stream.message())
                .await
                .map_err(|_| fail(format!("stalled for {STALL:?}")))?
                .map_err(|e| fail(e.to_string()))?;
            let Some(msg) = msg else { break };
            let blob = msg.blob();
            trailer.update(blob);
            size += blob.len() as u64;
            out.write_all(blob)
                .await
                .map_err(io_err(format!("cannot write {}", tmp.display())))?;
        }
        out.flush()
            .await
            .map_err(io_err(format!("cannot write {}", tmp.display())))?;
        let sha256 = trailer.check().map_err(fail)?;
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
            sha256,
            version,
        })
    }
    .await;
    if result.is_err() {
        let _ = tokio::fs::remove_file(&tmp).await;
    }
    result
}

/// The temporary file a snapshot is written to before it is renamed to
/// `dest`: beside it, so the rename stays on one filesystem.
fn tmp_beside(dest: &Path) -> std::path::PathBuf {
    let dir = dest.parent().unwrap_or(Path::new("."));
    let file_name = dest
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("snapshot");
    dir.join(format!(".tmp-{file_name}"))
}

/// Makes the database file `db` of a member that stopped cleanly (etcd
/// commits its database when it stops) a snapshot file at `dest`: the file
/// is moved (copied when it is on another file system) beside `dest`, its
/// SHA-256 appended as etcd's trailer, fsynced and renamed; what etcd's
/// snapshot stream sends is the same database and the same trailer, but
/// streaming it costs as much as copying it twice. Every restore checks
/// the trailer. Blocking; returns the SHA-256 of the whole file (hex). The
/// content is not checked here: its caller compares its revision.
pub fn seal_db(db: &Path, dest: &Path) -> Result<String> {
    use std::io::{Read, Seek, Write};
    let dir = dest.parent().unwrap_or(Path::new("."));
    let tmp = tmp_beside(dest);
    let result = (|| {
        if std::fs::rename(db, &tmp).is_err() {
            std::fs::copy(db, &tmp).map_err(io_err(format!(
                "cannot copy {} to {}",
                db.display(),
                tmp.display()
            )))?;
        }
        let what = format!("cannot seal {}", tmp.display());
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&tmp)
            .map_err(io_err(what.clone()))?;
        let mut body = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = file.read(&mut buf).map_err(io_err(what.clone()))?;
            if n == 0 {
                break;
            }
            body.update(&buf[..n]);
        }
        let mut whole = body.clone();
        let trailer = body.finalize();
        whole.update(trailer);
        file.seek(std::io::SeekFrom::End(0))
            .map_err(io_err(what.clone()))?;
        file.write_all(&trailer).map_err(io_err(what.clone()))?;
        file.sync_all().map_err(io_err(what))?;
        drop(file);
        std::fs::rename(&tmp, dest)
            .map_err(io_err(format!("cannot rename to {}", dest.display())))?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(to_hex(&whole.finalize()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The SHA-256 of a snapshot's content (all but its last 32 bytes),
/// computed as the bytes stream by, and those last 32 bytes: etcd's
/// trailer, which must be that hash. One hasher gives both the content's
/// hash and the whole file's (a copy of its state fed the trailer), so
/// each byte is hashed once.
#[derive(Default)]
struct Trailer {
    body: Sha256,
    /// The last (up to) 32 bytes seen, not hashed yet.
    tail: Vec<u8>,
}

impl Trailer {
    fn update(&mut self, chunk: &[u8]) {
        if chunk.len() >= 32 {
            self.body.update(&self.tail);
            let (body, tail) = chunk.split_at(chunk.len() - 32);
            self.body.update(body);
            self.tail.clear();
            self.tail.extend_from_slice(tail);
        } else {
            self.tail.extend_from_slice(chunk);
            let over = self.tail.len().saturating_sub(32);
            self.body.update(&self.tail[..over]);
            self.tail.drain(..over);
        }
    }

    /// The whole file's SHA-256 (hex), if the last 32 bytes are the
    /// SHA-256 of the rest.
    fn check(self) -> std::result::Result<String, String> {
        if self.tail.len() < 32 {
            return Err(format!(
                "{} bytes is too short for an etcd snapshot",
                self.tail.len()
            ));
        }
        let mut whole = self.body.clone();
        whole.update(&self.tail);
        if self.body.finalize().as_slice() != self.tail.as_slice() {
            return Err(
                "its SHA-256 trailer does not match its content: the stream is damaged or not \
                 an etcd snapshot"
                    .into(),
            );
        }
        Ok(to_hex(&whole.finalize()))
    }
}

/// Takes a verified backup of `cluster` (whose uid is `uid`) from
/// `source` into `dir`, named and marked as its own ([`super::owner`]).
pub async fn take(
    cluster: &str,
    uid: Option<&str>,
    source: Source<'_>,
    dir: &Path,
    binaries: &Binaries,
) -> Result<BackupMeta> {
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(io_err(format!("cannot create {}", dir.display())))?;
    let now = SystemTime::now();
    let name = unique_name(dir, &super::name_prefix(cluster, uid), now);
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
            uid: uid.map(str::to_string),
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

/// The tools' agreement (the trailer was checked on the stream, and the
/// file's hash is the streamed one).
async fn verify(
    path: &Path,
    sha: &str,
    binaries: &Binaries,
) -> Result<(String, (tools::SnapshotStatus, Vec<String>))> {
    let tools = tools::verify(binaries, path).await?;
    Ok((sha.to_string(), tools))
}

/// `PREFIX-YYYYMMDD-HHMMSS-mmm` (PREFIX: [`super::name_prefix`]), with a
/// suffix if taken.
fn unique_name(dir: &Path, prefix: &str, at: SystemTime) -> String {
    let stamp = humantime::format_rfc3339_millis(at).to_string();
    let digits: String = stamp.chars().filter(char::is_ascii_digit).collect();
    let base = format!(
        "{prefix}-{}-{}-{}",
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn snapshot_of(content: &[u8]) -> Vec<u8> {
        let mut file = content.to_vec();
        file.extend_from_slice(&Sha256::digest(content));
        file
    }

    fn check_in_chunks(file: &[u8], cuts: &[usize]) -> std::result::Result<String, String> {
        let mut t = Trailer::default();
        let mut at = 0;
        for c in cuts {
            let end = (at + c).min(file.len());
            t.update(&file[at..end]);
            at = end;
        }
        t.update(&file[at..]);
        t.check()
    }

    #[test]
    fn a_sealed_database_is_a_snapshot_file_that_checks_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("member/snap/db");
        std::fs::create_dir_all(db.parent().expect("parent")).expect("mkdir");
        let content: Vec<u8> = (0..3 * (1 << 20) + 77).map(|i| (i % 251) as u8).collect();
        std::fs::write(&db, &content).expect("db");
        let dest = dir.path().join("restore.db");
        let sha = seal_db(&db, &dest).expect("sealed");
        assert!(!db.exists(), "moved, not copied");
        assert_eq!(std::fs::read(&dest).expect("read"), snapshot_of(&content));
        assert_eq!(super::super::check_file(&dest, Some(&sha)).ok(), Some(sha));
        assert!(!dir.path().join(".tmp-restore.db").exists());
        // No database: an error, and nothing left behind.
        let e = seal_db(&db, &dir.path().join("other.db")).expect_err("no db");
        assert!(e.to_string().contains("cannot copy"), "{e}");
        assert!(!dir.path().join(".tmp-other.db").exists());
    }

    proptest! {
        /// However the stream is cut into messages, a good snapshot checks
        /// out and one with any byte changed does not.
        #[test]
        fn the_trailer_is_checked_on_any_chunking(
            content in proptest::collection::vec(any::<u8>(), 0..300),
            cuts in proptest::collection::vec(0usize..80, 0..12),
            flip in any::<prop::sample::Index>(),
        ) {
            let file = snapshot_of(&content);
            let whole = to_hex(&Sha256::digest(&file));
            prop_assert_eq!(check_in_chunks(&file, &cuts), Ok(whole));
            let mut bad = file.clone();
            let i = flip.index(bad.len());
            bad[i] ^= 0x01;
            prop_assert!(check_in_chunks(&bad, &cuts).is_err());
        }
    }

    #[test]
    fn a_stream_shorter_than_a_trailer_is_refused() {
        assert!(check_in_chunks(&[1, 2, 3], &[1]).is_err());
        assert!(check_in_chunks(&[], &[]).is_err());
    }
}
