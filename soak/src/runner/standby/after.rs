//! The history after the promotion, checked for linearizability against
//! the promoted cluster on its own. The run's main check stops at the
//! primary's loss (the promoted cluster reuses the lost revisions above R
//! for other writes, and the writes lost past R were acknowledged and then
//! never seen again, which no history of one cluster allows). This one
//! starts where the promoted cluster started: each key as the runner read
//! it there at R, before the load moved (one completed put of that value
//! at that mod revision per key, each of a client of its own, just before
//! the move), then every operation invoked once the load had moved, all of
//! them sent to the promoted cluster. The final read-back settles what it
//! settles in the main check (writes of unknown outcome seen applied).

use std::path::Path;

use crate::invariants::promotion::Promotion;
use crate::lin::{self, History};
use crate::load::ledger::key_name;
use crate::ops::{Kind, Record, Status, Us, file};
use crate::watch::check::FinalState;

/// Ids of the seed operations (far above any of the history's).
const SEED_IDS: u64 = 1 << 60;

/// Checks the history at `history` after the move of `p`, seeded with the
/// keys at R; `finals` is the final read-back, `end` when the run's picture
/// ends (µs). `Err` when there is nothing to check from (no read at R, no
/// move) or the history cannot be read.
pub(super) fn check(
    history: &Path,
    p: &Promotion,
    finals: Option<&FinalState>,
    end: Us,
) -> Result<lin::Report, String> {
    let (Some(at_r), Some(moved)) = (p.at_r.as_ref(), p.moved_at) else {
        return Err(
            "the promoted cluster's keys at R were not read, or the load never moved".into(),
        );
    };
    let moved = moved.saturating_mul(1000);
    let mut h = History::new();
    for (i, (key, (value, rev))) in at_r.iter().enumerate() {
        if lin::parse_write(value).is_none() {
            continue; // a value the load never wrote: nothing to seed
        }
        let mut r = Record::new(&format!("at-r{i}"), Kind::Put, key, moved.saturating_sub(2));
        r.id = SEED_IDS + i as u64;
        r.value = Some(value.clone());
        r.ret = moved.saturating_sub(1);
        r.status = Status::Ok;
        r.rev = Some(*rev);
        h.add(&r).map_err(|e| format!("seed of {key}: {e}"))?;
    }
    let mut invalid = None;
    file::read(history, |r| {
        if r.call >= moved
            && invalid.is_none()
            && let Err(e) = h.add(&r)
        {
            invalid = Some(format!("{}: {e}", history.display()));
        }
    })
    .map_err(|e| e.to_string())?;
    if let Some(e) = invalid {
        return Err(e);
    }
    for (key, (v, rev)) in finals.into_iter().flatten() {
        if let Some(k) = h.key_number(&key_name(*key)) {
            h.observe(k, *v, *rev, end);
        }
    }
    h.patch(false);
    Ok(lin::check(&h, &lin::Options::default()))
}
