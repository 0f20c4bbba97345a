//! Where fault records go: the fault log file (the operator library's
//! format, one JSON line each, read by the soak runner), one human line
//! each on standard error, and a copy in memory for the run's summary.
//!
//! A line may carry one field the library's record does not have,
//! `roleSource` (`etcd` or `status`: where its role came from), last; the
//! library's reader (`faults::read`, which soak uses) ignores it.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use etcd_operator::faults::{FaultRecord, Role};

use crate::roles::RoleSource;

/// The fault log cannot be written. The cause is part of the message and
/// no separate source, so a chain printed in full says it once.
#[derive(Debug, thiserror::Error)]
#[error("fault log {path}: {cause}")]
pub struct Error {
    /// The file.
    pub path: PathBuf,
    /// The cause.
    pub cause: io::Error,
}

/// The records of one run.
pub struct FaultLog {
    out: Option<(PathBuf, Box<dyn Write + Send>)>,
    human: bool,
    records: Vec<FaultRecord>,
    sources: Vec<Option<RoleSource>>,
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
                let refuse = |what: &str| Error {
                    path: p.to_path_buf(),
                    cause: io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{what}, not a regular file: give the path of a file to append to"),
                    ),
                };
                // Never open a FIFO (it blocks until a reader comes) or a
                // device.
                if let Ok(m) = std::fs::metadata(p) {
                    let t = m.file_type();
                    if t.is_dir() {
                        return Err(refuse("a folder"));
                    }
                    if !t.is_file() {
                        return Err(refuse("a FIFO, socket or device"));
                    }
                }
                let file = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|cause| Error {
                        path: p.to_path_buf(),
                        cause,
                    })?;
                Some((p.to_path_buf(), Box::new(file)))
            }
        };
        Ok(FaultLog {
            out,
            human: true,
            records: Vec::new(),
            sources: Vec::new(),
        })
    }

    /// Records kept in memory only, without the human lines (for tests and
    /// library users that read [`FaultLog::records`]).
    pub fn in_memory() -> FaultLog {
        FaultLog {
            out: None,
            human: false,
            records: Vec::new(),
            sources: Vec::new(),
        }
    }

    /// Writes one record whose role has no known source.
    pub fn write(&mut self, record: FaultRecord) -> Result<(), Error> {
        self.write_sourced(record, None)
    }

    /// Writes one record (flushed at once, so a reader sees it now), with
    /// where its role came from.
    pub fn write_sourced(
        &mut self,
        record: FaultRecord,
        role_source: Option<RoleSource>,
    ) -> Result<(), Error> {
        self.write_detailed(record, role_source, None)
    }

    /// Writes one record with what exactly was done (`detail`, a field of
    /// the monkey's own like `roleSource`).
    pub fn write_detailed(
        &mut self,
        record: FaultRecord,
        role_source: Option<RoleSource>,
        detail: Option<&str>,
    ) -> Result<(), Error> {
        if self.human {
            match detail {
                Some(d) => eprintln!("{} ({d})", human_sourced(&record, role_source)),
                None => eprintln!("{}", human_sourced(&record, role_source)),
            }
        }
        if let Some((path, out)) = &mut self.out {
            append(out, &record, role_source, detail).map_err(|cause| Error {
                path: path.clone(),
                cause,
            })?;
        }
        self.records.push(record);
        self.sources.push(role_source);
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

    /// Where the role of each record came from, in the order of
    /// [`FaultLog::records`].
    pub fn role_sources(&self) -> &[Option<RoleSource>] {
        &self.sources
    }

    /// Faults written so far (resumes and heals do not count).
    pub fn faults(&self) -> usize {
        self.records.iter().filter(|r| !r.fault.is_end()).count()
    }
}

/// The record as a JSON line in the library's format, `roleSource` last
/// when known.
pub fn json_line(record: &FaultRecord, role_source: Option<RoleSource>) -> io::Result<String> {
    json_line_detailed(record, role_source, None)
}

/// The same, with `detail` after `roleSource` when given.
pub fn json_line_detailed(
    record: &FaultRecord,
    role_source: Option<RoleSource>,
    detail: Option<&str>,
) -> io::Result<String> {
    let mut line = serde_json::to_string(record).map_err(io::Error::other)?;
    let mut extra = |key: &str, value: &str| -> io::Result<()> {
        if line.ends_with('}') {
            line.pop();
            line.push_str(&format!(",\"{key}\":"));
            line.push_str(&serde_json::to_string(value).map_err(io::Error::other)?);
            line.push('}');
        }
        Ok(())
    };
    if let Some(source) = role_source {
        extra("roleSource", source.as_str())?;
    }
    if let Some(d) = detail {
        extra("detail", d)?;
    }
    Ok(line)
}

fn append(
    out: &mut impl Write,
    record: &FaultRecord,
    role_source: Option<RoleSource>,
    detail: Option<&str>,
) -> io::Result<()> {
    let mut line = json_line_detailed(record, role_source, detail)?;
    line.push('\n');
    out.write_all(line.as_bytes())?;
    out.flush()
}

/// `chaos-monkey: kill demo/demo-1 (leader): injected`
pub fn human(r: &FaultRecord) -> String {
    human_sourced(r, None)
}

/// The same, saying where the role came from when it was not etcd:
/// `chaos-monkey: kill demo/demo-1 (leader, from EtcdCluster status): injected`
pub fn human_sourced(r: &FaultRecord, role_source: Option<RoleSource>) -> String {
    let what = r.fault.as_str();
    let role = match (r.role, role_source) {
        (Role::Unknown, _) => "role unknown".to_string(),
        (other, Some(RoleSource::Status)) => {
            format!("{}, from EtcdCluster status", role_name(other))
        }
        (other, _) => role_name(other).to_string(),
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
    use etcd_operator::faults::{self, Fault};

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
    fn the_role_source_is_one_more_field_the_library_reads_past() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("faults.jsonl");
        let mut log = FaultLog::open(Some(&path)).expect("open");
        let status = FaultRecord::now(Fault::Kill, "a", "a-1", Role::Leader, "injected");
        let etcd = FaultRecord::now(Fault::Kill, "a", "a-2", Role::Follower, "injected");
        let unknown = FaultRecord::now(Fault::Kill, "a", "a-0", Role::Unknown, "injected");
        log.write_sourced(status.clone(), Some(RoleSource::Status))
            .expect("write");
        log.write_sourced(etcd.clone(), Some(RoleSource::Etcd))
            .expect("write");
        log.write(unknown.clone()).expect("write");
        let text = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<&str> = text.lines().collect();
        let plain = |r: &FaultRecord| serde_json::to_string(r).expect("json");
        let status_plain = plain(&status);
        let want = format!(
            "{},\"roleSource\":\"status\"}}",
            status_plain.trim_end_matches('}')
        );
        assert_eq!(lines[0], want);
        assert!(
            lines[1].ends_with(",\"roleSource\":\"etcd\"}"),
            "{}",
            lines[1]
        );
        assert_eq!(lines[2], plain(&unknown));
        // Every line is one JSON object, and the library reads them all.
        for l in &lines {
            let v: serde_json::Value = serde_json::from_str(l).expect("json line");
            assert!(v.is_object());
        }
        assert_eq!(faults::read(&path).expect("read"), [status, etcd, unknown]);
        assert_eq!(
            log.role_sources(),
            [Some(RoleSource::Status), Some(RoleSource::Etcd), None]
        );
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
        assert_eq!(
            human_sourced(&r, Some(RoleSource::Status)),
            "chaos-monkey: kill demo/demo-1 (leader, from EtcdCluster status): injected"
        );
        assert_eq!(
            human_sourced(&r, Some(RoleSource::Etcd)),
            "chaos-monkey: kill demo/demo-1 (leader): injected"
        );
    }

    #[test]
    fn unwritable_path_is_an_error_naming_it() {
        let e = FaultLog::open(Some(Path::new("/nonexistent-dir/x.jsonl"))).expect_err("fails");
        assert!(e.to_string().contains("/nonexistent-dir/x.jsonl"), "{e}");
        // Said once, also when the error is printed with its chain.
        let chain = format!("{:#}", anyhow::Error::from(e));
        assert_eq!(chain.matches("No such file").count(), 1, "{chain}");
    }

    #[test]
    fn a_folder_or_a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = FaultLog::open(Some(dir.path())).expect_err("a folder");
        assert!(
            e.to_string().contains("a folder, not a regular file"),
            "{e}"
        );
        let fifo = dir.path().join("fifo");
        etcd_operator::testing::files::mkfifo(&fifo);
        let e = FaultLog::open(Some(&fifo)).expect_err("a FIFO");
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
}
