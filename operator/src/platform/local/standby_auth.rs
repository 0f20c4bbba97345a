//! The passwords of a standby's etcd auth ([`crate::standby::auth`]) on the
//! local platform, one file per user, owner-only:
//!
//! ```text
//! STATE/clusters/NAME/auth/            0700
//! STATE/clusters/NAME/auth/root.password     the operator's (0600)
//! STATE/clusters/NAME/auth/reader.password   for clients (0600)
//! STATE/clusters/NAME/auth/jwt.key    the members' token signing key (0600)
//! STATE/clusters/NAME/auth/jwt.pub    and its public half
//! ```
//!
//! A standby's members sign their auth tokens (JWT, ES256) rather than
//! keeping etcd's default "simple" tokens: etcd 3.5 before 3.5.5 (etcd
//! #13205) never enables simple tokens on a member that caught up from the
//! leader's snapshot (a member added to a busy cluster), which then answers
//! every authenticated request "invalid auth token" until it restarts; a
//! signed token needs no state on the member (measured on 3.5.1: refused
//! with simple tokens, answered with JWT; 3.4.23 answers with either).
//!
//! A file is made once, with a random password, and read afterwards; it is
//! never reached through a symlink (the folder's path is checked as every
//! path in the state folder is, and the file is opened with `O_NOFOLLOW`).

use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use rand::Rng;
use rand::distr::Alphanumeric;

use super::LocalPlatform;
use super::layout::Layout;
use super::safe_path;
use crate::etcd::Credentials;
use crate::platform::{Result, io_err};

/// The folder of a cluster's passwords.
const DIR: &str = "auth";
/// The members' token signing key, and its public half.
const JWT_KEY: &str = "jwt.key";
const JWT_PUB: &str = "jwt.pub";
/// Characters of a new password.
const LENGTH: usize = 32;
/// The longest password file read.
const MAX: u64 = 16 * 1024;

impl LocalPlatform {
    /// `user`'s password of `cluster`'s standby auth and its file's path,
    /// made the first time.
    pub(super) fn standby_password_file(
        &self,
        cluster: &str,
        user: &str,
    ) -> Result<(String, String)> {
        let file = format!("{user}.password");
        let dir = self.path(cluster, &[DIR])?;
        let path = self.path(cluster, &[DIR, &file])?;
        let shown = path.display().to_string();
        if let Some(p) = read(&path).map_err(io_err(format!("cannot read {shown}")))? {
            return Ok((p, shown));
        }
        owner_only(&dir).map_err(io_err(format!("cannot create {}", dir.display())))?;
        let password: String = rand::rng()
            .sample_iter(&Alphanumeric)
            .take(LENGTH)
            .map(char::from)
            .collect();
        let made = match create(&path, &password) {
            // An empty file left by a crash before it was written.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                std::fs::remove_file(&path).and_then(|()| create(&path, &password))
            }
            other => other,
        };
        made.map_err(io_err(format!("cannot write {shown}")))?;
        Ok((password, shown))
    }
}

impl LocalPlatform {
    /// The `--auth-token` flag of a standby's members: tokens signed with
    /// the cluster's key (made the first time, kept for every member).
    pub(super) fn standby_token_flag(&self, cluster: &str) -> Result<[String; 2]> {
        let dir = self.path(cluster, &[DIR])?;
        let key = self.path(cluster, &[DIR, JWT_KEY])?;
        let public = self.path(cluster, &[DIR, JWT_PUB])?;
        let fail = |what: &Path| io_err(format!("cannot make {}", what.display()));
        owner_only(&dir).map_err(fail(&dir))?;
        let pem = match read(&key).map_err(fail(&key))? {
            Some(pem) => pem,
            None => {
                let made = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
                    .map_err(|e| io::Error::other(e.to_string()))
                    .map_err(fail(&key))?
                    .serialize_pem();
                create(&key, &made).map_err(fail(&key))?;
                made
            }
        };
        if read(&public).map_err(fail(&public))?.is_none() {
            let pair = rcgen::KeyPair::from_pem(&pem)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
                .map_err(fail(&key))?;
            create(&public, &pair.public_key_pem()).map_err(fail(&public))?;
        }
        let (key, public) = (key.display().to_string(), public.display().to_string());
        if key.contains(',') || public.contains(',') {
            return Err(
                io_err(format!("{key}: a comma in the state folder's path"))(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "etcd's --auth-token takes no comma in a path; use another state folder",
                )),
            );
        }
        Ok(crate::standby::auth::token_flag(&public, &key))
    }
}

/// Makes `dir` owner-only (0700).
fn owner_only(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// The credentials of `user` (`root`, `reader`) of the standby `cluster`'s
/// etcd auth, as the operator keeps them under the state folder `state`
/// (`None` before it made them): for tests and tools that read or check a
/// standby. The path is checked as the operator's own are.
pub fn credentials(state: &Path, cluster: &str, user: &str) -> io::Result<Option<Credentials>> {
    let clusters = Layout::new(state).clusters_dir();
    let file = format!("{user}.password");
    let path = safe_path::cluster_path(&clusters, cluster, &[DIR, &file])
        .map_err(safe_path::Error::into_io)?;
    Ok(read(&path)?.map(|p| Credentials::new(user, p)))
}

/// The text in `path` (a password, a key), trimmed; `None` when there is none (no file, or an empty
/// one: a crash between making it and writing it). A symlink, a folder or
/// a special file is refused.
fn read(path: &Path) -> io::Result<Option<String>> {
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(path);
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.file_type().is_file() || meta.len() > MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a regular file of at most 16 KiB",
        ));
    }
    let mut text = String::new();
    file.take(MAX).read_to_string(&mut text)?;
    let password = text.trim();
    Ok((!password.is_empty()).then(|| password.to_string()))
}

/// Makes `path` (0600, never through a symlink: it must not exist) with
/// `password`, written through to the disk.
fn create(path: &Path, password: &str) -> io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)?;
    file.write_all(password.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_made_once_and_kept_owner_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("root.password");
        assert_eq!(read(&path).expect("read"), None);
        create(&path, "pw").expect("create");
        assert_eq!(read(&path).expect("read").as_deref(), Some("pw"));
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(create(&path, "other").is_err(), "never replaced");
    }

    #[test]
    fn a_symlink_is_never_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "secret-elsewhere").expect("write");
        let link = dir.path().join("reader.password");
        std::os::unix::fs::symlink(&outside, &link).expect("symlink");
        assert!(read(&link).is_err(), "a symlink is refused");
        assert!(create(&link, "pw").is_err(), "nor written through");
        let kept = std::fs::read_to_string(&outside).expect("read");
        assert_eq!(kept, "secret-elsewhere");
    }
}
