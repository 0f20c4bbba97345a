//! The summary rows of the primary's loss and the standby's promotion
//! (`standby.losePrimaryAt`): how long from the loss to promoted and to
//! the first write accepted; every write the primary acknowledged at or
//! below R on the promoted cluster (none missing, whatever the bounds);
//! and the writes past R, lost by the promotion, against
//! `bounds.lostOnPromotion` ([`crate::invariants::promotion`]).

use super::{Row, RunData};
use crate::invariants::promotion::{self, Accounting, Promotion};
use crate::invariants::recovery::fmt_ms;
use crate::invariants::{Check, Violation};
use crate::scenario::LostOnPromotion;

/// The rows and violations of the promotion, and what summary.json says
/// of it (`None`: the scenario loses no primary, or it was never lost).
pub(super) fn rows(d: &RunData, rows: &mut Vec<Row>, v: &mut Vec<Violation>) -> Option<Promotion> {
    d.scenario.standby.as_ref()?.lose_primary_at?;
    let bound = d
        .scenario
        .bounds
        .lost_on_promotion
        .unwrap_or(LostOnPromotion::Writes(0));
    let Some(p) = &d.promotion else {
        if !d.interrupted {
            let why = "the primary was never lost (the run ended before standby.losePrimaryAt, \
                       or failed first)";
            v.push(Violation::new(d.run_end, Check::Promotion, why));
            rows.push(Row {
                check: "promotion (loss -> promoted -> first write)".into(),
                bound: "promoted, and a write accepted".into(),
                measured: why.into(),
                pass: false,
            });
        }
        return None;
    };
    let at = p.moved_at.or(p.promoted_at).unwrap_or(p.lost_at);
    v.extend(
        p.problems
            .iter()
            .map(|m| Violation::new(at, Check::Promotion, m.clone())),
    );
    let time = |ms: Option<u64>| ms.map_or_else(|| "never".into(), fmt_ms);
    rows.push(Row {
        check: "promotion (loss -> promoted -> first write)".into(),
        bound: "promoted, and a write accepted".into(),
        measured: format!(
            "{} members of the primary killed; {} promoted at revision {} {} after, first write \
             accepted {} after{}",
            p.members_killed,
            p.cluster,
            p.revision,
            time(p.to_promoted_ms()),
            time(p.to_first_write_ms()),
            p.message
                .as_deref()
                .map(|m| format!(" (status says: {})", short(m)))
                .unwrap_or_default()
        ),
        pass: p.problems.is_empty() && p.first_write_at.is_some(),
    });
    if !d.interrupted {
        rows.push(after_row(p, v));
    }
    let Some(a) = &p.accounting else {
        if !d.interrupted {
            let why = "the primary's writes could not be accounted for (see the problems)";
            v.push(Violation::new(at, Check::Promotion, why));
        }
        rows.push(Row {
            check: "lost on promotion".into(),
            bound: format!("<= {bound}"),
            measured: "not accounted".into(),
            pass: false,
        });
        return Some(p.clone());
    };
    rows.push(Row {
        check: "primary's writes at or below R on the promoted cluster".into(),
        bound: "0 missing".into(),
        measured: format!(
            "{} missing of {} acknowledged at or below R = {} ({} acknowledged before the loss)",
            a.missing.len(),
            a.kept,
            a.revision,
            a.acked
        ),
        pass: a.missing.is_empty(),
    });
    let found = promotion::check(a, bound, at);
    let over = found
        .iter()
        .any(|x| x.message.contains("bounds.lostOnPromotion"));
    rows.push(Row {
        check: "lost on promotion".into(),
        bound: bound_text(bound, a),
        measured: format!(
            "{} acknowledged past R (revisions {}){}",
            a.lost,
            promotion::revisions(a),
            listed(a)
        ),
        pass: !over,
    });
    v.extend(found);
    Some(p.clone())
}

/// The row of the history after the promotion, checked against the
/// promoted cluster alone; its violations into `v`.
fn after_row(p: &Promotion, v: &mut Vec<Violation>) -> Row {
    let at = p.moved_at.unwrap_or(p.lost_at);
    let Some(l) = &p.linearizability else {
        return Row {
            check: "linearizable after the promotion".into(),
            bound: "0 violations".into(),
            measured: "not checked (see the problems)".into(),
            pass: false,
        };
    };
    v.extend(l.findings.iter().map(|f| {
        Violation::new(
            at,
            Check::Linearizability,
            format!("after the promotion: {}: {}", f.key, f.message),
        )
    }));
    if !l.unknown_keys.is_empty() {
        v.push(Violation::new(
            at,
            Check::Linearizability,
            format!(
                "after the promotion: {} keys not searched to the end in time",
                l.unknown_keys.len()
            ),
        ));
    }
    Row {
        check: "linearizable after the promotion".into(),
        bound: "0 violations".into(),
        measured: format!(
            "{} violations in {} operations over {} keys from the promoted cluster's keys at R \
             ({} unknown outcomes), checked in {}",
            l.violations,
            l.counts.ops,
            l.keys,
            l.counts.unknown_writes,
            fmt_ms(l.elapsed_ms)
        ),
        pass: l.pass(),
    }
}

/// The bound in words, with what `lastSegment` came to.
fn bound_text(bound: LostOnPromotion, a: &Accounting) -> String {
    match (bound, a.last_segment) {
        (LostOnPromotion::Writes(n), _) => format!("<= {n}"),
        (LostOnPromotion::LastSegment, Some(n)) => format!(
            "<= lastSegment: {n} (acknowledged in the last segment interval before the loss)"
        ),
        (LostOnPromotion::LastSegment, None) => "<= lastSegment (no segment interval)".into(),
    }
}

/// `m` cut to [`SAID`] characters (summary.json has it whole).
fn short(m: &str) -> String {
    match m.char_indices().nth(SAID) {
        Some((i, _)) => format!("{}...", &m[..i]),
        None => m.to_string(),
    }
}

/// Most characters of the status's message in the row.
const SAID: usize = 120;

/// "; first: rev key write, ..." for the first few lost writes.
fn listed(a: &Accounting) -> String {
    if a.lost_listed.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = a
        .lost_listed
        .iter()
        .take(5)
        .map(|(rev, key, write)| format!("{rev} {key} {write}"))
        .collect();
    format!("; first: {}", shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_says_what_last_segment_came_to() {
        let mut a = Accounting {
            last_segment: Some(7),
            ..Accounting::default()
        };
        assert_eq!(bound_text(LostOnPromotion::Writes(0), &a), "<= 0");
        assert!(bound_text(LostOnPromotion::LastSegment, &a).starts_with("<= lastSegment: 7"));
        a.last_segment = None;
        assert!(bound_text(LostOnPromotion::LastSegment, &a).contains("no segment interval"));
        assert_eq!(listed(&a), "");
        a.lost_listed = vec![(9, "soak/k000001".into(), "w0#3".into())];
        assert_eq!(listed(&a), "; first: 9 soak/k000001 w0#3");
        assert_eq!(short("ok"), "ok");
        let long = "é".repeat(SAID + 5);
        assert_eq!(short(&long), format!("{}...", "é".repeat(SAID)));
    }
}
