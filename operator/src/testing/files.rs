//! Files for tests: what the operator may keep in its state folder, and
//! the FIFOs that stand for files a reader must not block on.

use std::path::Path;

/// Everything the operator may keep at the top of its state folder.
pub const STATE_ENTRIES: [&str; 6] = [
    "clusters",
    "backups",
    "operator.lock",
    "manifest-problems.json",
    // The running operator's status socket (controller/live.rs).
    "operator.sock",
    // Deleted clusters kept aside (platform/local/deleted.rs).
    "deleted",
];

/// Makes a FIFO at `path` (an `open()` of it for reading blocks until a
/// writer comes).
pub fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
}
