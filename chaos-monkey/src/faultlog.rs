//! Where fault records go: the fault log file (the operator library's
//! format, one JSON line each, read by the soak runner), one human line
//! each on standard error, and a copy in memory for the run's summary.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use etcd_operator::faults::{self, Fault, FaultRecord, Role};

/// The fault log cannot be written.
#[derive(Debug, thiserror::Error)]
#[error("fault log {path}: {source}")]
pub struct Error {
    /// The file.
    pub path: PathBuf,
    /// The cause.
    pub source: io::Error,
}

/// The records of one run.
pub struct FaultLog {
    out: Option<(PathBuf, Box<dyn Write + Send>)>,
    human: bool,
    records: Vec<FaultRecord>,
}

impl std::fmt::Debug for FaultLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultLog")
            .field("path", &self.out.as_ref().map(|(p, _)| p))
            .field("records", &self.records.len())
            .finish()
    }
}

impl FaultLog {
    /// Appends to `path` (`-` is standard output); `None` keeps records in
    /// memory and on standard error only.
    pub fn open(path: Option<&Path>) -> Result<FaultLog, Error> {
        let out: Option<(PathBuf, Box<dyn Write + Send>)> = match path {
            None => None,
            Some(p) if p == Path::new("-") => Some((p.to_path_buf(), Box::new(io::stdout()))),
            Some(p) => {
                let file = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|source| Error {
                        path: p.to_path_buf(),
                        source,
                    })?;
                Some((p.to_path_buf(), Box::new(file)))
            }
        };
        Ok(FaultLog {
            out,
            human: true,
            records: Vec::new(),
        })
    }

    /// Records kept in memory only, without the human lines (for tests and
    /// library users that read [`FaultLog::records`]).
    pub fn in_memory() -> FaultLog {
        FaultLog {
            out: None,
            human: false,
            records: Vec::new(),
        }
    }

    /// Writes one record (flushed at once, so a reader sees it now).
    pub fn write(&mut self, record: FaultRecord) -> Result<(), Error> {
        if self.human {
            eprintln!("{}", human(&record));
        }
        if let Some((path, out)) = &mut self.out {
            faults::append(out, &record).map_err(|source| Error {
                path: path.clone(),
                source,
            })?;
        }
        self.records.push(record);
        Ok(())
    }

    /// Prints a human line on standard error (unless kept in memory only).
    pub fn announce(&self, line: &str) {
        if self.human {
            eprintln!("chaos-monkey: {line}");
        }
    }

    /// Every record written so far.
    pub fn records(&self) -> &[FaultRecord] {
        &self.records
    }

    /// Faults written so far (resumes do not count).
    pub fn faults(&self) -> usize {
        self.records
            .iter()
            .filter(|r| r.fault != Fault::Resume)
            .count()
    }
}

/// `chaos-monkey: kill demo/demo-1 (leader): injected`
pub fn human(r: &FaultRecord) -> String {
    let what = match r.fault {
        Fault::Kill => "kill",
        Fault::Destroy => "destroy",
        Fault::Pause => "pause",
        Fault::Resume => "resume",
    };
    let role = match r.role {
        Role::Unknown => "role unknown",
        other => role_name(other),
    };
    let whom = if r.cluster.is_empty() {
        r.member.clone()
    } else {
        format!("{}/{} ({role})", r.cluster, r.member)
    };
    format!("chaos-monkey: {what} {whom}: {}", r.outcome)
}

/// A role as the fault log writes it.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::Leader => "leader",
        Role::Follower => "follower",
        Role::Learner => "learner",
        Role::Unknown => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_gets_json_lines_in_the_library_format() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("faults.jsonl");
        let mut log = FaultLog::open(Some(&path)).expect("open");
        log.write(FaultRecord::now(
            Fault::Pause,
            "demo",
            "demo-1",
            Role::Leader,
            "injected",
        ))
        .expect("write");
        log.write(FaultRecord::now(
            Fault::Resume,
            "demo",
            "demo-1",
            Role::Leader,
            "injected",
        ))
        .expect("write");
        let back = faults::read(&path).expect("read");
        assert_eq!(back, log.records());
        assert_eq!(log.faults(), 1);
        // Appends: a second run adds to the same file.
        let mut again = FaultLog::open(Some(&path)).expect("reopen");
        again
            .write(FaultRecord::now(
                Fault::Kill,
                "demo",
                "demo-2",
                Role::Follower,
                "dry-run",
            ))
            .expect("write");
        assert_eq!(faults::read(&path).expect("read").len(), 3);
    }

    #[test]
    fn human_lines() {
        let r = FaultRecord::now(Fault::Kill, "demo", "demo-1", Role::Leader, "injected");
        assert_eq!(
            human(&r),
            "chaos-monkey: kill demo/demo-1 (leader): injected"
        );
        let op = FaultRecord::now(Fault::Kill, "", "etcd-operator", Role::Unknown, "dry-run");
        assert_eq!(human(&op), "chaos-monkey: kill etcd-operator: dry-run");
    }

    #[test]
    fn unwritable_path_is_an_error_naming_it() {
        let e = FaultLog::open(Some(Path::new("/nonexistent-dir/x.jsonl"))).expect_err("fails");
        assert!(e.to_string().contains("/nonexistent-dir/x.jsonl"), "{e}");
    }
}
