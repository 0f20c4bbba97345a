//! Where a local cluster's `spec.backup.location.path` may point. Backups
//! are written and swept there, so the folder must be one no other part of
//! the operator owns: never the state folder itself or a folder holding
//! it, never inside its `clusters/` folder (member data, records, certs),
//! never inside another cluster's default backup folder
//! (`STATE/backups/OTHER`). Two clusters that name the same folder of their
//! own are kept apart by the identity each backup carries
//! ([`crate::backup::owner`]).

use std::path::{Component, Path, PathBuf};

/// The field every refusal names.
const FIELD: &str = "spec.backup.location.path";

/// `path` without `.` and with each `..` taking its parent away.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `path` with its longest existing start resolved (symlinks followed),
/// the rest appended as written.
fn resolved(path: &Path) -> PathBuf {
    let path = lexical(path);
    let mut head = path.clone();
    let mut tail = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(&head) {
            let mut out = real;
            out.extend(tail.iter().rev());
            return out;
        }
        match (head.file_name().map(ToOwned::to_owned), head.parent()) {
            (Some(name), Some(parent)) => {
                tail.push(name);
                head = parent.to_path_buf();
            }
            _ => return path,
        }
    }
}

/// Checks the backup folder `path` of cluster `cluster` (relative paths
/// are taken from the state folder `state_dir`). The error names the field,
/// what the folder is, and what to do instead.
pub fn check(state_dir: &Path, cluster: &str, path: &Path) -> Result<(), String> {
    let state = resolved(state_dir);
    let wanted = resolved(&crate::backup::backup_dir(state_dir, cluster, Some(path)));
    let fix = format!(
        "name a folder of its own outside the operator's state folder (or leave the path out: \
         the default is {})",
        crate::backup::backup_dir(state_dir, cluster, None).display()
    );
    if state.starts_with(&wanted) {
        return Err(format!(
            "{FIELD}: {} is the operator's state folder{}, where member data is kept: \
             backups there would mix with it; {fix}",
            path.display(),
            if state == wanted { "" } else { " or holds it" },
        ));
    }
    let clusters = state.join("clusters");
    if wanted.starts_with(&clusters) {
        return Err(format!(
            "{FIELD}: {} is inside {}, the member data, records and certificates of \
             clusters: {fix}",
            path.display(),
            clusters.display()
        ));
    }
    let defaults = state.join("backups");
    if let Ok(inside) = wanted.strip_prefix(&defaults)
        && let Some(Component::Normal(owner)) = inside.components().next()
        && owner.to_str() != Some(cluster)
    {
        return Err(format!(
            "{FIELD}: {} is inside {}, the default backup folder of cluster {}: {fix}",
            path.display(),
            defaults.join(owner).display(),
            owner.to_string_lossy()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backup_folder_stays_out_of_the_operators_own() {
        let root = tempfile::tempdir().expect("tempdir");
        let state = root.path().join("state");
        std::fs::create_dir_all(state.join("clusters/other/other-0")).expect("mkdir");
        std::fs::create_dir_all(state.join("backups/other")).expect("mkdir");
        std::os::unix::fs::symlink(state.join("clusters"), root.path().join("link"))
            .expect("symlink");
        let refused = [
            state.clone(),
            PathBuf::from("."),
            PathBuf::from(""),
            PathBuf::from(".."),
            PathBuf::from("/"),
            PathBuf::from("clusters"),
            PathBuf::from("clusters/other/other-0"),
            state.join("clusters/other/other-0/member"),
            PathBuf::from("backups/../clusters/demo"),
            root.path().join("link/x"),
            PathBuf::from("backups/other"),
            state.join("backups/other/sub"),
        ];
        for p in refused {
            let e = check(&state, "demo", &p).expect_err("refused");
            assert!(
                e.starts_with(FIELD) && e.contains("a folder of its own"),
                "{e}"
            );
        }
        for ok in [
            PathBuf::from("backups/demo"),
            PathBuf::from("shared-backups"),
            root.path().join("elsewhere"),
            PathBuf::from("backups/demo/sub"),
        ] {
            let r = check(&state, "demo", &ok);
            assert!(r.is_ok(), "{}: {r:?}", ok.display());
        }
    }
}
