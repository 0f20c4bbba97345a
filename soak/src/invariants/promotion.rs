//! The primary lost and its standby promoted (`standby.losePrimaryAt`):
//! what the promotion kept and what it lost. The promoted cluster reports
//! R, the last of the primary's revisions it applied
//! (`status.standby.appliedRevision`), and holds the primary's history up
//! to R under the same revisions. So, of the writes the primary
//! acknowledged before it was lost:
//!
//! * every one at a revision <= R must be on the promoted cluster: each
//!   key, read there at revision R, holds the newest write acknowledged on
//!   it at or below R (or a later change, up to R, by a write whose answer
//!   never came). One missing is a violation, whatever the bounds;
//! * every one past R is lost by the promotion: counted (with its
//!   revisions and keys) and bounded by `bounds.lostOnPromotion`, a number
//!   or `lastSegment`: what the primary acknowledged in the last segment
//!   interval before the loss, counted here from the history.
//!
//! Pure: the run's history, R, the read at R and the times in; figures and
//! violations out.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::{Check, Violation};
use crate::history::Ms;
use crate::ops::{Kind, Record, Status, Us};
use crate::scenario::LostOnPromotion;

/// What the runner recorded of the primary's loss and the promotion.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Promotion {
    /// The promoted cluster (the standby).
    pub cluster: String,
    /// When the primary's members were killed (unix ms).
    pub lost_at: Ms,
    /// How many were.
    pub members_killed: usize,
    /// When the standby was first seen `Promoted` (unix ms; `None`: not
    /// within the runner's wait).
    pub promoted_at: Option<Ms>,
    /// R: `status.standby.appliedRevision` once promoted.
    pub revision: i64,
    /// `status.standby.message` once promoted.
    pub message: Option<String>,
    /// When the promoted cluster first acknowledged a write (the runner's
    /// own put, unix ms).
    pub first_write_at: Option<Ms>,
    /// When the load, the probes and the watchers moved to it (unix ms).
    pub moved_at: Option<Ms>,
    /// What went wrong along the way.
    pub problems: Vec<String>,
    /// The keys of the load on the promoted cluster at R (`None`: not
    /// read); kept for [`account`], not reported.
    #[serde(skip)]
    pub at_r: Option<AtR>,
    /// What the promotion kept and lost, from the history after the run.
    pub accounting: Option<Accounting>,
    /// The history from the move on, checked against the promoted cluster
    /// alone (from its keys at R).
    pub linearizability: Option<crate::lin::Report>,
}

impl Promotion {
    /// Loss to promoted, ms.
    pub fn to_promoted_ms(&self) -> Option<u64> {
        self.promoted_at.map(|p| p.saturating_sub(self.lost_at))
    }

    /// Loss to the first write accepted, ms.
    pub fn to_first_write_ms(&self) -> Option<u64> {
        self.first_write_at.map(|p| p.saturating_sub(self.lost_at))
    }
}

/// A write the primary acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckedWrite {
    /// The key.
    pub key: String,
    /// The write's name (`w3#45`); `None` for a delete.
    pub value: Option<String>,
    /// Its revision.
    pub rev: i64,
    /// When its answer came (unix µs).
    pub ret: Us,
}

impl AckedWrite {
    /// The acknowledged change `r` made, if it made one: a put answered,
    /// a compare-and-set that swapped, a delete that deleted.
    pub fn of(r: &Record) -> Option<AckedWrite> {
        if r.status != Status::Ok {
            return None;
        }
        let value = match r.op {
            Kind::Put => Some(r.value.clone()?),
            Kind::Cas if r.succeeded == Some(true) => Some(r.value.clone()?),
            Kind::Delete if r.deleted.unwrap_or(0) > 0 => None,
            _ => return None,
        };
        Some(AckedWrite {
            key: r.key.clone(),
            value,
            rev: r.rev?,
            ret: r.ret,
        })
    }
}

/// The keys of the load on the promoted cluster at R: key -> the write
/// that wrote it (`w3#45`, or what the value was) and its mod revision.
pub type AtR = BTreeMap<String, (String, i64)>;

/// One write acknowledged at or below R that the promoted cluster lacks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Missing {
    /// The key.
    pub key: String,
    /// The write (`delete` for a delete).
    pub write: String,
    /// Its revision.
    pub rev: i64,
    /// What the promoted cluster holds at R instead.
    pub found: String,
}

/// Most writes listed in full (the rest are counted).
pub const LISTED: usize = 20;

/// What the promotion kept and lost.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Accounting {
    /// R: the primary's last revision the promoted cluster applied.
    pub revision: i64,
    /// Writes the primary acknowledged before the loss.
    pub acked: usize,
    /// Of those, at or below R.
    pub kept: usize,
    /// Writes at or below R the promoted cluster lacks (each a violation).
    pub missing: Vec<Missing>,
    /// Writes past R: lost by the promotion.
    pub lost: usize,
    /// Keys those were on.
    pub lost_keys: usize,
    /// Their lowest and highest revision.
    pub lost_revisions: Option<(i64, i64)>,
    /// The first [`LISTED`] of them: revision, key, write.
    pub lost_listed: Vec<(i64, String, String)>,
    /// Writes the primary acknowledged in the last segment interval before
    /// the loss (`None`: no continuous backups).
    pub last_segment: Option<usize>,
}

/// Accounts for `writes` (acknowledged by the primary, before the loss at
/// `loss`) against R and the keys at R; `uncertain_deletes` are keys a
/// delete was sent to whose answer never came (one may be absent for it);
/// `segment` is the primary's segment interval (µs).
pub fn account(
    writes: &[AckedWrite],
    revision: i64,
    at_r: &AtR,
    uncertain_deletes: &BTreeSet<String>,
    (loss, segment): (Us, Option<Us>),
) -> Accounting {
    let mut out = Accounting {
        revision,
        acked: writes.len(),
        ..Accounting::default()
    };
    let mut newest: BTreeMap<&str, &AckedWrite> = BTreeMap::new();
    let mut lost: Vec<&AckedWrite> = Vec::new();
    for w in writes {
        if w.rev > revision {
            lost.push(w);
            continue;
        }
        out.kept += 1;
        let n = newest.entry(&w.key).or_insert(w);
        if w.rev > n.rev {
            *n = w;
        }
    }
    for (key, w) in newest {
        let found = at_r.get(key);
        let there = match (found, &w.value) {
            // A later change (up to R) of a write never answered.
            (Some((_, m)), _) if *m > w.rev => true,
            (Some((v, _)), Some(value)) => v == value,
            (Some(_), None) => false,
            (None, None) => true,
            (None, Some(_)) => uncertain_deletes.contains(key),
        };
        if !there {
            out.missing.push(Missing {
                key: key.to_string(),
                write: w.value.clone().unwrap_or_else(|| "delete".into()),
                rev: w.rev,
                found: found.map_or_else(
                    || "the key is absent".into(),
                    |(v, m)| format!("{v} (revision {m})"),
                ),
            });
        }
    }
    lost.sort_by_key(|w| w.rev);
    out.lost = lost.len();
    out.lost_keys = lost.iter().map(|w| &w.key).collect::<BTreeSet<_>>().len();
    out.lost_revisions = lost.first().zip(lost.last()).map(|(a, b)| (a.rev, b.rev));
    out.lost_listed = lost
        .iter()
        .take(LISTED)
        .map(|w| {
            let write = w.value.clone().unwrap_or_else(|| "delete".into());
            (w.rev, w.key.clone(), write)
        })
        .collect();
    out.last_segment = segment.map(|s| last_segment(writes, loss, s));
    out
}

/// Writes acknowledged within `segment` before `loss` (answers in
/// `(loss - segment, loss]`): what a chain of `segment` intervals can
/// hold back at the moment of the loss.
pub fn last_segment(writes: &[AckedWrite], loss: Us, segment: Us) -> usize {
    let from = loss.saturating_sub(segment);
    writes
        .iter()
        .filter(|w| w.ret > from && w.ret <= loss)
        .count()
}

/// The most writes the promotion may lose under `bound`, for `a`.
pub fn allowed(bound: LostOnPromotion, a: &Accounting) -> Option<usize> {
    match bound {
        LostOnPromotion::Writes(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        LostOnPromotion::LastSegment => a.last_segment,
    }
}

/// The violations of `a` under `bound`, dated `at`.
pub fn check(a: &Accounting, bound: LostOnPromotion, at: Ms) -> Vec<Violation> {
    let mut v: Vec<Violation> = a
        .missing
        .iter()
        .map(|m| {
            Violation::new(
                at,
                Check::Promotion,
                format!(
                    "{}: {} acknowledged by the primary at revision {} (at or below the \
                     promoted standby's {}) is not on the promoted cluster; found {}",
                    m.key, m.write, m.rev, a.revision, m.found
                ),
            )
        })
        .collect();
    match allowed(bound, a) {
        Some(n) if a.lost <= n => {}
        Some(n) => v.push(Violation::new(
            at,
            Check::Promotion,
            format!(
                "the promotion lost {} acknowledged writes (revisions {}), over \
                 bounds.lostOnPromotion ({bound}: {n})",
                a.lost,
                revisions(a)
            ),
        )),
        None => v.push(Violation::new(
            at,
            Check::Promotion,
            "bounds.lostOnPromotion is lastSegment but the primary had no segment interval",
        )),
    }
    v
}

/// "R+1..R+9 on 7 keys", or "none".
pub fn revisions(a: &Accounting) -> String {
    match a.lost_revisions {
        Some((lo, hi)) => format!("{lo}..{hi} on {} keys", a.lost_keys),
        None => "none".into(),
    }
}

#[cfg(test)]
#[path = "promotion_tests.rs"]
mod tests;
