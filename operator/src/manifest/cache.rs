//! What each manifest file parsed to, kept while the file stands still.
//!
//! The controller rescans the folder every few seconds as a backstop for
//! missed file events; parsing every file again each time was a large part
//! of an idle operator's CPU with many clusters. A file is parsed again
//! when its `stat` (device, inode, size, modification and change times)
//! differs from the one it was parsed at. A file changed within
//! [`RACY`] of its parse is never reused: a second write within the
//! timestamp granularity of the file system, of the same size, would
//! leave the same `stat` (the "racy clean" problem git has), so such a
//! file is parsed again until it has stood still longer than that.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::crd::EtcdCluster;

/// A file changed this recently (by its modification or change time) when
/// it was parsed is parsed again at the next scan.
pub const RACY: Duration = Duration::from_secs(2);

/// What [`super::parse`] made of a file's text.
pub(super) type Parsed = Result<Vec<EtcdCluster>, (Vec<String>, String)>;

/// A file's identity and version as `stat` (following symlinks) gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    /// The stamp of the regular file at `path` (`None` for anything else,
    /// or when it cannot be read).
    pub(super) fn of(path: &Path) -> Option<Stamp> {
        let m = std::fs::metadata(path).ok()?;
        m.is_file().then(|| Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }

    /// Whether the file changed at `now` or less than [`RACY`] before, by
    /// its change time: the kernel sets that to its own clock on every
    /// write and every `touch`, so it tells a recent change whatever the
    /// modification time says. A modification time in the future (a file
    /// copied from a machine whose clock runs ahead, `touch -d 2030`)
    /// does not make a file racy: it was parsed again every scan for ever.
    /// A change time in the future (the clock stepped back) is not racy
    /// either: any later write sets an earlier one, so the stamp differs.
    fn racy(&self, now: SystemTime) -> bool {
        let (s, ns) = self.ctime;
        let s = u64::try_from(s).unwrap_or(0);
        let ns = u32::try_from(ns).unwrap_or(0);
        let changed = SystemTime::UNIX_EPOCH + Duration::new(s, ns);
        now.duration_since(changed).is_ok_and(|d| d < RACY)
    }
}

/// Parses kept by file, with the stamp each was parsed at.
#[derive(Debug, Default)]
pub struct ParseCache {
    files: HashMap<PathBuf, (Stamp, Parsed)>,
    /// Files parsed (not taken from here) so far.
    parses: u64,
}

impl ParseCache {
    /// The parse of `path` if its file still has `stamp`.
    pub(super) fn get(&self, path: &Path, stamp: Option<Stamp>) -> Option<Parsed> {
        let (kept, parsed) = self.files.get(path)?;
        (Some(*kept) == stamp).then(|| parsed.clone())
    }

    /// Keeps the parse of `path`, whose file had `before` when its text
    /// was read, if it still has it and did not change too recently
    /// before `now`; forgets it otherwise.
    pub(super) fn keep(
        &mut self,
        path: &Path,
        before: Option<Stamp>,
        parsed: &Parsed,
        now: SystemTime,
    ) {
        self.parses += 1;
        match before {
            Some(s) if Stamp::of(path) == Some(s) && !s.racy(now) => {
                self.files.insert(path.to_path_buf(), (s, parsed.clone()));
            }
            _ => {
                self.files.remove(path);
            }
        }
    }

    /// Forgets the parse of `path`.
    pub(super) fn forget(&mut self, path: &Path) {
        self.files.remove(path);
    }

    /// Forgets files no longer in the folder.
    pub(super) fn retain(&mut self, present: &[PathBuf]) {
        let present: HashSet<&PathBuf> = present.iter().collect();
        self.files.retain(|p, _| present.contains(p));
    }

    /// How many files were parsed (not taken from here) so far.
    pub fn parses(&self) -> u64 {
        self.parses
    }

    /// How many files have a parse kept.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether no parse is kept.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}
