//! The delta segments of a backup folder ([`super::delta`]): segment `N`
//! of backup `BASE` is the file `BASE.delta-NNNNNNNN.seg` beside
//! `BASE.db`. Written like snapshots (a hidden temporary file, fsync,
//! rename); read back as a chain that is cut at the first segment that is
//! missing, damaged or does not follow the one before.

use std::io;
use std::path::{Path, PathBuf};

use super::delta::{self, Segment};
use super::{BackupMeta, Error, Result, io_err};

/// Temporary files of segments being written start so.
pub const TMP_PREFIX: &str = ".seg-tmp-";

/// The intact start of a backup's chain.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chain {
    /// The base backup.
    pub base: String,
    /// Its revision.
    pub base_revision: i64,
    /// The intact segments, in order.
    pub segments: Vec<Segment>,
    /// The hash the next segment chains to.
    pub next_prev: [u8; 32],
    /// Where and why the chain is cut (segments after it are not used).
    pub cut: Option<String>,
    /// Segment files found (intact or not).
    pub files: usize,
}

impl Chain {
    /// The last revision the chain holds (the base's when it has no
    /// segment).
    pub fn last_revision(&self) -> i64 {
        self.segments
            .last()
            .map_or(self.base_revision, Segment::last_revision)
    }

    /// The number the next segment gets.
    pub fn next_seq(&self) -> u64 {
        self.segments.last().map_or(1, |s| s.seq + 1)
    }

    /// When the last segment was written (ms since the epoch).
    pub fn last_unix_ms(&self) -> Option<u64> {
        self.segments.last().map(|s| s.unix_ms)
    }
}

/// Whether `name` can be part of a file name in the folder: no path.
fn plain(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && !name.starts_with('.')
}

/// The file of segment `seq` of backup `base`.
pub fn segment_file(base: &str, seq: u64) -> String {
    format!("{base}.delta-{seq:08}.seg")
}

/// The base and number of a segment file name.
pub fn parse_file_name(name: &str) -> Option<(&str, u64)> {
    let stem = name.strip_suffix(".seg")?;
    let (base, seq) = stem.rsplit_once(".delta-")?;
    if seq.len() < 8 || !seq.bytes().all(|b| b.is_ascii_digit()) || !plain(base) {
        return None;
    }
    Some((base, seq.parse().ok()?))
}

/// Segment files in `dir` (regular files only, never a symlink), as
/// (base, number, path).
pub fn segment_files(dir: &Path) -> Vec<(String, u64, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((base, seq)) = parse_file_name(name) else {
            continue;
        };
        if e.file_type().is_ok_and(|t| t.is_file()) {
            out.push((base.to_string(), seq, dir.join(name)));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    out
}

/// Reads the chain of `base` in `dir`, up to its first bad segment.
pub fn read(dir: &Path, base: &BackupMeta) -> Chain {
    read_on(dir, Chain::start(base))
}

/// `chain` (read before) extended with the segments of `dir` numbered
/// after its last one, up to the first bad one: only those are read.
pub fn read_on(dir: &Path, mut chain: Chain) -> Chain {
    let from = chain.next_seq();
    let files: Vec<_> = segment_files(dir)
        .into_iter()
        .filter(|(b, seq, _)| *b == chain.base && *seq >= from)
        .collect();
    chain.files = files.len();
    for (expected, (_, seq, path)) in (from..).zip(files) {
        let name = path.file_name().map(|n| n.to_string_lossy().to_string());
        let name = name.unwrap_or_default();
        if seq != expected {
            chain.cut = Some(format!(
                "segment {expected} of {} is missing (the next file is {name})",
                chain.base
            ));
            break;
        }
        let linked = match std::fs::read(&path) {
            Err(e) => Err(format!("cannot read {name}: {e}")),
            Ok(bytes) => chain.link(seq, &name, &bytes),
        };
        if let Err(p) = linked {
            chain.cut = Some(format!("the chain of {} is cut at {p}", chain.base));
            break;
        }
    }
    chain
}

impl Chain {
    /// This chain with only its last segment kept (what is needed to read
    /// it on: [`read_on`], [`super::BackupStore::chain_on`]).
    #[must_use]
    pub fn tail(&self) -> Self {
        Chain {
            segments: self.segments.last().cloned().into_iter().collect(),
            cut: None,
            files: 0,
            ..self.clone()
        }
    }

    /// The chain of `base` with no segment yet.
    pub fn start(base: &BackupMeta) -> Self {
        Chain {
            base: base.name.clone(),
            base_revision: base.revision,
            next_prev: delta::chain_start(&base.name, &base.sha256),
            ..Chain::default()
        }
    }

    /// Adds `bytes` (the file `name`) as segment `seq` when it is that
    /// segment of this chain, intact, and follows the last one; else says
    /// what is wrong with it (and adds nothing).
    pub fn link(&mut self, seq: u64, name: &str, bytes: &[u8]) -> std::result::Result<(), String> {
        match delta::parse(bytes) {
            Err(e) => Err(format!("{name}: {e}")),
            Ok((s, _)) if s.base != self.base || s.seq != seq => Err(format!(
                "{name}: it says it is segment {} of {}",
                s.seq, s.base
            )),
            Ok((s, _)) if s.prev != self.next_prev => Err(format!(
                "{name}: it does not chain to the segment before it (a segment was replaced or \
                 changed)"
            )),
            Ok((s, _)) if s.first_revision() <= self.last_revision() => Err(format!(
                "{name}: its first revision {} is not after {}",
                s.first_revision(),
                self.last_revision()
            )),
            Ok((s, hash)) => {
                self.segments.push(s);
                self.next_prev = hash;
                Ok(())
            }
        }
    }
}

/// Writes `segment` into `dir` through a temporary file, fsynced and
/// renamed (never over an existing segment).
pub fn write(dir: &Path, segment: &Segment) -> Result<PathBuf> {
    use std::io::Write as _;
    if !plain(&segment.base) {
        return Err(Error::Corrupt {
            path: dir.to_path_buf(),
            message: format!("{:?} is no backup name", segment.base),
        });
    }
    let file = segment_file(&segment.base, segment.seq);
    let dest = dir.join(&file);
    if dest.exists() {
        return Err(Error::Io {
            what: format!("cannot write {}", dest.display()),
            source: io::Error::new(io::ErrorKind::AlreadyExists, "the segment exists"),
        });
    }
    let tmp = dir.join(format!("{TMP_PREFIX}{file}"));
    let (bytes, _) = delta::encode(segment);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, &dest)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io_err(format!("cannot write {}", dest.display())))?;
    Ok(dest)
}

/// Deletes the segments of `base` in `dir` (only files named as its
/// segments, found by listing `dir`: nothing outside it).
pub fn delete(dir: &Path, base: &str) -> Result<usize> {
    let mut n = 0;
    for (b, _, path) in segment_files(dir) {
        if b == base {
            match std::fs::remove_file(&path) {
                Ok(()) => n += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err(format!("cannot delete {}", path.display()))(e)),
            }
        }
    }
    Ok(n)
}

/// Deletes the segments of `own` bases (backup names of this cluster,
/// [`super::owned_file`]) whose base backup is gone (no `BASE.json`), and
/// this cluster's temporary segment files untouched for
/// [`super::ORPHAN_AGE`] (an interrupted write). Segments of any other
/// base stay: they are another cluster's, or no one's we know.
pub fn sweep(dir: &Path, own: &dyn Fn(&str) -> bool) {
    for (b, _, path) in segment_files(dir) {
        if own(&b) && !dir.join(format!("{b}.json")).exists() {
            let _ = std::fs::remove_file(&path);
        }
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(base) = name
            .to_str()
            .and_then(|n| n.strip_prefix(TMP_PREFIX))
            .and_then(parse_file_name)
            .map(|(base, _)| base)
        else {
            continue;
        };
        if own(base) && old_file(&e) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Whether the regular file `e` was not modified for
/// [`super::ORPHAN_AGE`].
pub fn old_file(e: &std::fs::DirEntry) -> bool {
    e.file_type().is_ok_and(|t| t.is_file())
        && e.metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= super::ORPHAN_AGE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::delta::{Event, Revision};
    use crate::backup::tests::meta;

    fn seg(base: &BackupMeta, chain: &Chain, rev: i64) -> Segment {
        Segment {
            base: base.name.clone(),
            seq: chain.next_seq(),
            unix_ms: 1000 + rev as u64,
            revisions: vec![Revision {
                revision: rev,
                events: vec![Event::Put {
                    key: format!("k{rev}").into_bytes(),
                    value: b"v".to_vec(),
                }],
            }],
            prev: chain.next_prev,
        }
    }

    #[test]
    fn a_chain_is_read_back_and_cut_at_damage_or_a_gap() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = meta("b1", 1, "ff".into());
        for rev in 2..=5 {
            let chain = read(dir.path(), &base);
            write(dir.path(), &seg(&base, &chain, rev)).expect("write");
        }
        let chain = read(dir.path(), &base);
        assert_eq!((chain.segments.len(), chain.cut.clone()), (4, None));
        assert_eq!(chain.last_revision(), 5);
        assert!(write(dir.path(), &seg(&base, &chain, 9)).is_ok());
        // One byte flipped in segment 3: the chain is cut there.
        let p3 = dir.path().join(segment_file("b1", 3));
        let mut bytes = std::fs::read(&p3).expect("read");
        bytes[20] ^= 4;
        std::fs::write(&p3, &bytes).expect("write");
        let chain = read(dir.path(), &base);
        assert_eq!(chain.segments.len(), 2);
        assert_eq!(chain.files, 5);
        let cut = chain.cut.expect("cut");
        assert!(
            cut.contains("b1.delta-00000003.seg") && cut.contains("damaged"),
            "{cut}"
        );
        // Segment 3 removed: a gap.
        std::fs::remove_file(&p3).expect("rm");
        let chain = read(dir.path(), &base);
        assert_eq!(chain.segments.len(), 2);
        assert!(
            chain
                .cut
                .expect("cut")
                .contains("segment 3 of b1 is missing")
        );
        // A valid segment of another chain copied in its place does not
        // chain.
        let other = meta("b1", 1, "00".into());
        let fresh = tempfile::tempdir().expect("tempdir");
        for rev in 2..=4 {
            let c = read(fresh.path(), &other);
            write(fresh.path(), &seg(&other, &c, rev)).expect("write");
        }
        std::fs::copy(fresh.path().join(segment_file("b1", 3)), &p3).expect("cp");
        let chain = read(dir.path(), &base);
        assert_eq!(chain.segments.len(), 2);
        assert!(chain.cut.expect("cut").contains("does not chain"));
    }

    #[test]
    fn segments_go_with_their_base_and_nothing_else() {
        let dir = tempfile::tempdir().expect("tempdir");
        let b1 = meta("b1", 1, "aa".into());
        let c = read(dir.path(), &b1);
        write(dir.path(), &seg(&b1, &c, 2)).expect("write");
        std::fs::write(dir.path().join("b10.delta-00000001.seg"), b"x").expect("other");
        std::fs::write(dir.path().join("notes.seg"), b"x").expect("unrelated");
        assert_eq!(delete(dir.path(), "b1").expect("delete"), 1);
        assert!(dir.path().join("b10.delta-00000001.seg").exists());
        assert!(dir.path().join("notes.seg").exists());
        std::fs::write(dir.path().join("other.delta-00000001.seg"), b"x").expect("foreign");
        // b10 (ours) has no meta: swept; another's segments and unrelated
        // files stay.
        sweep(dir.path(), &|b| b == "b10");
        assert!(!dir.path().join("b10.delta-00000001.seg").exists());
        assert!(dir.path().join("other.delta-00000001.seg").exists());
        assert!(dir.path().join("notes.seg").exists());
        assert_eq!(parse_file_name("../x.delta-00000001.seg"), None);
        assert_eq!(parse_file_name("a.delta-1.seg"), None);
        assert_eq!(parse_file_name("a.delta-00000012.seg"), Some(("a", 12)));
    }
}
