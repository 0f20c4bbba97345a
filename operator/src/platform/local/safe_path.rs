//! The one function through which the local platform builds every path it
//! creates or deletes under its state folder: [`cluster_path`].
//!
//! Defence in depth behind the name check of the manifests: whatever a
//! caller passes, the path is strictly inside `STATE/clusters/NAME` for a
//! valid cluster name (or is that folder itself, to create or delete the
//! whole cluster), each further part is one plain file name (no `/`, no
//! `.` or `..`, nothing absolute), and no folder on the way below
//! `STATE/clusters` is a symlink, which could lead anywhere. Deletes go
//! through it too ([`remove_dir_all`], [`remove_file`]).

use std::io;
use std::path::{Component, Path, PathBuf};

use crate::names::{NameError, check_cluster_name, quote};

/// Why a path was refused.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cluster name is not a valid one.
    #[error("refused a path for cluster {}: {source}", quote(.cluster, 48))]
    Name {
        /// The name given.
        cluster: String,
        /// Why it is invalid.
        source: NameError,
    },
    /// A part below the cluster's folder is not one plain file name.
    #[error("refused a path in cluster {cluster}: {} is not a plain file name ({why})", quote(.part, 48))]
    Part {
        /// The cluster.
        cluster: String,
        /// The part given.
        part: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A folder on the way is a symlink.
    #[error("refused {}: {} is a symlink, which could lead outside the cluster's folder", .path.display(), .link.display())]
    Symlink {
        /// The path asked for.
        path: PathBuf,
        /// The symlink on the way.
        link: PathBuf,
    },
}

impl Error {
    /// The same as an I/O error (of kind `InvalidInput`), for callers that
    /// report file errors.
    pub fn into_io(self) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, self.to_string())
    }
}

/// Why `part` is not one plain file name, if it is not.
fn plain(part: &str) -> Option<&'static str> {
    if part.is_empty() {
        return Some("it is empty");
    }
    if part.contains('\0') {
        return Some("it contains a NUL byte");
    }
    if part.contains('/') {
        return Some("it contains '/'");
    }
    let mut components = Path::new(part).components();
    match (components.next(), components.next()) {
        (Some(Component::Normal(_)), None) => None,
        (Some(Component::CurDir | Component::ParentDir), _) => Some("it is '.' or '..'"),
        _ => Some("it is not a single file name"),
    }
}

/// `CLUSTERS/CLUSTER/PARTS...`, checked: `clusters` is the state folder's
/// `clusters` folder, `cluster` a valid cluster name, each part one plain
/// file name, and neither the cluster's folder nor any part that exists
/// is a symlink.
pub fn cluster_path(clusters: &Path, cluster: &str, parts: &[&str]) -> Result<PathBuf, Error> {
    let path = named(clusters, cluster, parts)?;
    walk(clusters, cluster, &path)?;
    Ok(path)
}

/// `CLUSTERS/CLUSTER/PARTS...` with the names checked (a valid cluster
/// name, each part one plain file name), without looking at the file
/// system: the first half of [`cluster_path`]. What it returns is strictly
/// inside `CLUSTERS/CLUSTER`, or that folder itself.
pub fn named(clusters: &Path, cluster: &str, parts: &[&str]) -> Result<PathBuf, Error> {
    check_cluster_name(cluster).map_err(|source| Error::Name {
        cluster: cluster.to_string(),
        source,
    })?;
    let mut path = clusters.join(cluster);
    for part in parts {
        if let Some(why) = plain(part) {
            return Err(Error::Part {
                cluster: cluster.to_string(),
                part: (*part).to_string(),
                why,
            });
        }
        path.push(part);
    }
    Ok(path)
}

/// The second half of [`cluster_path`]: walks from `CLUSTERS/CLUSTER` down
/// to `path` (built by [`named`]), refusing a symlink on the way. Returns
/// whether everything on the way exists (a walk that met nothing missing
/// stays true until something on the way is deleted, moved or replaced).
pub fn walk(clusters: &Path, cluster: &str, path: &Path) -> Result<bool, Error> {
    let top = clusters.join(cluster);
    let Ok(below) = path.strip_prefix(&top) else {
        // Not built by `named` for this cluster: nothing to trust.
        return Err(Error::Part {
            cluster: cluster.to_string(),
            part: path.display().to_string(),
            why: "it is not inside the cluster's folder",
        });
    };
    let mut step = top;
    let mut on_the_way = vec![step.clone()];
    for part in below.components() {
        step.push(part);
        on_the_way.push(step.clone());
    }
    for step in on_the_way {
        match std::fs::symlink_metadata(&step) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(Error::Symlink {
                    path: path.to_path_buf(),
                    link: step,
                });
            }
            Ok(_) => {}
            // What does not exist cannot lead anywhere; below it nothing
            // exists either.
            Err(_) => return Ok(false),
        }
    }
    Ok(true)
}

/// Deletes the folder `CLUSTERS/CLUSTER/PARTS...` with everything in it
/// (symlinks inside are removed, never followed); a missing folder is no
/// error.
pub fn remove_dir_all(clusters: &Path, cluster: &str, parts: &[&str]) -> io::Result<()> {
    let path = cluster_path(clusters, cluster, parts).map_err(Error::into_io)?;
    match std::fs::remove_dir_all(&path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Deletes the file `CLUSTERS/CLUSTER/PARTS...`; a missing file is no
/// error.
pub fn remove_file(clusters: &Path, cluster: &str, parts: &[&str]) -> io::Result<()> {
    let path = cluster_path(clusters, cluster, parts).map_err(Error::into_io)?;
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state folder with two healthy-looking clusters.
    fn state() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let clusters = dir.path().join("state").join("clusters");
        for c in ["victim", "other"] {
            let member = clusters.join(c).join("members").join(format!("{c}-0"));
            std::fs::create_dir_all(member.join("data")).expect("mkdir");
            std::fs::write(member.join("member.json"), "{}").expect("write");
        }
        (dir, clusters)
    }

    fn everything_still_there(clusters: &Path) {
        for c in ["victim", "other"] {
            let member = clusters.join(c).join("members").join(format!("{c}-0"));
            assert!(member.join("member.json").is_file(), "{c} lost its member");
        }
    }

    /// Each name of the data-loss report is refused, for building a path
    /// and for deleting, and nothing is deleted.
    #[test]
    fn the_reported_bad_names_are_refused() {
        let (_dir, clusters) = state();
        for bad in ["..", ".", "", "victim/members/victim-0", "../../escape"] {
            let e = cluster_path(&clusters, bad, &["status.json"]).expect_err(bad);
            assert!(matches!(e, Error::Name { .. }), "{bad:?}: {e}");
            assert!(
                e.to_string().contains("not a valid cluster name"),
                "{bad:?}: {e}"
            );
            let e = remove_dir_all(&clusters, bad, &[]).expect_err(bad);
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
            assert!(remove_file(&clusters, bad, &["cluster.json"]).is_err());
            everything_still_there(&clusters);
        }
    }

    #[test]
    fn the_empty_name_is_refused() {
        let (_dir, clusters) = state();
        assert!(matches!(
            cluster_path(&clusters, "", &[]),
            Err(Error::Name { .. })
        ));
    }

    #[test]
    fn the_dot_names_are_refused() {
        let (_dir, clusters) = state();
        for bad in [".", ".."] {
            assert!(remove_dir_all(&clusters, bad, &[]).is_err());
        }
        everything_still_there(&clusters);
    }

    #[test]
    fn a_name_reaching_into_another_cluster_is_refused() {
        let (_dir, clusters) = state();
        assert!(remove_dir_all(&clusters, "victim/members/victim-0", &[]).is_err());
        everything_still_there(&clusters);
    }

    #[test]
    fn a_name_leaving_the_state_folder_is_refused() {
        let (dir, clusters) = state();
        assert!(cluster_path(&clusters, "../../escape", &["status.json"]).is_err());
        assert!(!dir.path().join("escape").exists());
    }

    #[test]
    fn parts_must_be_plain_file_names() {
        let (_dir, clusters) = state();
        for bad in ["..", ".", "", "/etc", "a/b", "members/../..", "a\0b"] {
            let e = cluster_path(&clusters, "victim", &["members", bad]).expect_err(bad);
            assert!(matches!(e, Error::Part { .. }), "{bad:?}: {e}");
            assert!(remove_dir_all(&clusters, "victim", &["members", bad]).is_err());
        }
        everything_still_there(&clusters);
        let ok = cluster_path(&clusters, "victim", &["members", "victim-0", "data"])
            .expect("a plain path");
        assert_eq!(ok, clusters.join("victim/members/victim-0/data"));
        assert_eq!(
            cluster_path(&clusters, "victim", &[]).expect("the folder"),
            clusters.join("victim")
        );
    }

    /// A symlink on the way could lead anywhere: refused, and what it
    /// points at survives a delete through it.
    #[test]
    fn symlinks_on_the_way_are_refused() {
        let (dir, clusters) = state();
        let outside = dir.path().join("precious");
        std::fs::create_dir_all(outside.join("data")).expect("mkdir");
        std::os::unix::fs::symlink(&outside, clusters.join("victim/members/linked"))
            .expect("symlink");
        std::os::unix::fs::symlink(&outside, clusters.join("linked")).expect("symlink");
        for (cluster, parts) in [
            ("victim", &["members", "linked", "data"][..]),
            ("victim", &["members", "linked"][..]),
            ("linked", &["data"][..]),
            ("linked", &[][..]),
        ] {
            let e = cluster_path(&clusters, cluster, parts).expect_err("through a symlink");
            assert!(matches!(e, Error::Symlink { .. }), "{e}");
            assert!(remove_dir_all(&clusters, cluster, parts).is_err());
        }
        assert!(
            outside.join("data").is_dir(),
            "the symlink's target survived"
        );
        everything_still_there(&clusters);
    }

    /// The two halves of `cluster_path`: names without the file system,
    /// then the walk, which says whether it met everything on the way.
    #[test]
    fn named_checks_names_and_walk_says_whether_all_exists() {
        let (dir, clusters) = state();
        for (cluster, parts) in [
            ("..", &["status.json"][..]),
            ("victim/members/victim-0", &[][..]),
            ("victim", &["members", ".."][..]),
            ("victim", &["a/b"][..]),
        ] {
            assert!(
                named(&clusters, cluster, parts).is_err(),
                "{cluster:?} {parts:?}"
            );
        }
        let whole = named(&clusters, "victim", &["members", "victim-0", "member.json"])
            .expect("plain names");
        assert_eq!(walk(&clusters, "victim", &whole).ok(), Some(true));
        let missing = named(&clusters, "victim", &["members", "victim-9", "data"]).expect("ok");
        assert_eq!(walk(&clusters, "victim", &missing).ok(), Some(false));
        // A path of another cluster, or outside, is no walk of this one.
        let other = named(&clusters, "other", &["members"]).expect("ok");
        assert!(walk(&clusters, "victim", &other).is_err());
        assert!(walk(&clusters, "victim", dir.path()).is_err());
        // A symlink on the way is refused, also as the last part.
        std::os::unix::fs::symlink(dir.path(), clusters.join("victim/members/linked"))
            .expect("symlink");
        let linked = named(&clusters, "victim", &["members", "linked"]).expect("ok");
        assert!(matches!(
            walk(&clusters, "victim", &linked),
            Err(Error::Symlink { .. })
        ));
        let below = named(&clusters, "victim", &["members", "linked", "x"]).expect("ok");
        assert!(matches!(
            walk(&clusters, "victim", &below),
            Err(Error::Symlink { .. })
        ));
    }

    #[test]
    fn missing_paths_are_fine_and_deleting_them_is_no_error() {
        let (_dir, clusters) = state();
        let p = cluster_path(&clusters, "new", &["members", "new-0", "data"]).expect("ok");
        assert!(!p.exists());
        remove_dir_all(&clusters, "new", &[]).expect("nothing to delete");
        remove_file(&clusters, "new", &["cluster.json"]).expect("nothing to delete");
        remove_dir_all(&clusters, "other", &[]).expect("deleted");
        assert!(!clusters.join("other").exists());
        assert!(
            clusters
                .join("victim/members/victim-0/member.json")
                .is_file()
        );
    }
}
