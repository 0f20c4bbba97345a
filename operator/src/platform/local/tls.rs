//! The local platform's TLS files, under the state folder:
//!
//! ```text
//! STATE/clusters/NAME/tls/ca.json            the cluster's CAs, keys included (0600)
//! STATE/clusters/NAME/tls/client/ca.crt      for tools and users: CAs to trust,
//! STATE/clusters/NAME/tls/client/tls.crt     a client certificate
//! STATE/clusters/NAME/tls/client/tls.key     and its key (0600)
//! STATE/clusters/NAME/members/MEMBER/tls/    the member's files (peer.crt, ...)
//! ```
//!
//! A set of files is written the way the kubelet writes a Secret volume:
//! into a new hidden folder, then a symlink `..data` is switched to it in
//! one rename, and each file is a symlink through `..data`. etcd reads a
//! certificate and its key on every new connection, so it never sees a new
//! certificate with an old key. Folders are owner-only (0700), keys 0600.

use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::LocalPlatform;
use super::layout::{read_json, write_json};
use crate::member::MemberAddr;
use crate::platform::tls_store::{ClientFiles, ClientPlace, Provided, TlsStore};
use crate::platform::{Error, Result, io_err};
use crate::tls::{CaState, CertKey, MemberFiles, files, url_host};

/// The link every file of a set points through.
const DATA: &str = "..data";
/// Names of the client files for tools (as cert-manager names them).
const CA_FILE: &str = "ca.crt";
const CERT_FILE: &str = "tls.crt";
const KEY_FILE: &str = "tls.key";

fn owner_only_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Writes `files` (name, content, is a key) into `dir` at once; names not
/// in `files` are removed. Keys get mode 0600, the rest 0644.
pub fn write_set(dir: &Path, files: &[(&str, &str, bool)]) -> io::Result<()> {
    owner_only_dir(dir)?;
    let generation = format!("..gen-{:016x}", rand::random::<u64>());
    let new = dir.join(&generation);
    owner_only_dir(&new)?;
    for (name, content, key) in files {
        let mode = if *key { 0o600 } else { 0o644 };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(new.join(name))?;
        f.write_all(content.as_bytes())?;
        f.sync_all()?;
    }
    // Switch `..data` in one rename.
    let tmp_link = dir.join(format!("..data-{generation}"));
    std::os::unix::fs::symlink(&generation, &tmp_link)?;
    std::fs::rename(&tmp_link, dir.join(DATA))?;
    for (name, _, _) in files {
        let link = dir.join(name);
        if std::fs::read_link(&link).is_err() {
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(Path::new(DATA).join(name), &link)?;
        }
    }
    // What is no longer part of the set: older generations, stale links.
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let stale_gen = name.starts_with("..gen-") && name != generation;
        let stale_link = !name.starts_with("..") && !files.iter().any(|(n, _, _)| *n == name);
        if stale_gen {
            let _ = std::fs::remove_dir_all(entry.path());
        } else if stale_link {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Reads `name` of a set written by [`write_set`], if there.
fn read_file(dir: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(name)).ok()
}

impl LocalPlatform {
    fn cluster_tls_dir(&self, cluster: &str) -> Result<PathBuf> {
        self.path(cluster, &["tls"])
    }

    fn client_dir(&self, cluster: &str) -> Result<PathBuf> {
        self.path(cluster, &["tls", "client"])
    }

    /// Where a member's TLS files are (its etcd's flags point here).
    pub fn member_tls_dir(&self, cluster: &str, member: &str) -> Result<PathBuf> {
        self.path(cluster, &["members", member, "tls"])
    }

    fn ca_path(&self, cluster: &str) -> Result<PathBuf> {
        self.path(cluster, &["tls", "ca.json"])
    }
}

impl TlsStore for LocalPlatform {
    async fn load_ca(&self, cluster: &str) -> Result<Option<CaState>> {
        let path = self.ca_path(cluster)?;
        read_json(&path).map_err(|e| Error::Record {
            path,
            message: e.to_string(),
        })
    }

    async fn save_ca(&self, cluster: &str, ca: &CaState) -> Result<()> {
        let dir = self.cluster_tls_dir(cluster)?;
        owner_only_dir(&dir).map_err(io_err(format!("cannot create {}", dir.display())))?;
        let path = self.ca_path(cluster)?;
        write_json(&path, ca).map_err(io_err(format!("cannot write {}", path.display())))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(io_err(format!("cannot restrict {}", path.display())))
    }

    async fn member_files(&self, cluster: &str, member: &str) -> Result<Option<MemberFiles>> {
        let dir = self.member_tls_dir(cluster, member)?;
        if !dir.join(DATA).exists() {
            return Ok(None);
        }
        Ok(Some(MemberFiles::from_map(|n| read_file(&dir, n))))
    }

    async fn install_member_files(
        &self,
        cluster: &str,
        member: &str,
        set: &MemberFiles,
    ) -> Result<()> {
        let dir = self.member_tls_dir(cluster, member)?;
        let list: Vec<(&str, &str, bool)> = set
            .to_map()
            .into_iter()
            .map(|(n, c)| (n, c, files::KEYS.contains(&n)))
            .collect();
        write_set(&dir, &list).map_err(io_err(format!(
            "cannot write the TLS files of {member} in {}",
            dir.display()
        )))
    }

    /// Reads a user's files through [`crate::userfile`]: a FIFO, a device,
    /// a folder or a file over 1 MiB is refused, and a read never holds a
    /// runtime worker.
    async fn provided(&self, _cluster: &str, source: &str) -> Result<Provided> {
        let dir = self.layout().root().join(source);
        let place = dir.display().to_string();
        let read = |name: &'static str| {
            let path = dir.join(name);
            let place = place.clone();
            async move {
                crate::userfile::read_pem(&path).await.map_err(|e| {
                    let kind = e.kind();
                    io_err(format!(
                        "cannot read {name} in {place} (mode: Provided needs ca.crt, tls.crt and \
                         tls.key there, regular files of at most 1 MiB)"
                    ))(std::io::Error::new(kind, e.to_string()))
                })
            }
        };
        Ok(Provided {
            ca: read(CA_FILE).await?,
            cert_key: CertKey {
                cert: read(CERT_FILE).await?,
                key: read(KEY_FILE).await?,
            },
            place,
        })
    }

    async fn standby_password(
        &self,
        cluster: &str,
        user: &str,
    ) -> Result<(String, crate::standby::auth::PasswordPlace)> {
        let (password, file) = self.standby_password_file(cluster, user)?;
        Ok((password, crate::standby::auth::PasswordPlace::File(file)))
    }

    async fn client_files(&self, cluster: &str) -> Result<Option<ClientFiles>> {
        let dir = self.client_dir(cluster)?;
        let (Some(ca), Some(cert), Some(key)) = (
            read_file(&dir, CA_FILE),
            read_file(&dir, CERT_FILE),
            read_file(&dir, KEY_FILE),
        ) else {
            return Ok(None);
        };
        Ok(Some(ClientFiles {
            ca,
            cert_key: CertKey { cert, key },
        }))
    }

    async fn install_client_files(&self, cluster: &str, set: &ClientFiles) -> Result<ClientPlace> {
        let dir = self.client_dir(cluster)?;
        let list = [
            (CA_FILE, set.ca.as_str(), false),
            (CERT_FILE, set.cert_key.cert.as_str(), false),
            (KEY_FILE, set.cert_key.key.as_str(), true),
        ];
        write_set(&dir, &list).map_err(io_err(format!(
            "cannot write the client certificate in {}",
            dir.display()
        )))?;
        Ok(self.client_place(cluster))
    }

    fn client_place(&self, cluster: &str) -> ClientPlace {
        let Ok(dir) = self.client_dir(cluster) else {
            return ClientPlace::default();
        };
        let path = |n: &str| Some(dir.join(n).display().to_string());
        ClientPlace {
            ca_file: path(CA_FILE),
            cert_file: path(CERT_FILE),
            key_file: path(KEY_FILE),
            secret: None,
        }
    }

    /// Its loopback address and its name, and 127.0.0.1 (`localhost`):
    /// a member dials its peers from 127.0.0.1, and etcd checks that a
    /// peer's certificate names the address it dials from.
    fn member_names(&self, _cluster: &str, addr: &MemberAddr) -> Vec<String> {
        let mut names: Vec<String> = [&addr.peer_url, &addr.client_url]
            .into_iter()
            .filter_map(|u| url_host(u).map(str::to_string))
            .collect();
        names.extend([addr.name.clone(), "127.0.0.1".into(), "localhost".into()]);
        names.dedup();
        names
    }

    /// Members dial their peers from 127.0.0.1.
    fn peer_source_names(&self) -> Vec<String> {
        vec!["127.0.0.1".into()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_set_is_switched_at_once_and_keys_are_owner_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tls = dir.path().join("tls");
        write_set(&tls, &[("a.crt", "one", false), ("a.key", "k1", true)]).expect("write");
        assert_eq!(read_file(&tls, "a.crt").as_deref(), Some("one"));
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").mode() & 0o777;
        assert_eq!(mode(&tls), 0o700);
        assert_eq!(mode(&tls.join("a.key")), 0o600);
        assert_eq!(mode(&tls.join("a.crt")), 0o644);
        write_set(&tls, &[("a.crt", "two", false), ("b.crt", "b", false)]).expect("rewrite");
        assert_eq!(read_file(&tls, "a.crt").as_deref(), Some("two"));
        assert_eq!(read_file(&tls, "a.key"), None, "dropped from the set");
        let gens = std::fs::read_dir(&tls)
            .expect("list")
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("..gen-"))
            })
            .count();
        assert_eq!(gens, 1, "older generations are removed");
    }
}
