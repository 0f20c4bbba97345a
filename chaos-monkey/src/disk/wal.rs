//! Just enough of etcd's WAL format to damage one record: a file is a
//! sequence of frames, each an 8-byte little-endian length word (the low 56
//! bits the record's length; with the top bit set, bits 56-58 the padding
//! after it) followed by the record, padded to 8 bytes. The preallocated
//! rest of the file is zeros (a zero length word ends the records).

use std::io;

/// Where each record's bytes are in a WAL file: (offset, length).
pub fn records(wal: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while let Some(word) = wal.get(at..at + 8) {
        let Ok(word) = <[u8; 8]>::try_from(word) else {
            break;
        };
        let field = u64::from_le_bytes(word);
        let len = usize::try_from(field & 0x00FF_FFFF_FFFF_FFFF).unwrap_or(usize::MAX);
        if len == 0 {
            break;
        }
        let pad = if field >> 63 == 1 {
            usize::try_from((field >> 56) & 0x7).unwrap_or(0)
        } else {
            0
        };
        let start = at + 8;
        let Some(end) = start.checked_add(len).filter(|e| *e <= wal.len()) else {
            break;
        };
        out.push((start, len));
        at = end + pad;
    }
    out
}

/// The newest `.wal` file in `dir` (names sort by sequence and index).
pub fn newest(dir: &std::path::Path) -> io::Result<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    files.sort();
    files.pop().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no .wal file in {}", dir.display()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_with_padding_and_the_zero_tail() {
        let mut w = Vec::new();
        // A 5-byte record padded by 3.
        w.extend_from_slice(&(5u64 | (0x80 | 3) << 56).to_le_bytes());
        w.extend_from_slice(&[1, 2, 3, 4, 5, 0, 0, 0]);
        // An 8-byte record, no padding.
        w.extend_from_slice(&8u64.to_le_bytes());
        w.extend_from_slice(&[9; 8]);
        w.extend_from_slice(&[0; 64]);
        assert_eq!(records(&w), [(8, 5), (24, 8)]);
        // A length past the end stops the walk.
        let mut torn = 100u64.to_le_bytes().to_vec();
        torn.extend_from_slice(&[1; 10]);
        assert!(records(&torn).is_empty());
    }
}
