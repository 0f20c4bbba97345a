//! The revision across keys: etcd's revision is one counter for the whole
//! store, so two checks span keys. No revision is acknowledged to two
//! different writes; and in real time revisions never go back: an
//! operation invoked after another completed answers with a revision at
//! least as high (strictly higher when it is a change, which takes a new
//! revision).

use super::model::Op;
use super::{Finding, FindingKind, History, timeline};
use crate::ops::Us;

/// Most findings of each kind reported (the rest are counted in them).
const MOST: usize = 50;

/// Both cross-key checks.
pub fn check(h: &History) -> Vec<Finding> {
    let mut out = reused(h);
    out.extend(order(h));
    out
}

fn finding(
    h: &History,
    kind: FindingKind,
    a: (u32, &Op),
    b: (u32, &Op),
    message: String,
) -> Finding {
    let mut shown = h.show(a.0, &[a.1]);
    shown.extend(h.show(b.0, &[b.1]));
    shown.sort_by_key(|s| (s.call, s.id));
    Finding {
        kind,
        key: h.key_name(b.0).to_string(),
        at: shown.first().map(|s| s.call).unwrap_or(0),
        message,
        timeline: timeline::render(&shown),
        ops: shown,
    }
}

/// Two acknowledged changes with one revision.
fn reused(h: &History) -> Vec<Finding> {
    let mut writes: Vec<(i64, u32, &Op)> = h
        .all()
        .filter(|(_, o)| o.changed())
        .filter_map(|(k, o)| o.rev().map(|r| (r, k, o)))
        .collect();
    writes.sort_by_key(|w| (w.0, w.2.id));
    let mut out = Vec::new();
    let mut extra = 0usize;
    for pair in writes.windows(2) {
        let ((r, ka, a), (rb, kb, b)) = (pair[0], pair[1]);
        if r != rb {
            continue;
        }
        if out.len() >= MOST {
            extra += 1;
            continue;
        }
        out.push(finding(
            h,
            FindingKind::RevisionReused,
            (ka, a),
            (kb, b),
            format!(
                "revision {r} was acknowledged to two writes: op {} on {} and op {} on {}",
                a.id,
                h.key_name(ka),
                b.id,
                h.key_name(kb)
            ),
        ));
    }
    if extra > 0
        && let Some(last) = out.last_mut()
    {
        last.message
            .push_str(&format!(" (and {extra} more revisions acknowledged twice)"));
    }
    out
}

/// Revisions going back in real time.
fn order(h: &History) -> Vec<Finding> {
    // Only operations that completed with a revision can bound later ones;
    // an unknown write seen applied has a revision but only an upper bound
    // on when it took effect, so it is checked as the later one only.
    let mut by_ret: Vec<(Us, i64, u32, &Op)> = h
        .all()
        .filter(|(_, o)| o.known())
        .filter_map(|(k, o)| o.rev().map(|r| (o.ret, r, k, o)))
        .collect();
    by_ret.sort_by_key(|x| (x.0, x.3.id));
    let mut by_call: Vec<(Us, u32, &Op)> = h
        .all()
        .filter(|(_, o)| o.rev().is_some())
        .map(|(k, o)| (o.call, k, o))
        .collect();
    by_call.sort_by_key(|x| (x.0, x.2.id));
    let mut out = Vec::new();
    let mut best: Option<(i64, u32, &Op)> = None;
    let mut j = 0;
    let mut extra = 0usize;
    for &(call, kb, b) in &by_call {
        while j < by_ret.len() && by_ret[j].0 < call {
            let (_, r, k, o) = by_ret[j];
            if best.is_none_or(|(br, _, _)| r > br) {
                best = Some((r, k, o));
            }
            j += 1;
        }
        let (Some((max, ka, a)), Some(rb)) = (best, b.rev()) else {
            continue;
        };
        let bad = if b.changed() { rb <= max } else { rb < max };
        if !bad {
            continue;
        }
        if out.len() >= MOST {
            extra += 1;
            continue;
        }
        out.push(finding(
            h,
            FindingKind::RevisionOrder,
            (ka, a),
            (kb, b),
            format!(
                "op {} on {} ({}) was invoked after op {} on {} had completed with revision \
                 {max}, yet answered with revision {rb}{}",
                b.id,
                h.key_name(kb),
                h.describe(b),
                a.id,
                h.key_name(ka),
                if b.changed() {
                    " (a change must take a higher one)"
                } else {
                    ""
                }
            ),
        ));
    }
    if extra > 0
        && let Some(last) = out.last_mut()
    {
        last.message
            .push_str(&format!(" (and {extra} more operations like it)"));
    }
    out
}
