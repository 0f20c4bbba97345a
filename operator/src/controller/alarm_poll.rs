//! When to look at a cluster's alarms next, between its passes.
//!
//! An alarm comes with no event of its own, so the local platform's task
//! asks one member's Status between passes ([`super::Cluster::look_for_alarms`]).
//! How often is a trade: every look costs the operator and etcd a little
//! CPU on an idle machine, and every millisecond between looks adds to the
//! time a NOSPACE alarm stays unseen (writes refused). The answer here:
//!
//! * while the raft log stands still nothing can fill the database: the
//!   time between looks doubles up to [`ALARM_POLL_STILL`];
//! * while it moves: every [`ALARM_POLL`], or sooner, down to
//!   [`ALARM_POLL_NEAR`], when the database file nears the quota etcd
//!   enforces: at once past [`NEAR_QUOTA_PERCENT`] of it, and earlier when
//!   it grows fast enough to reach the quota within two looks.

use std::time::Duration;

/// How often an idle cluster's alarms are looked at between passes while
/// its raft log moves and its database is far from the quota.
pub const ALARM_POLL: Duration = Duration::from_millis(500);
/// The longest time between two looks while the log stands still: the
/// time between looks doubles from [`ALARM_POLL`] up to this while the
/// raft index does not move (no write, so no NOSPACE can come), and falls
/// back to [`ALARM_POLL`] or below as soon as it moves.
pub const ALARM_POLL_STILL: Duration = Duration::from_secs(2);
/// The time between two cheap looks (a `stat` of the database file, see
/// the local platform's worker) while the database file stands still:
/// cheap enough to come often, so the first look after writes start comes
/// soon.
pub const DB_STAMP_POLL: Duration = Duration::from_millis(250);
/// The time to the next look after one found the database file as the
/// look before left it, from the time `poll` that look waited: at most
/// [`DB_STAMP_POLL`], and while looks came sooner (writes near the quota)
/// twice as long as the last wait, no more. etcd writes its file in
/// batches (every 100 ms by default), so a look between two batches finds
/// it still while writes go on; falling back to [`DB_STAMP_POLL`] at once
/// would leave an alarm raised just then unseen for up to that long.
pub fn after_still_stamp(poll: Duration) -> Duration {
    (poll * 2).min(DB_STAMP_POLL)
}

/// The time between looks while writes fill a database near its quota.
pub const ALARM_POLL_NEAR: Duration = Duration::from_millis(50);

/// Whether a look whose database file stands still since the last look
/// ends there, without asking etcd: not while writes fill a database near
/// its quota (the last look through etcd asked for the next within
/// [`ALARM_POLL_NEAR`]). etcd holds a new alarm in memory (its Status
/// lists it) as soon as it is raised, but writes it to the file only with
/// its next batch (up to 100 ms later): near the quota, where an alarm is
/// likely, the look asks etcd every time, and the still file no longer
/// hides an alarm for up to a batch. Far from the quota, or once the raft
/// index stands still (the looks slow down past [`ALARM_POLL_NEAR`]), a
/// still file ends the look as before, and an idle cluster makes no call.
pub fn still_file_ends_look(poll: Duration) -> bool {
    poll > ALARM_POLL_NEAR
}
/// A database file this big (percent of the quota) is near it.
pub const NEAR_QUOTA_PERCENT: u64 = 80;

/// Whether a database file of `db_size` bytes is near the quota of
/// `quota` bytes ([`NEAR_QUOTA_PERCENT`] of it or more).
pub fn near_quota(db_size: u64, quota: u64) -> bool {
    db_size.saturating_mul(100) >= quota.saturating_mul(NEAR_QUOTA_PERCENT)
}

/// What a look at one member saw: its raft index and database file size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    /// The member's raft index.
    pub raft_index: u64,
    /// Its database file size, bytes (what etcd holds against the quota).
    pub db_size: u64,
}

/// The time to the next look, from the time `poll` the last one waited,
/// what the look before it saw (`before`, `elapsed` earlier) and what it
/// saw (`now`; `None` when the member did not answer), for a cluster
/// whose quota is `quota` bytes.
pub fn next_alarm_poll(
    poll: Duration,
    before: Option<Seen>,
    now: Option<Seen>,
    elapsed: Duration,
    quota: u64,
) -> Duration {
    let Some(now) = now else {
        return ALARM_POLL;
    };
    let near = near_quota(now.db_size, quota);
    let Some(before) = before else {
        return if near { ALARM_POLL_NEAR } else { ALARM_POLL };
    };
    if before.raft_index == now.raft_index {
        // Nothing written: nothing can reach the quota before the next
        // write, and the first look after it comes within the cap.
        return (poll * 2).clamp(ALARM_POLL, ALARM_POLL_STILL);
    }
    if near {
        return ALARM_POLL_NEAR;
    }
    let grown = now.db_size.saturating_sub(before.db_size);
    if grown == 0 || elapsed.is_zero() {
        return ALARM_POLL;
    }
    // At the rate just seen, the quota is reached in `full`; look twice
    // before that.
    let left = quota.saturating_sub(now.db_size);
    let full = elapsed.mul_f64(left as f64 / grown as f64);
    (full / 2).clamp(ALARM_POLL_NEAR, ALARM_POLL)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const QUOTA: u64 = 16 * MIB;

    fn seen(raft_index: u64, db_size: u64) -> Option<Seen> {
        Some(Seen {
            raft_index,
            db_size,
        })
    }

    #[test]
    fn looks_slow_down_only_while_the_log_stands_still() {
        let p = ALARM_POLL;
        let t = p;
        // Unknown (no answer, first look): the short period.
        assert_eq!(
            next_alarm_poll(p * 4, None, seen(7, MIB), t, QUOTA),
            ALARM_POLL
        );
        assert_eq!(
            next_alarm_poll(p * 4, seen(7, MIB), None, t, QUOTA),
            ALARM_POLL
        );
        // Still: doubling, capped.
        let still = |poll| next_alarm_poll(poll, seen(7, MIB), seen(7, MIB), poll, QUOTA);
        assert_eq!(still(p), p * 2);
        assert_eq!(still(p * 2), ALARM_POLL_STILL);
        assert_eq!(still(ALARM_POLL_STILL), ALARM_POLL_STILL);
        // Still stays slow even near the quota: nothing is being written.
        assert_eq!(
            next_alarm_poll(p, seen(7, 15 * MIB), seen(7, 15 * MIB), t, QUOTA),
            p * 2
        );
        // A write moved it, far from the quota, slowly: back to ALARM_POLL.
        assert_eq!(
            next_alarm_poll(ALARM_POLL_STILL, seen(7, MIB), seen(8, MIB), t, QUOTA),
            ALARM_POLL
        );
    }

    #[test]
    fn looks_come_fast_while_writes_near_the_quota() {
        let t = ALARM_POLL;
        // Past 80% of the quota while the log moves.
        let near = 13 * MIB;
        assert_eq!(
            next_alarm_poll(t, seen(1, near), seen(2, near), t, QUOTA),
            ALARM_POLL_NEAR
        );
        assert_eq!(
            next_alarm_poll(t, None, seen(2, near), t, QUOTA),
            ALARM_POLL_NEAR
        );
        // Just under 80%: the growth decides.
        let under = 12 * MIB;
        assert_eq!(
            next_alarm_poll(t, seen(1, under), seen(2, under), t, QUOTA),
            ALARM_POLL
        );
        // 4 MiB left, growing 4 MiB per 500 ms: full in 500 ms, look at 250.
        assert_eq!(
            next_alarm_poll(t, seen(1, 8 * MIB), seen(2, under), t, QUOTA),
            Duration::from_millis(250)
        );
        // Growing 12 MiB per 500 ms with 4 left: full in 167 ms, look at 83.
        assert_eq!(
            next_alarm_poll(t, seen(1, 0), seen(2, under), t, QUOTA).as_millis(),
            83
        );
        // Growing 12 MiB per 100 ms: as often as allowed.
        let fast = Duration::from_millis(100);
        assert_eq!(
            next_alarm_poll(t, seen(1, 0), seen(2, under), fast, QUOTA),
            ALARM_POLL_NEAR
        );
        // Growing slowly: the usual period.
        assert_eq!(
            next_alarm_poll(t, seen(1, 4 * MIB), seen(2, 4 * MIB + 1024), t, QUOTA),
            ALARM_POLL
        );
        // A default 2 GiB quota: a few MiB are far from it.
        let default = 2 << 30;
        assert_eq!(
            next_alarm_poll(t, seen(1, MIB), seen(2, 13 * MIB), t, default),
            ALARM_POLL
        );
    }

    #[test]
    fn a_still_file_between_two_batches_keeps_the_looks_coming_soon() {
        // Near the quota: the next look comes after a batch (100 ms).
        assert_eq!(after_still_stamp(ALARM_POLL_NEAR), 2 * ALARM_POLL_NEAR);
        assert!(after_still_stamp(ALARM_POLL_NEAR) < DB_STAMP_POLL);
        // Still for longer: back to the cheap cadence, never slower.
        let mut poll = ALARM_POLL_NEAR;
        for _ in 0..4 {
            poll = after_still_stamp(poll);
        }
        assert_eq!(poll, DB_STAMP_POLL);
        assert_eq!(after_still_stamp(ALARM_POLL_STILL), DB_STAMP_POLL);
    }

    #[test]
    fn near_the_quota_from_eighty_percent_of_it() {
        assert!(!near_quota(79 * MIB, 100 * MIB));
        assert!(near_quota(80 * MIB, 100 * MIB));
        assert!(!near_quota(QUOTA * 4 / 5, QUOTA), "a byte short of 80 %");
        assert!(near_quota(13 * MIB, QUOTA));
        assert!(near_quota(QUOTA + MIB, QUOTA));
        assert!(!near_quota(0, QUOTA));
        // The sizes etcd reports near a large quota do not overflow.
        assert!(near_quota(u64::MAX, u64::MAX));
    }

    #[test]
    fn only_looks_near_the_quota_ask_etcd_past_a_still_file() {
        assert!(!still_file_ends_look(ALARM_POLL_NEAR));
        assert!(!still_file_ends_look(ALARM_POLL_NEAR / 2));
        assert!(still_file_ends_look(after_still_stamp(ALARM_POLL_NEAR)));
        assert!(still_file_ends_look(DB_STAMP_POLL));
        assert!(still_file_ends_look(ALARM_POLL));
        assert!(still_file_ends_look(ALARM_POLL_STILL));
        // Writes that stop near the quota: the next look through etcd
        // sees the raft index still, and the looks go back to the file.
        let t = ALARM_POLL_NEAR;
        let near = 15 * MIB;
        let after = next_alarm_poll(t, seen(9, near), seen(9, near), t, QUOTA);
        assert!(still_file_ends_look(after));
    }

    #[test]
    fn a_shrunk_database_is_no_growth() {
        // Compacted and defragmented: smaller, far from the quota.
        let t = ALARM_POLL;
        assert_eq!(
            next_alarm_poll(t, seen(1, 15 * MIB), seen(9, MIB), t, QUOTA),
            ALARM_POLL
        );
    }
}
