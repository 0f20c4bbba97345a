//! A snapshot file named by its path in `spec.restore.backup`: where it
//! is (a relative path is taken from the state folder, as
//! `spec.backup.location.path` is, never from the operator's working
//! folder) and whether it can be a snapshot at all, judged by `stat`
//! alone before anything is read: a folder, a FIFO or `/dev/zero` is
//! named as what it is, and a file larger than any etcd quota (a 1 TiB
//! sparse file was hashed at 100% of a core) is refused by its size.

use std::path::{Path, PathBuf};

use super::{Error, Result};
use crate::member::backend::MAX_QUOTA;

/// The largest snapshot file restored: twice the largest quota a member
/// runs with (a database file may carry free pages beyond its data).
pub const MAX_SOURCE_BYTES: u64 = 2 * MAX_QUOTA as u64;

/// Where the snapshot path `name` points: as it is when absolute, else
/// under `base` (the state folder).
pub fn resolve_path(name: &str, base: &Path) -> PathBuf {
    let p = Path::new(name);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// Checks that `path` (following symlinks) is a regular file no larger
/// than [`MAX_SOURCE_BYTES`]; `name` is the value the spec gave.
pub fn check(name: &str, path: &Path) -> Result<()> {
    let tried = if Path::new(name).is_absolute() {
        path.display().to_string()
    } else {
        format!(
            "{} (a relative path is taken from the state folder)",
            path.display()
        )
    };
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::NotFound {
                name: name.into(),
                dir: "the file system".into(),
                known: format!("no file at {tried}"),
            });
        }
        Err(e) => {
            return Err(Error::Io {
                what: format!("cannot read {tried}"),
                source: e,
            });
        }
    };
    if !meta.is_file() {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            message: format!(
                "{}, not a snapshot file: point spec.restore.backup at an etcd snapshot \
                 (`etcdctl snapshot save` or a backup's .db file)",
                crate::userfile::what(meta.file_type())
            ),
        });
    }
    if meta.len() > MAX_SOURCE_BYTES {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            message: format!(
                "{} bytes is larger than any snapshot a member can hold ({} GiB, twice the \
                 largest spec.quotaBackendBytes): not read",
                meta.len(),
                MAX_SOURCE_BYTES >> 30
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(name: &str, base: &Path) -> String {
        let path = resolve_path(name, base);
        check(name, &path).expect_err("refused").to_string()
    }

    #[test]
    fn what_cannot_be_a_snapshot_is_named_before_it_is_read() {
        let dir = tempfile::tempdir().expect("tmp");
        let d = dir.path();
        std::fs::create_dir(d.join("folder.db")).expect("mkdir");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            d.join("fifo.db"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        std::os::unix::fs::symlink("/dev/zero", d.join("zero.db")).expect("link");
        let huge = std::fs::File::create(d.join("huge.db")).expect("create");
        huge.set_len(1 << 40).expect("sparse 1 TiB");
        let abs = |n: &str| d.join(n).to_string_lossy().into_owned();
        let m = message(&abs("folder.db"), d);
        assert!(m.contains("a folder, not a snapshot file"), "{m}");
        let m = message(&abs("fifo.db"), d);
        assert!(m.contains("a FIFO, not a snapshot file"), "{m}");
        let m = message(&abs("zero.db"), d);
        assert!(m.contains("a character device, not a snapshot file"), "{m}");
        let m = message(&abs("huge.db"), d);
        assert!(m.contains("1099511627776 bytes is larger"), "{m}");
        // A relative path is taken from the base, and the message says so.
        let m = message("sub/missing.db", d);
        assert!(
            m.contains(&format!(
                "no file at {}",
                d.join("sub/missing.db").display()
            )) && m.contains("taken from the state folder"),
            "{m}"
        );
        std::fs::write(d.join("ok.db"), b"0123456789").expect("write");
        assert!(check("ok.db", &resolve_path("ok.db", d)).is_ok());
    }
}
