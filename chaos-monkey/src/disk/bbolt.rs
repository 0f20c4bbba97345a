//! Just enough of bbolt's file format (etcd's backend, `member/snap/db`)
//! to find the live values of etcd's `key` bucket, so `--fault corrupt`
//! can damage data that counts rather than a free page.
//!
//! A page starts with a header (id u64, flags u16, count u16, overflow
//! u32); two meta pages (0 and 1, the newer by txid wins) name the root
//! bucket's page; branch elements are (pos u32, ksize u32, pgid u64), leaf
//! elements (flags u32, pos u32, ksize u32, vsize u32), each key at
//! element + pos with its value right after; a sub-bucket's value is (root
//! pgid u64, sequence u64), followed by an inline page when root is 0.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

const MAGIC: u32 = 0xED0C_DAED;
const HEADER: u64 = 16;
const ELEMENT: u64 = 16;
const BRANCH: u16 = 0x01;
const LEAF: u16 = 0x02;
const BUCKET_LEAF: u32 = 0x01;
/// Deepest page tree walked (bbolt trees are shallow; this bounds a loop
/// in a damaged file).
const MAX_DEPTH: usize = 16;

fn bad(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

fn u16_at(b: &[u8], at: usize) -> io::Result<u16> {
    b.get(at..at + 2)
        .and_then(|s| s.try_into().ok())
        .map(u16::from_le_bytes)
        .ok_or_else(|| bad("short page"))
}
fn u32_at(b: &[u8], at: usize) -> io::Result<u32> {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| bad("short page"))
}
fn u64_at(b: &[u8], at: usize) -> io::Result<u64> {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| bad("short page"))
}

/// A value in the file: where it starts and how long it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Value {
    /// Offset of its first byte in the file.
    pub offset: u64,
    /// Its length.
    pub len: u64,
}

struct Db<'a> {
    file: &'a File,
    page_size: u64,
}

impl Db<'_> {
    /// The bytes of page `id` (with its overflow pages).
    fn page(&self, id: u64) -> io::Result<(u64, Vec<u8>)> {
        let at = id
            .checked_mul(self.page_size)
            .ok_or_else(|| bad("page id out of range"))?;
        let mut head = vec![0u8; HEADER as usize];
        self.file.read_exact_at(&mut head, at)?;
        let overflow = u64::from(u32_at(&head, 12)?);
        let len = (overflow + 1)
            .checked_mul(self.page_size)
            .filter(|l| *l <= 1 << 32)
            .ok_or_else(|| bad("page overflow out of range"))?;
        let mut buf = vec![0u8; usize::try_from(len).map_err(|_| bad("page too large"))?];
        self.file.read_exact_at(&mut buf, at)?;
        Ok((at, buf))
    }

    /// Leaf values of the tree rooted at page `root`, or of the inline page
    /// `inline` (its bytes and file offset).
    fn values(&self, page: (u64, Vec<u8>), depth: usize, out: &mut Vec<Value>) -> io::Result<()> {
        if depth > MAX_DEPTH {
            return Err(bad("page tree too deep"));
        }
        let (at, buf) = page;
        let flags = u16_at(&buf, 8)?;
        let count = u64::from(u16_at(&buf, 10)?);
        for i in 0..count {
            let e = usize::try_from(HEADER + i * ELEMENT).map_err(|_| bad("element"))?;
            if flags & BRANCH != 0 {
                let child = u64_at(&buf, e + 8)?;
                self.values(self.page(child)?, depth + 1, out)?;
            } else if flags & LEAF != 0 {
                let eflags = u32_at(&buf, e)?;
                let pos = u64::from(u32_at(&buf, e + 4)?);
                let ksize = u64::from(u32_at(&buf, e + 8)?);
                let vsize = u64::from(u32_at(&buf, e + 12)?);
                let voff = e as u64 + pos + ksize;
                if voff + vsize > buf.len() as u64 {
                    return Err(bad("element out of its page"));
                }
                if eflags & BUCKET_LEAF == 0 && vsize > 0 {
                    out.push(Value {
                        offset: at + voff,
                        len: vsize,
                    });
                }
            } else {
                return Err(bad(format!("page at {at} is neither branch nor leaf")));
            }
        }
        Ok(())
    }

    /// The page (or inline page) holding bucket `name` of the root bucket.
    fn bucket(&self, root: u64, name: &[u8]) -> io::Result<Option<(u64, Vec<u8>)>> {
        let mut pages = vec![(self.page(root)?, 0usize)];
        while let Some(((at, buf), depth)) = pages.pop() {
            if depth > MAX_DEPTH {
                return Err(bad("page tree too deep"));
            }
            let flags = u16_at(&buf, 8)?;
            let count = u64::from(u16_at(&buf, 10)?);
            for i in 0..count {
                let e = usize::try_from(HEADER + i * ELEMENT).map_err(|_| bad("element"))?;
                if flags & BRANCH != 0 {
                    pages.push((self.page(u64_at(&buf, e + 8)?)?, depth + 1));
                    continue;
                }
                let pos = usize::try_from(u32_at(&buf, e + 4)?).map_err(|_| bad("pos"))?;
                let ksize = usize::try_from(u32_at(&buf, e + 8)?).map_err(|_| bad("ksize"))?;
                let vsize = usize::try_from(u32_at(&buf, e + 12)?).map_err(|_| bad("vsize"))?;
                let k = e + pos;
                let key = buf
                    .get(k..k + ksize)
                    .ok_or_else(|| bad("key out of page"))?;
                if u32_at(&buf, e)? & BUCKET_LEAF == 0 || key != name {
                    continue;
                }
                let v = k + ksize;
                let value = buf
                    .get(v..v + vsize)
                    .ok_or_else(|| bad("value out of page"))?;
                let broot = u64_at(value, 0)?;
                if broot != 0 {
                    return self.page(broot).map(Some);
                }
                let inline = value
                    .get(16..)
                    .ok_or_else(|| bad("inline bucket"))?
                    .to_vec();
                return Ok(Some((at + v as u64 + 16, inline)));
            }
        }
        Ok(None)
    }
}

/// Every live value of bucket `bucket` (etcd's keys live in `key`).
pub fn bucket_values(file: &File, bucket: &[u8]) -> io::Result<Vec<Value>> {
    let mut meta = [0u8; 64];
    file.read_exact_at(&mut meta, 0)?;
    if u32_at(&meta, 16)? != MAGIC {
        return Err(bad("not a bbolt database (bad magic)"));
    }
    let page_size = u64::from(u32_at(&meta, 24)?);
    if !(512..=1 << 20).contains(&page_size) {
        return Err(bad("implausible page size"));
    }
    let mut best: Option<(u64, u64)> = None;
    for id in 0..2u64 {
        let mut m = [0u8; 80];
        file.read_exact_at(&mut m, id * page_size)?;
        if u32_at(&m, 16)? != MAGIC {
            continue;
        }
        let root = u64_at(&m, 32)?;
        let txid = u64_at(&m, 64)?;
        if best.is_none_or(|(_, t)| txid > t) {
            best = Some((root, txid));
        }
    }
    let (root, _) = best.ok_or_else(|| bad("no valid meta page"))?;
    let db = Db { file, page_size };
    let mut out = Vec::new();
    if let Some(page) = db.bucket(root, bucket)? {
        db.values(page, 0, &mut out)?;
    }
    Ok(out)
}
