//! After the run, the checks over what the clients saw: the history
//! (history.jsonl) read once for the per-second figures, the watch checks
//! and the linearizability check, in that order, since what the watches
//! saw settles writes whose outcome the clients never learned.

use std::path::Path;

use crate::data::RunData;
use crate::lin::{self, History};
use crate::load::ledger::key_name;
use crate::ops::series::Builder;
use crate::ops::{Status, Us, file};
use crate::watch::check::{FinalState, Writes};
use crate::watch::{self, FOREIGN_VALUE, OTHER_KEY, Start, Trace};

/// What the checks need besides the history file.
#[derive(Debug)]
pub struct Input {
    /// When the load started (unix µs): second 0 of the series.
    pub started: Us,
    /// When the checks' picture ends (unix µs).
    pub end: Us,
    /// Every watcher's trace.
    pub traces: Vec<Trace>,
    /// The final read-back: key space and its revision.
    pub finals: Option<(FinalState, i64)>,
    /// The first rebuild from a backup (unix µs; the earlier of the rebuild
    /// the operator reported and the first operation that saw revisions go
    /// back): the checks stop there, operations running then counted as of
    /// unknown outcome.
    pub cut: Option<Us>,
    /// Settings of the linearizability check.
    pub options: lin::Options,
}

/// Runs the checks and stores their results in `data`; a history that
/// cannot be read is an error of the run.
pub fn run(history: &Path, input: Input, data: &mut RunData) {
    let mut h = History::new();
    let mut writes = Writes::default();
    let mut series = Builder::new(input.started);
    let mut invalid: Option<String> = None;
    let read = file::read(history, |mut r| {
        series.add(&r);
        if let Some(cut) = input.cut {
            if r.call > cut {
                return;
            }
            if r.ret > cut && r.status == Status::Ok {
                if !r.op.writes() {
                    return;
                }
                r.status = Status::Unknown;
                r.error = Some("running when the cluster was restored".into());
            }
        }
        // Only writes before the cut: the rebuilt cluster uses the same
        // revisions again for other writes.
        writes.add(&r);
        if invalid.is_none()
            && let Err(e) = h.add(&r)
        {
            invalid = Some(format!("{}: {e}", history.display()));
        }
    });
    data.series = series.finish();
    match read {
        Ok(n) => data.history_ops = n,
        Err(e) => {
            data.errors
                .push(format!("the history cannot be checked: {e}"));
            return;
        }
    }
    if let Some(e) = invalid {
        data.errors
            .push(format!("the history cannot be checked: {e}"));
        return;
    }
    // The watches: up to the final read-back (or, without one or past a
    // restore, as far as each got).
    let finals = if input.cut.is_none() {
        input.finals.as_ref()
    } else {
        None
    };
    let mut traces: Vec<Trace> = input.traces;
    if let Some(cut) = input.cut {
        for t in &mut traces {
            t.events.retain(|e| e.at <= cut);
            t.last = t.events.iter().map(|e| e.rev).max().unwrap_or(0);
        }
    }
    if !traces.is_empty() {
        let mut r = watch::check::Report::default();
        for t in &traces {
            let to = finals.map(|f| f.1).unwrap_or(t.last);
            let (w, p, n) =
                watch::check::check_trace(t, to, input.end, &writes, finals.map(|f| &f.0), &h);
            r.watchers.push(w);
            r.problems.extend(p);
            r.violations += n;
        }
        r.problems.sort_by_key(|p| p.at);
        data.watch = Some(r);
    }
    // What the watches and the read-back saw settles unknown writes; a
    // clean watch from revision 1 to the end saw every change there was.
    for t in &traces {
        for e in &t.events {
            if let (Some(v), true) = (e.value, e.key != OTHER_KEY)
                && v != FOREIGN_VALUE
                && let Some(k) = h.key_number(&key_name(e.key))
            {
                h.observe(k, v, e.rev, e.at);
            }
        }
    }
    if let Some((f, _)) = finals {
        for (key, (v, rev)) in f {
            if let Some(k) = h.key_number(&key_name(*key)) {
                h.observe(k, *v, *rev, input.end);
            }
        }
    }
    let complete = finals.is_some()
        && data.watch.as_ref().is_some_and(|w| {
            w.watchers
                .iter()
                .any(|x| x.start == Start::First && x.range.0 == 1 && x.violations == 0)
        });
    h.patch(complete);
    data.linearizability = Some(lin::check(&h, &input.options));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{Kind, Record};
    use crate::watch::Event;

    fn put(id: u64, key: u32, value: &str, (call, ret): (Us, Us), rev: i64) -> Record {
        let mut r = Record::new("w0", Kind::Put, &key_name(key), call);
        r.id = id;
        r.value = Some(value.into());
        r.ret = ret;
        r.status = Status::Ok;
        r.rev = Some(rev);
        r
    }

    fn event(rev: i64, key: u32, value: &str, at: Us) -> Event {
        Event {
            rev,
            key,
            value: lin::parse_write(value),
            at,
        }
    }

    #[test]
    fn writes_of_a_rebuilt_cluster_reusing_revisions_are_not_held_against_the_watch() {
        // Revisions 2 and 3 before the rebuild (cut at 500 µs); the rebuilt
        // cluster writes other values at 3 again.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("history.jsonl");
        let records = [
            put(0, 1, "w0#1", (100, 110), 2),
            put(1, 2, "w0#2", (200, 210), 3),
            put(2, 3, "w0#3", (600, 610), 3),
        ];
        let text: String = records
            .iter()
            .map(|r| serde_json::to_string(r).expect("json") + "\n")
            .collect();
        std::fs::write(&path, text).expect("write");
        let trace = Trace {
            name: "watch0".into(),
            start: Start::First,
            from: 1,
            last: 3,
            events: vec![event(2, 1, "w0#1", 111), event(3, 2, "w0#2", 211)],
            resumes: Vec::new(),
            errors: Vec::new(),
        };
        let scenario = crate::scenario::parse(
            Path::new("t.yaml"),
            "name: t\nduration: 10s\ncluster: {name: t, size: 3, version: \"3.4.23\"}\n\
             bounds: {recoveryP99: 2s, recoveryMax: 5s, availability: 0.9}\n",
        )
        .expect("parses");
        let mut data = RunData::new(scenario, crate::data::PlatformKind::Local, None);
        let input = Input {
            started: 0,
            end: 1_000,
            traces: vec![trace],
            finals: None,
            cut: Some(500),
            options: lin::Options::default(),
        };
        run(&path, input, &mut data);
        let w = data.watch.expect("watches checked");
        assert_eq!(w.violations, 0, "{:?}", w.problems);
    }
}
