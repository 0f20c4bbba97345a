//! Reading a file a user names in a spec (a provided certificate, a key, a
//! CA bundle), which may be anything: a FIFO nobody writes to (an `open()`
//! that never returns), `/dev/zero` behind a symlink (a read that never
//! ends), a huge file, a folder. Every such read goes through here:
//!
//! * the file is opened with `O_NONBLOCK` (a FIFO's open returns at once)
//!   and `fstat`ed: anything but a regular file is refused, naming what it
//!   is;
//! * its size is capped before and while it is read;
//! * the async form runs it on tokio's blocking pool with a time bound, so
//!   a stuck file system holds one blocking thread, never one of the
//!   runtime's workers (two on this machine), and one cluster's stuck file
//!   never stalls another's healing.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The most a certificate, key or CA bundle file may hold.
pub const PEM_MAX_BYTES: u64 = 1 << 20;
/// How long reading one such file may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a file a spec names could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// It is not a regular file.
    #[error("{} is {what}, not a regular file: point the spec at a file", .path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is instead ("a FIFO", "a folder", "a character device"...).
        what: &'static str,
    },
    /// It is larger than the cap.
    #[error("{} is larger than {max} bytes (the most such a file may hold)", .path.display())]
    TooLarge {
        /// The path.
        path: PathBuf,
        /// The cap.
        max: u64,
    },
    /// Reading it took too long.
    #[error("{} could not be read within {timeout:?} (a stuck file system?)", .path.display())]
    Timeout {
        /// The path.
        path: PathBuf,
        /// The bound.
        timeout: Duration,
    },
    /// It is not UTF-8 text.
    #[error("{} is not UTF-8 text", .path.display())]
    NotText {
        /// The path.
        path: PathBuf,
    },
    /// Opening or reading failed.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

impl Error {
    /// The I/O error kind it stands for (`NotFound` for a missing file).
    pub fn kind(&self) -> std::io::ErrorKind {
        match self {
            Error::Io { source, .. } => source.kind(),
            Error::Timeout { .. } => std::io::ErrorKind::TimedOut,
            _ => std::io::ErrorKind::InvalidInput,
        }
    }
}

/// What a file that is not a regular one is, in words.
pub(crate) fn what(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

/// Reads `path` (following symlinks) if it is a regular file of at most
/// `max` bytes. Blocking: call [`read`] from async code.
pub fn read_blocking(path: &Path, max: u64) -> Result<Vec<u8>, Error> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(Error::NotRegular {
            path: path.to_path_buf(),
            what: what(meta.file_type()),
        });
    }
    let too_large = || Error::TooLarge {
        path: path.to_path_buf(),
        max,
    };
    if meta.len() > max {
        return Err(too_large());
    }
    let mut out = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(io)?;
    if out.len() as u64 > max {
        return Err(too_large());
    }
    Ok(out)
}

/// [`read_blocking`] on the blocking pool, bounded by `timeout`.
pub async fn read(path: &Path, max: u64, timeout: Duration) -> Result<Vec<u8>, Error> {
    let owned = path.to_path_buf();
    let task = tokio::task::spawn_blocking(move || read_blocking(&owned, max));
    match tokio::time::timeout(timeout, task).await {
        Ok(Ok(result)) => result,
        Ok(Err(join)) => Err(Error::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(join.to_string()),
        }),
        Err(_) => Err(Error::Timeout {
            path: path.to_path_buf(),
            timeout,
        }),
    }
}

/// [`read`] of a PEM file (certificate, key, CA bundle): at most
/// [`PEM_MAX_BYTES`], within [`READ_TIMEOUT`], UTF-8.
pub async fn read_pem(path: &Path) -> Result<String, Error> {
    let bytes = read(path, PEM_MAX_BYTES, READ_TIMEOUT).await?;
    String::from_utf8(bytes).map_err(|_| Error::NotText {
        path: path.to_path_buf(),
    })
}

#[cfg(test)]
mod tests;
