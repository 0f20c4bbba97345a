//! When a missing manifest means "delete this cluster", and when it means
//! "something happened to the folder". Locally a manifest's disappearance
//! is the only delete a user can express, so it is told apart from a
//! folder that was unmounted, replaced or emptied at once (a `git
//! checkout`, `rsync --delete`, a ConfigMap sync): then nothing is deleted
//! and the folder problem is said instead.
//!
//! * The folder is another one than at the first scan (another device or
//!   inode: unmounted, remounted, replaced): no cluster is deleted while
//!   it is.
//! * Every manifest of two or more clusters vanished in one scan: those
//!   clusters are held, and stay held until their manifest is back, or a
//!   user asks for their deletion by name (`etcd-operator delete NAME`,
//!   a request file in `STATE/delete-requests/`).
//! * A single manifest removed (others still there, or the only cluster's)
//!   deletes its cluster once `--delete-grace` is over ([`super::pending`]:
//!   a manifest back before then cancels it), whose folder is kept aside
//!   ([`crate::platform::local::deleted`]).

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::names::check_cluster_name;

/// The folder of deletion requests in a state folder.
pub fn requests_dir(state: &Path) -> PathBuf {
    state.join("delete-requests")
}

/// Asks the running operator to delete cluster `name` although its
/// manifest vanished together with others (a held cluster); returns the
/// request file.
pub fn request_delete(state: &Path, name: &str) -> std::io::Result<PathBuf> {
    check_cluster_name(name)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let dir = requests_dir(state);
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(name);
    std::fs::write(&file, b"")?;
    Ok(file)
}

/// The clusters a user asked to delete by name (`etcd-operator delete`)
/// among `missing` ones; a request for a cluster that still has a manifest
/// (or does not exist) is dropped with a word: deleting its manifest is
/// the way.
pub fn delete_requests(state: &Path, missing: &HashSet<String>) -> HashSet<String> {
    let dir = requests_dir(state);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return HashSet::new();
    };
    let mut out = HashSet::new();
    for name in entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(String::from))
    {
        if check_cluster_name(&name).is_err() {
            continue;
        }
        if missing.contains(&name) {
            out.insert(name);
        } else {
            tracing::warn!(
                cluster = %name,
                "a deletion was asked for, but a manifest names the cluster (or it does not \
                 exist): delete its manifest to delete it"
            );
            let _ = std::fs::remove_file(dir.join(&name));
        }
    }
    out
}

/// What the guard decided for one scan.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Clusters to delete now (their grace permitting).
    pub delete: Vec<String>,
    /// The folder problem to report, when there is one.
    pub problem: Option<String>,
}

/// The guard's memory between scans.
#[derive(Debug, Default)]
pub struct Guard {
    /// The folder's (device, inode) at the first scan.
    identity: Option<(u64, u64)>,
    /// Clusters whose manifest vanished together with every other one.
    held: HashSet<String>,
}

impl Guard {
    /// Decides for one scan of `folder`: `known` clusters (on disk or
    /// managed), `missing` those of them no manifest names now,
    /// `requested` those a user asked to delete by name.
    pub fn judge(
        &mut self,
        folder: &Path,
        known: &HashSet<String>,
        missing: &HashSet<String>,
        requested: &HashSet<String>,
    ) -> Verdict {
        let identity = std::fs::metadata(folder).ok().map(|m| (m.dev(), m.ino()));
        if self.identity.is_none() {
            self.identity = identity;
        }
        // A cluster whose manifest is back is no longer held.
        self.held.retain(|c| missing.contains(c));
        let asked: Vec<String> = missing.intersection(requested).cloned().collect();
        for c in &asked {
            self.held.remove(c);
        }
        if identity != self.identity {
            return Verdict {
                delete: asked,
                problem: Some(format!(
                    "the manifests folder {} is not the folder the operator started with (another \
                     device or folder: unmounted, remounted or replaced?): no cluster is deleted \
                     while it is; mount it back, or restart the operator to take the new folder",
                    folder.display()
                )),
            };
        }
        let fresh: Vec<&String> = missing.iter().filter(|c| !self.held.contains(*c)).collect();
        if fresh.len() >= 2 && fresh.len() == known.len() {
            self.held.extend(fresh.into_iter().cloned());
        }
        let problem = (!self.held.is_empty()).then(|| {
            let mut held: Vec<&String> = self.held.iter().collect();
            held.sort();
            let names: Vec<&str> = held.iter().map(|s| s.as_str()).collect();
            format!(
                "the manifests of {} vanished from {} at once: they are kept running, not deleted \
                 (an emptied folder is taken for a folder problem). Put the manifests back, or \
                 delete a cluster on purpose with `etcd-operator delete NAME`",
                names.join(", "),
                folder.display()
            )
        });
        let delete = missing
            .iter()
            .filter(|c| !self.held.contains(*c))
            .cloned()
            .collect();
        Verdict { delete, problem }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> HashSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn an_emptied_folder_holds_every_cluster_until_its_manifest_is_back_or_asked_for() {
        let dir = tempfile::tempdir().expect("dir");
        let mut g = Guard::default();
        let known = set(&["a", "b", "c"]);
        let v = g.judge(dir.path(), &known, &set(&[]), &set(&[]));
        assert_eq!(v, Verdict::default());
        // All three vanish at once: held.
        let v = g.judge(dir.path(), &known, &set(&["a", "b", "c"]), &set(&[]));
        assert!(v.delete.is_empty(), "{v:?}");
        assert!(
            v.problem.as_deref().is_some_and(|p| p.contains("a, b, c")),
            "{v:?}"
        );
        // One comes back (a sync writing files one by one): the others stay held.
        let v = g.judge(dir.path(), &known, &set(&["b", "c"]), &set(&[]));
        assert!(v.delete.is_empty(), "{v:?}");
        // Asked for by name: deleted.
        let v = g.judge(dir.path(), &known, &set(&["b", "c"]), &set(&["c"]));
        assert_eq!(v.delete, vec!["c".to_string()]);
        assert!(
            v.problem
                .as_deref()
                .is_some_and(|p| p.contains('b') && !p.contains("b, c"))
        );
    }

    #[test]
    fn one_manifest_removed_deletes_its_cluster() {
        let dir = tempfile::tempdir().expect("dir");
        let mut g = Guard::default();
        let v = g.judge(dir.path(), &set(&["a", "b"]), &set(&["b"]), &set(&[]));
        assert_eq!(v.delete, vec!["b".to_string()]);
        assert_eq!(v.problem, None);
        // The only cluster's manifest removed: deleted (kept aside).
        let mut g = Guard::default();
        let v = g.judge(dir.path(), &set(&["a"]), &set(&["a"]), &set(&[]));
        assert_eq!(v.delete, vec!["a".to_string()]);
    }

    #[test]
    fn a_replaced_folder_deletes_nothing() {
        let dir = tempfile::tempdir().expect("dir");
        let folder = dir.path().join("m");
        std::fs::create_dir(&folder).expect("mkdir");
        let mut g = Guard::default();
        g.judge(&folder, &set(&["a", "b"]), &set(&[]), &set(&[]));
        std::fs::rename(&folder, dir.path().join("old")).expect("mv");
        std::fs::create_dir(&folder).expect("mkdir");
        let v = g.judge(&folder, &set(&["a", "b"]), &set(&["b"]), &set(&[]));
        assert!(v.delete.is_empty(), "{v:?}");
        assert!(
            v.problem
                .as_deref()
                .is_some_and(|p| p.contains("not the folder")),
            "{v:?}"
        );
    }
}
