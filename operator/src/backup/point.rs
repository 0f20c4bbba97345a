//! Point-in-time restore (`spec.restore.toRevision` / `toTime`): a backup's
//! chain of delta segments cut at a point, so a restore replays exactly up
//! to it. A point the chain cannot show (before its base, past its last
//! segment, past where it is cut by damage) is refused with the window it
//! can show, never restored approximately.

use super::chain::Chain;
use crate::units::rfc3339_ms;

/// Where a restore stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointInTime {
    /// Exactly this revision (`toRevision`).
    Revision(i64),
    /// The last revision known to be committed at or before this instant,
    /// in ms since the Unix epoch (`toTime`). A revision is placed in time
    /// by the segment that holds it (written after the revision was
    /// committed), so the restore never holds a revision committed after
    /// it, and leaves out at most the revisions of the segment interval
    /// just before it.
    Time(u64),
}

impl std::fmt::Display for PointInTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PointInTime::Revision(r) => write!(f, "revision {r}"),
            PointInTime::Time(ms) => write!(f, "{}", rfc3339_ms(*ms)),
        }
    }
}

/// `chain` (of a base taken at `base_unix_ms`) cut at `point`: only the
/// revisions at or before it. Refused, with the window the chain shows,
/// when the point is before the base or past what the chain holds.
pub fn cut(chain: &Chain, base_unix_ms: u64, point: PointInTime) -> Result<Chain, String> {
    let last = chain.last_revision();
    let last_ms = chain.last_unix_ms().unwrap_or(base_unix_ms);
    let window = format!(
        "backup {} and its chain show revisions {} to {last} ({} to {}){}",
        chain.base,
        chain.base_revision,
        rfc3339_ms(base_unix_ms),
        rfc3339_ms(last_ms),
        chain
            .cut
            .as_ref()
            .map(|c| format!("; the chain is cut after that: {c}"))
            .unwrap_or_default()
    );
    let keep: Box<dyn Fn(i64, u64) -> bool> = match point {
        PointInTime::Revision(r) if r < chain.base_revision => {
            return Err(format!(
                "{point} is before the backup: {window}; name an older backup"
            ));
        }
        PointInTime::Revision(r) if r > last => {
            return Err(format!(
                "{point} is past what the chain holds: {window}; name a newer backup or an \
                 earlier point"
            ));
        }
        PointInTime::Time(t) if t < base_unix_ms => {
            return Err(format!(
                "{point} is before the backup: {window}; name an older backup"
            ));
        }
        PointInTime::Time(t) if t > last_ms => {
            return Err(format!(
                "{point} is past the chain's last segment (what happened after it is not \
                 known): {window}; name a newer backup or an earlier point"
            ));
        }
        PointInTime::Revision(r) => Box::new(move |rev, _| rev <= r),
        PointInTime::Time(t) => Box::new(move |_, written| written <= t),
    };
    let mut out = chain.clone();
    out.cut = None;
    out.segments = chain
        .segments
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s.revisions.retain(|r| keep(r.revision, s.unix_ms));
            s
        })
        .filter(|s| !s.revisions.is_empty())
        .collect();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::delta::{Event, Revision, Segment};

    /// Base at revision 10 (time 1000); segments written at 2000, 3000,
    /// 4000 holding revisions 11-12, 13-14, 15-16.
    fn chain() -> Chain {
        let seg = |seq: u64, first: i64| Segment {
            base: "b".into(),
            seq,
            unix_ms: 1000 + 1000 * seq,
            revisions: (first..first + 2)
                .map(|revision| Revision {
                    revision,
                    events: vec![Event::Delete { key: vec![1] }],
                })
                .collect(),
            prev: [0; 32],
        };
        Chain {
            base: "b".into(),
            base_revision: 10,
            segments: vec![seg(1, 11), seg(2, 13), seg(3, 15)],
            ..Chain::default()
        }
    }

    fn last(c: &Result<Chain, String>) -> i64 {
        c.as_ref().expect("cut").last_revision()
    }

    #[test]
    fn a_revision_is_restored_exactly() {
        let c = chain();
        assert_eq!(last(&cut(&c, 1000, PointInTime::Revision(13))), 13);
        assert_eq!(last(&cut(&c, 1000, PointInTime::Revision(16))), 16);
        let base_only = cut(&c, 1000, PointInTime::Revision(10)).expect("cut");
        assert!(base_only.segments.is_empty());
        let early = cut(&c, 1000, PointInTime::Revision(9)).expect_err("before");
        assert!(
            early.contains("before the backup") && early.contains("10 to 16"),
            "{early}"
        );
        let late = cut(&c, 1000, PointInTime::Revision(17)).expect_err("past");
        assert!(late.contains("past what the chain holds"), "{late}");
    }

    #[test]
    fn a_time_between_segments_never_takes_a_later_revision() {
        let c = chain();
        // Between the second segment (3000) and the third (4000): revisions
        // 15-16 may have been committed after 3500, so they are left out.
        assert_eq!(last(&cut(&c, 1000, PointInTime::Time(3500))), 14);
        assert_eq!(last(&cut(&c, 1000, PointInTime::Time(3000))), 14);
        assert_eq!(last(&cut(&c, 1000, PointInTime::Time(1500))), 10);
        assert!(cut(&c, 1000, PointInTime::Time(999)).is_err());
        assert!(cut(&c, 1000, PointInTime::Time(4001)).is_err());
    }

    proptest::proptest! {
        /// Whatever the point, what is kept is at or before it, in order.
        #[test]
        fn what_is_kept_is_never_past_the_point(r in 0i64..20, t in 0u64..5000) {
            let c = chain();
            if let Ok(k) = cut(&c, 1000, PointInTime::Revision(r)) {
                proptest::prop_assert_eq!(k.last_revision(), r);
            }
            if let Ok(k) = cut(&c, 1000, PointInTime::Time(t)) {
                proptest::prop_assert!(k.segments.iter().all(|s| s.unix_ms <= t));
            }
        }
    }
}
