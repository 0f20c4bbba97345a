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

/// Where the `data` field's bytes are inside one encoded `walpb.Record`
/// (`type` = 1 varint, `crc` = 2 varint, `data` = 3 bytes), relative to the
/// record: (offset, length). `None` when the record has no data or does not
/// decode. A byte flipped there is always caught by the record's CRC, where
/// one flipped in the framing (a tag or a length) makes etcd report a
/// decoding error or, worse, pass for a torn write.
pub fn data_range(record: &[u8]) -> Option<(usize, usize)> {
    let mut at = 0usize;
    while at < record.len() {
        let (key, n) = varint(record.get(at..)?)?;
        at += n;
        match (key >> 3, key & 7) {
            (_, 0) => at += varint(record.get(at..)?)?.1,
            (field, 2) => {
                let (len, n) = varint(record.get(at..)?)?;
                let len = usize::try_from(len).ok()?;
                let start = at + n;
                let end = start.checked_add(len).filter(|e| *e <= record.len())?;
                if field == 3 {
                    return (len > 0).then_some((start, len));
                }
                at = end;
            }
            _ => return None,
        }
    }
    None
}

/// A protobuf varint at the start of `b`: (value, bytes taken).
fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, byte) in b.iter().take(10).enumerate() {
        v |= u64::from(byte & 0x7F) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
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

    #[test]
    fn the_data_field_is_found_past_type_and_crc() {
        // type = 2, crc = 300 (two varint bytes), data = [7, 7, 7].
        let r = [0x08, 2, 0x10, 0xAC, 0x02, 0x1A, 3, 7, 7, 7];
        assert_eq!(data_range(&r), Some((7, 3)));
        // No data field, an empty one, a length past the end, a bad wire type.
        assert_eq!(data_range(&[0x08, 1, 0x10, 5]), None);
        assert_eq!(data_range(&[0x08, 1, 0x1A, 0]), None);
        assert_eq!(data_range(&[0x1A, 9, 1]), None);
        assert_eq!(data_range(&[0x0D, 1, 2, 3, 4]), None);
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_give_a_range_inside_the_record(b in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            if let Some((start, len)) = data_range(&b) {
                proptest::prop_assert!(len > 0 && start + len <= b.len());
            }
        }
    }
}
