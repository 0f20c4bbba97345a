//! The CSV files: events, probes, checkpoints, seconds.

use crate::history::{Checkpoint, Ms, Sample, rfc3339};
use crate::invariants::health::{Health, assess};

use super::Derived;

fn finish(w: csv::Writer<Vec<u8>>) -> String {
    w.into_inner()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// events.csv: every fault injection, every recovery, every runner note.
pub fn events(d: &Derived, notes: &[(Ms, String)]) -> String {
    let mut rows: Vec<(Ms, [String; 7])> = Vec::new();
    for e in &d.events {
        rows.push((
            e.at,
            [
                "fault".into(),
                e.fault.clone(),
                e.members.join(" "),
                e.roles.join(" "),
                e.outcome.clone(),
                String::new(),
                String::new(),
            ],
        ));
    }
    for r in &d.recoveries {
        let (at, ms, what) = match (r.recovered_at, r.millis()) {
            (Some(at), Some(ms)) => (at, ms.to_string(), "recovered"),
            _ => (r.event.at, String::new(), "not-recovered"),
        };
        rows.push((
            at,
            [
                what.into(),
                r.event.fault.clone(),
                r.event.members.join(" "),
                r.event.roles.join(" "),
                r.event.outcome.clone(),
                ms,
                rfc3339(r.event.at),
            ],
        ));
    }
    for (at, n) in notes {
        rows.push((
            *at,
            [
                "note".into(),
                String::new(),
                String::new(),
                String::new(),
                n.clone(),
                String::new(),
                String::new(),
            ],
        ));
    }
    rows.sort_by_key(|r| r.0);
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record([
        "time",
        "unix_ms",
        "event",
        "fault",
        "members",
        "roles",
        "outcome",
        "recovery_ms",
        "fault_time",
    ]);
    for (at, r) in rows {
        let mut rec = vec![rfc3339(at), at.to_string()];
        rec.extend(r);
        let _ = w.write_record(&rec);
    }
    finish(w)
}

/// probes.csv: one row per probe tick.
pub fn probes(samples: &[Sample]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record([
        "time",
        "unix_ms",
        "phase",
        "healthy",
        "reason",
        "write_ok",
        "write_ms",
        "read_ok",
        "answering",
        "expected",
        "listed_voting",
        "learners",
        "leader",
        "max_term",
        "max_revision",
        "operator_phase",
        "operator_ready",
        "backup_time",
    ]);
    for s in samples {
        let reason = match assess(s) {
            Health::Healthy => String::new(),
            Health::Unhealthy(r) => r,
        };
        let listed = s.listed.as_ref();
        let leaders: std::collections::BTreeSet<String> = s
            .views
            .iter()
            .filter(|v| v.leader != 0)
            .map(|v| format!("{:x}", v.leader))
            .collect();
        let p = s.published.as_ref();
        let _ = w.write_record([
            rfc3339(s.at),
            s.at.to_string(),
            format!("{:?}", s.phase).to_lowercase(),
            reason.is_empty().to_string(),
            reason,
            s.write_ok.to_string(),
            s.write_ms.map(|m| m.to_string()).unwrap_or_default(),
            s.read_ok.to_string(),
            s.views.len().to_string(),
            s.expected.to_string(),
            listed
                .map(|l| l.iter().filter(|m| !m.learner).count().to_string())
                .unwrap_or_default(),
            listed
                .map(|l| l.iter().filter(|m| m.learner).count().to_string())
                .unwrap_or_default(),
            leaders.into_iter().collect::<Vec<_>>().join(" "),
            s.views
                .iter()
                .map(|v| v.term)
                .max()
                .map(|t| t.to_string())
                .unwrap_or_default(),
            s.views
                .iter()
                .map(|v| v.revision)
                .max()
                .map(|t| t.to_string())
                .unwrap_or_default(),
            p.map(|p| p.phase.clone()).unwrap_or_default(),
            p.map(|p| p.ready.to_string()).unwrap_or_default(),
            p.and_then(|p| p.backup_time)
                .map(rfc3339)
                .unwrap_or_default(),
        ]);
    }
    finish(w)
}

/// checkpoints.csv: one row per KV hash checkpoint.
pub fn checkpoints(cps: &[Checkpoint]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record(["time", "unix_ms", "revision", "final", "equal", "hashes"]);
    for c in cps {
        let ok: Vec<u32> = c
            .hashes
            .iter()
            .filter_map(|(_, h)| h.as_ref().ok().map(|x| x.0))
            .collect();
        let equal = ok.windows(2).all(|w| w[0] == w[1]) && ok.len() == c.hashes.len();
        let hashes: Vec<String> = c
            .hashes
            .iter()
            .map(|(u, h)| match h {
                Ok((hash, compact)) => format!("{u}={hash:08x}@{compact}"),
                Err(e) => format!("{u}=error: {e}"),
            })
            .collect();
        let _ = w.write_record([
            rfc3339(c.at),
            c.at.to_string(),
            c.revision.to_string(),
            c.final_check.to_string(),
            equal.to_string(),
            hashes.join(" "),
        ]);
    }
    finish(w)
}

/// seconds.csv: client operations per second.
pub fn seconds(series: &[crate::ops::series::Second]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record(["second", "answered", "failed", "p50_ms", "p99_ms"]);
    for s in series {
        let _ = w.write_record([
            s.t.to_string(),
            s.ok.to_string(),
            s.failed.to_string(),
            format!("{:.3}", s.p50_ms),
            format!("{:.3}", s.p99_ms),
        ]);
    }
    finish(w)
}
