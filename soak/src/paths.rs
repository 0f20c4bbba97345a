//! Where the programs a run needs are found by default.

use std::path::{Path, PathBuf};

/// A binary of the workspace beside this program (`target/<profile>/soak`
/// -> `target/<profile>/NAME`).
pub fn beside(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

/// The etcd binaries folder: `./.etcd`, else the workspace's `.etcd` (two
/// levels above `target/<profile>/`), else the one of the source tree.
pub fn etcd_binaries() -> PathBuf {
    let cwd = Path::new(".etcd");
    if cwd.is_dir() {
        return cwd.into();
    }
    let from_exe = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent()?.parent()?.parent().map(|d| d.join(".etcd")));
    match from_exe {
        Some(d) if d.is_dir() => d,
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../.etcd"),
    }
}
