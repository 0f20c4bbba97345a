//! Disk faults: bytes flipped in a stopped member's files (`corrupt`), and
//! the keyspace filled until etcd raises its NOSPACE alarm (`disk-full`).

pub mod bbolt;
pub mod fill;
pub mod slow;
pub mod wal;

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::cli::CorruptPart;
use crate::rng::Rng;

/// Flips the bits of one byte at `offset` of `path`, and syncs it.
fn flip(path: &Path, offset: u64) -> io::Result<u8> {
    let f = File::options().read(true).write(true).open(path)?;
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, offset)?;
    let new = b[0] ^ 0xFF;
    f.write_all_at(&[new], offset)?;
    f.sync_all()?;
    Ok(new)
}

/// Damages the etcd data under `data_dir` (the member's `--data-dir`): in
/// the db, the last byte of one live value of the `key` bucket (a value's
/// last byte is its user value's, so the record still decodes: silent
/// corruption, which etcd 3.4.23's initial check at start lets through and
/// its periodic hash check finds); in the WAL, a byte in the middle of
/// one record's data in the newest file (its CRC no longer matches). Which one comes from `rng`. Returns
/// what was done, for the fault log.
pub fn corrupt(data_dir: &Path, part: CorruptPart, rng: &mut Rng) -> io::Result<String> {
    match part {
        CorruptPart::Db => {
            let path = data_dir.join("member/snap/db");
            let file = File::open(&path)?;
            let values = bbolt::bucket_values(&file, b"key")?;
            drop(file);
            if values.is_empty() {
                return Err(io::Error::other(format!(
                    "{} holds no keys to corrupt",
                    path.display()
                )));
            }
            let v = values[rng.below(values.len())];
            let at = v.offset + v.len - 1;
            flip(&path, at)?;
            Ok(format!(
                "flipped the byte at offset {at} of {} (the last of one of its {} values)",
                path.display(),
                values.len()
            ))
        }
        CorruptPart::Wal => {
            let path = wal::newest(&data_dir.join("member/wal"))?;
            let bytes = std::fs::read(&path)?;
            let recs = wal::records(&bytes);
            // Not the first record (it carries the CRC chain's seed), not
            // the last (a damaged last record can pass for a torn write);
            // inside a record's data, so its CRC is what catches it.
            let inner: Vec<(usize, usize, usize)> = recs
                .iter()
                .enumerate()
                .skip(1)
                .take(recs.len().saturating_sub(2))
                .filter_map(|(i, &(start, len))| {
                    let (d, n) = wal::data_range(bytes.get(start..start + len)?)?;
                    Some((i, start + d, n))
                })
                .collect();
            if inner.is_empty() {
                return Err(io::Error::other(format!(
                    "{} has too few records with data to corrupt ({} records)",
                    path.display(),
                    recs.len()
                )));
            }
            let (index, start, len) = inner[rng.below(inner.len())];
            let at = (start + len / 2) as u64;
            flip(&path, at)?;
            Ok(format!(
                "flipped the byte at offset {at} of {} (in record {} of {})",
                path.display(),
                index + 1,
                recs.len()
            ))
        }
    }
}
