//! `history.jsonl` on disk: a writer the load sessions share (one JSON
//! object per line, buffered, numbered in the order operations complete)
//! and a streaming reader that names the line of anything it cannot parse.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::Record;

/// Why the history cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file cannot be created, written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line is not an operation record.
    #[error("{path}:{line}: not an operation record: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        message: String,
    },
}

#[derive(Debug)]
struct Inner {
    out: Option<BufWriter<File>>,
    next: u64,
    error: Option<String>,
}

/// Appends records to `history.jsonl`; shared by every load session.
#[derive(Debug)]
pub struct Writer {
    path: PathBuf,
    inner: Mutex<Inner>,
}

impl Writer {
    /// Creates (truncates) the file.
    pub fn create(path: &Path) -> Result<Writer, Error> {
        let f = File::create(path).map_err(|source| Error::Io {
            path: path.into(),
            source,
        })?;
        Ok(Writer {
            path: path.into(),
            inner: Mutex::new(Inner {
                out: Some(BufWriter::with_capacity(1 << 16, f)),
                next: 0,
                error: None,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Numbers the record and appends it. The first write error is kept
    /// (see [`Writer::finish`]); later records are dropped.
    pub fn record(&self, r: &mut Record) {
        let mut g = self.lock();
        r.id = g.next;
        g.next += 1;
        if g.error.is_some() {
            return;
        }
        let line = match serde_json::to_string(r) {
            Ok(l) => l,
            Err(e) => {
                g.error = Some(e.to_string());
                return;
            }
        };
        let failed = match g.out.as_mut() {
            Some(out) => out
                .write_all(line.as_bytes())
                .and_then(|()| out.write_all(b"\n"))
                .err(),
            None => None,
        };
        if let Some(e) = failed {
            g.error = Some(e.to_string());
        }
    }

    /// Records written so far.
    pub fn count(&self) -> u64 {
        self.lock().next
    }

    /// Flushes and closes the file; the number of records, or the first
    /// error (a history with a hole cannot be checked).
    pub fn finish(&self) -> Result<u64, String> {
        let mut g = self.lock();
        if let Some(mut out) = g.out.take()
            && let Err(e) = out.flush()
            && g.error.is_none()
        {
            g.error = Some(e.to_string());
        }
        match &g.error {
            Some(e) => Err(format!("{}: {e}", self.path.display())),
            None => Ok(g.next),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// Reads every record of `path` in file order, handing each to `each`.
/// Blank lines are skipped; anything else that is not a record is an error
/// naming the line.
pub fn read(path: &Path, mut each: impl FnMut(Record)) -> Result<u64, Error> {
    let io = |source| Error::Io {
        path: path.into(),
        source,
    };
    let f = File::open(path).map_err(io)?;
    let mut n = 0;
    for (i, line) in BufReader::with_capacity(1 << 16, f).lines().enumerate() {
        let line = line.map_err(io)?;
        if line.trim().is_empty() {
            continue;
        }
        let r: Record = serde_json::from_str(&line).map_err(|e| Error::Parse {
            path: path.into(),
            line: i as u64 + 1,
            message: e.to_string(),
        })?;
        each(r);
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{Found, Kind, Status};

    #[test]
    fn records_round_trip_numbered_and_bad_lines_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("history.jsonl");
        let w = Writer::create(&path).expect("create");
        let mut put = Record::new("w0", Kind::Put, "soak/k000001", 10);
        put.value = Some("w0#1".into());
        put.status = Status::Ok;
        put.rev = Some(5);
        put.ret = 20;
        w.record(&mut put);
        let mut get = Record::new("r0", Kind::Get, "soak/k000001", 25);
        get.status = Status::Ok;
        get.rev = Some(5);
        get.ret = 30;
        get.found = Some(Found {
            value: "w0#1".into(),
            mod_rev: 5,
        });
        w.record(&mut get);
        assert_eq!(w.finish(), Ok(2));
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(
            text.starts_with(
                r#"{"id":0,"client":"w0","op":"put","key":"soak/k000001","value":"w0#1","call":10,"return":20,"status":"ok","rev":5}"#
            ),
            "{text}"
        );
        let mut back = Vec::new();
        assert_eq!(read(&path, |r| back.push(r)).expect("read"), 2);
        assert_eq!(back, vec![put, get]);

        std::fs::write(&path, format!("{text}\n{{\"id\":2,\"client\":\"w0\"}}\n")).expect("w");
        let e = read(&path, |_| {}).expect_err("bad line");
        assert!(
            e.to_string()
                .contains("history.jsonl:4: not an operation record"),
            "{e}"
        );
    }

    fn any_record() -> impl proptest::strategy::Strategy<Value = Record> {
        use proptest::prelude::*;
        let kind = prop_oneof![
            Just(Kind::Get),
            Just(Kind::Put),
            Just(Kind::Cas),
            Just(Kind::Delete)
        ];
        let status = prop_oneof![
            Just(Status::Ok),
            Just(Status::Unknown),
            Just(Status::Failed)
        ];
        (
            (
                any::<u64>(),
                ".{0,8}",
                kind,
                ".{0,16}",
                proptest::option::of(".{0,8}"),
            ),
            (
                proptest::option::of(any::<i64>()),
                any::<u64>(),
                any::<u64>(),
                status,
            ),
            (
                proptest::option::of(any::<i64>()),
                proptest::option::of((".{0,8}", any::<i64>())),
                proptest::option::of(any::<bool>()),
                proptest::option::of(any::<u64>()),
            ),
        )
            .prop_map(|(a, b, c)| Record {
                id: a.0,
                client: a.1,
                op: a.2,
                key: a.3,
                value: a.4,
                expect_mod_rev: b.0,
                call: b.1,
                ret: b.2,
                status: b.3,
                rev: c.0,
                found: c.1.map(|(value, mod_rev)| Found { value, mod_rev }),
                succeeded: c.2,
                deleted: c.3,
                error: None,
            })
    }

    proptest::proptest! {
        /// Whatever a line holds, reading it gives records or an error
        /// naming the line, never a panic.
        #[test]
        fn any_line_is_a_record_or_a_named_error(lines in proptest::collection::vec(".{0,80}", 0..8)) {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("h.jsonl");
            std::fs::write(&path, lines.join("\n")).expect("write");
            match read(&path, |_| {}) {
                Ok(_) => {}
                Err(Error::Parse { line, .. }) => proptest::prop_assert!(line >= 1),
                Err(e) => proptest::prop_assert!(false, "{e}"),
            }
        }

        /// Records round-trip; the checker takes any record, or refuses it
        /// with its id, and never panics.
        #[test]
        fn records_round_trip_and_the_checker_never_panics(records in proptest::collection::vec(any_record(), 0..20)) {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("h.jsonl");
            let w = Writer::create(&path).expect("create");
            let mut written = Vec::new();
            for mut r in records {
                w.record(&mut r);
                written.push(r);
            }
            w.finish().expect("finish");
            let mut back = Vec::new();
            read(&path, |r| back.push(r)).expect("read");
            proptest::prop_assert_eq!(&back, &written);
            let mut h = crate::lin::History::new();
            for r in &back {
                let _ = h.add(r);
            }
            h.patch(true);
            let _ = crate::lin::check(&h, &crate::lin::Options {
                timeout: std::time::Duration::from_secs(5),
                ..crate::lin::Options::default()
            });
        }
    }
}
