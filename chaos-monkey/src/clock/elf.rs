//! Finds a function in a vDSO image: its ELF section headers, the dynamic
//! symbol table (`SHT_DYNSYM`) and its string table. Pure: bytes in, an
//! offset and a size out; any malformed image is an error, never a panic.

/// Why a vDSO image could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Not a 64-bit little-endian ELF image.
    #[error("not a 64-bit little-endian ELF image")]
    NotElf,
    /// A header or table points outside the image.
    #[error("the ELF {0} points outside the image")]
    OutOfBounds(&'static str),
    /// No dynamic symbol table.
    #[error("no dynamic symbol table")]
    NoDynsym,
    /// None of the names is defined.
    #[error("no symbol named {0}")]
    NoSymbol(String),
}

/// A function in the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Symbol {
    /// Its offset from the image's start.
    pub offset: u64,
    /// Its size in bytes.
    pub size: u64,
}

const SHT_DYNSYM: u32 = 11;
const SYM_SIZE: usize = 24;

fn bytes<const N: usize>(img: &[u8], at: usize, what: &'static str) -> Result<[u8; N], Error> {
    img.get(at..at.checked_add(N).ok_or(Error::OutOfBounds(what))?)
        .and_then(|s| s.try_into().ok())
        .ok_or(Error::OutOfBounds(what))
}

fn u16_at(img: &[u8], at: usize, what: &'static str) -> Result<usize, Error> {
    Ok(usize::from(u16::from_le_bytes(bytes(img, at, what)?)))
}

fn u32_at(img: &[u8], at: usize, what: &'static str) -> Result<u32, Error> {
    Ok(u32::from_le_bytes(bytes(img, at, what)?))
}

fn u64_at(img: &[u8], at: usize, what: &'static str) -> Result<usize, Error> {
    usize::try_from(u64::from_le_bytes(bytes(img, at, what)?)).map_err(|_| Error::OutOfBounds(what))
}

struct Section {
    kind: u32,
    link: usize,
    offset: usize,
    size: usize,
}

fn section(img: &[u8], shoff: usize, entsize: usize, i: usize) -> Result<Section, Error> {
    let at = i
        .checked_mul(entsize)
        .and_then(|o| o.checked_add(shoff))
        .ok_or(Error::OutOfBounds("section header"))?;
    Ok(Section {
        kind: u32_at(img, at + 4, "section header")?,
        offset: u64_at(img, at + 24, "section header")?,
        size: u64_at(img, at + 32, "section header")?,
        link: usize::try_from(u32_at(img, at + 40, "section header")?)
            .map_err(|_| Error::OutOfBounds("section header"))?,
    })
}

/// The first of `names` defined in the image (a function with a size).
pub fn find(img: &[u8], names: &[&str]) -> Result<Symbol, Error> {
    if img.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return Err(Error::NotElf);
    }
    let shoff = u64_at(img, 0x28, "section header offset")?;
    let entsize = u16_at(img, 0x3a, "section header size")?;
    let count = u16_at(img, 0x3c, "section count")?;
    if entsize < 64 {
        return Err(Error::OutOfBounds("section header size"));
    }
    let mut dynsym = None;
    for i in 0..count {
        let s = section(img, shoff, entsize, i)?;
        if s.kind == SHT_DYNSYM {
            dynsym = Some(s);
            break;
        }
    }
    let dynsym = dynsym.ok_or(Error::NoDynsym)?;
    let strtab = section(img, shoff, entsize, dynsym.link)?;
    let strings = img
        .get(strtab.offset..strtab.offset.saturating_add(strtab.size))
        .ok_or(Error::OutOfBounds("string table"))?;
    let mut found: Vec<(usize, Symbol)> = Vec::new();
    for i in 0..dynsym.size / SYM_SIZE {
        let at = dynsym.offset.saturating_add(i * SYM_SIZE);
        let name_at = usize::try_from(u32_at(img, at, "symbol")?)
            .map_err(|_| Error::OutOfBounds("symbol"))?;
        let value = u64::from_le_bytes(bytes(img, at + 8, "symbol")?);
        let size = u64::from_le_bytes(bytes(img, at + 16, "symbol")?);
        let Some(rest) = strings.get(name_at..) else {
            return Err(Error::OutOfBounds("symbol name"));
        };
        let name = rest.split(|&b| b == 0).next().unwrap_or_default();
        if let Some(rank) = names.iter().position(|n| n.as_bytes() == name)
            && value != 0
            && size != 0
        {
            let end = value.checked_add(size);
            if end.is_none_or(|e| e > img.len() as u64) {
                return Err(Error::OutOfBounds("symbol"));
            }
            found.push((
                rank,
                Symbol {
                    offset: value,
                    size,
                },
            ));
        }
    }
    found
        .into_iter()
        .min_by_key(|(rank, _)| *rank)
        .map(|(_, s)| s)
        .ok_or_else(|| Error::NoSymbol(names.join(" or ")))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// This process's own vDSO, as the kernel maps it.
    fn own_vdso() -> Vec<u8> {
        let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
        let (start, end) = super::super::vdso_range(&maps).expect("a [vdso] line");
        let mem = std::fs::File::open("/proc/self/mem").expect("mem");
        let mut img = vec![0; usize::try_from(end - start).expect("size")];
        std::os::unix::fs::FileExt::read_exact_at(&mem, &mut img, start).expect("read");
        img
    }

    #[test]
    fn finds_clock_gettime_in_the_running_kernels_vdso() {
        let img = own_vdso();
        let s = find(&img, &["__vdso_clock_gettime", "clock_gettime"]).expect("found");
        assert!(s.size >= 64, "{s:?}");
        assert!(s.offset + s.size <= img.len() as u64);
        assert_eq!(
            find(&img, &["no_such_symbol"]),
            Err(Error::NoSymbol("no_such_symbol".into()))
        );
    }

    #[test]
    fn refuses_what_is_not_elf() {
        assert_eq!(find(b"", &["x"]), Err(Error::NotElf));
        assert_eq!(find(b"\x7fELF\x01\x01", &["x"]), Err(Error::NotElf));
        let mut img = own_vdso();
        img.truncate(0x40);
        assert!(find(&img, &["clock_gettime"]).is_err());
    }

    proptest! {
        #[test]
        fn damaged_images_are_errors_not_panics(
            at in 0usize..8192, byte in any::<u8>(), cut in 0usize..8192,
        ) {
            let mut img = own_vdso();
            if let Some(b) = img.get_mut(at) {
                *b = byte;
            }
            img.truncate(cut.max(1));
            let _ = find(&img, &["__vdso_clock_gettime", "clock_gettime"]);
        }

        #[test]
        fn random_bytes_are_errors_not_panics(
            mut img in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            if img.len() >= 6 {
                img[..6].copy_from_slice(b"\x7fELF\x02\x01");
            }
            let _ = find(&img, &["clock_gettime"]);
        }
    }
}
