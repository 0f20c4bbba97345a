//! The controller's side of database maintenance: the facts the plan needs
//! that only the controller can know (the last compaction, the KV hashes of
//! the last hash check, whose scheduled defragmentation is due), and the
//! compaction, defragmentation and disarm steps themselves.
//!
//! The hash check runs every [`HASH_CHECK_INTERVAL`] while every member is
//! healthy (and at once when etcd lists a CORRUPT alarm): each member's
//! HashKV at the lowest revision any of them reported, so all of them can
//! answer for the same revision.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::future::join_all;

use super::act::Error;
use super::{Cluster, SpecState};
use crate::observe::Observation;
use crate::plan::{AlarmKind, KvHash};
use crate::platform::Platform;

/// Time between two KV hash checks of a healthy cluster.
pub const HASH_CHECK_INTERVAL: Duration = Duration::from_secs(10);
/// How often an idle cluster's alarms are looked at between passes while
/// its raft log moves (see [`Cluster::look_for_alarms`]).
pub const ALARM_POLL: Duration = Duration::from_millis(500);
/// The longest time between two looks while the log stands still: the
/// time between looks doubles from [`ALARM_POLL`] up to this while the
/// raft index does not move (no write, so no NOSPACE can come), and falls
/// back to [`ALARM_POLL`] as soon as it moves.
pub const ALARM_POLL_STILL: Duration = Duration::from_secs(2);

/// What one look at a cluster's alarms saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AlarmLook {
    /// etcd raised an alarm the last pass did not see.
    pub raised: bool,
    /// The raft index of the member asked, when it answered.
    pub raft_index: Option<u64>,
}

/// The time to the next look at the alarms: [`ALARM_POLL`] while the raft
/// index moves or is unknown, doubling up to [`ALARM_POLL_STILL`] while it
/// stands still.
pub fn next_alarm_poll(poll: Duration, before: Option<u64>, now: Option<u64>) -> Duration {
    match (before, now) {
        (Some(b), Some(n)) if b == n => (poll * 2).clamp(ALARM_POLL, ALARM_POLL_STILL),
        _ => ALARM_POLL,
    }
}

/// What the controller remembers between passes about the databases.
#[derive(Debug)]
pub(super) struct DbState {
    /// The revision last compacted to.
    compacted: i64,
    /// Each member's hash at the last check.
    hashes: HashMap<String, KvHash>,
    /// When the last check ran.
    checked: Option<Instant>,
    /// When each member was last defragmented.
    defragmented: HashMap<String, Instant>,
    /// When a pass first saw the NOSPACE alarm now raised.
    nospace_since: Option<Instant>,
    /// Scheduled defragmentation counts from here (the operator's start).
    since: Instant,
    /// Whom to ask for alarms between passes: the member that gave the
    /// last pass its member list, when that pass saw no alarm.
    alarm_url: Option<String>,
}

impl Default for DbState {
    fn default() -> Self {
        DbState {
            compacted: 0,
            hashes: HashMap::new(),
            checked: None,
            defragmented: HashMap::new(),
            nospace_since: None,
            since: Instant::now(),
            alarm_url: None,
        }
    }
}

impl<P: Platform> Cluster<P> {
    /// Adds what the controller knows to the observation: the last
    /// compaction, the hashes (checking them again when due) and whose
    /// scheduled defragmentation came due.
    pub(super) async fn db_facts(&mut self, obs: &mut Observation) {
        if self.hash_check_due(obs) {
            self.check_hashes(obs).await;
        }
        let interval = match &self.spec {
            SpecState::Valid { spec, .. } => spec.defrag.as_ref().and_then(|d| d.interval),
            SpecState::Invalid { .. } => None,
        };
        self.db.alarm_url = obs
            .observed
            .db
            .alarms
            .is_empty()
            .then(|| obs.api_url.clone())
            .flatten();
        let nospace = obs
            .observed
            .db
            .alarms
            .iter()
            .any(|a| a.kind == AlarmKind::NoSpace);
        self.db.nospace_since = match (nospace, self.db.nospace_since) {
            (false, _) => None,
            (true, since) => Some(since.unwrap_or_else(Instant::now)),
        };
        let db = &self.db;
        obs.observed.db.compacted = db.compacted;
        for m in &mut obs.observed.members {
            m.db.hash = db.hashes.get(&m.name).copied();
            let defragmented = db.defragmented.get(&m.name).copied();
            let last = defragmented.unwrap_or(db.since);
            m.db.defrag_due = interval.is_some_and(|i| last.elapsed() >= i);
            m.db.defragged_since_alarm = db
                .nospace_since
                .is_some_and(|t| defragmented.is_some_and(|d| d >= t));
        }
    }

    /// Whether etcd raised an alarm (NOSPACE, CORRUPT) since the last pass
    /// saw none, and the raft index of the member asked: one Status call,
    /// answered from the member's own state (the alarms are in its
    /// `errors`), where `alarm list` would be a raft proposal. An alarm
    /// comes with no event of its own (no process exits, no spec changes),
    /// so between a converged cluster's passes ([`super::IDLE_INTERVAL`])
    /// the local platform's task asks this every [`ALARM_POLL`] while the
    /// log moves, less often while it stands still ([`next_alarm_poll`]),
    /// and passes at once on a yes. Not raised when the last pass saw
    /// alarms (the plan is on them), knew no member to ask, or the member
    /// does not answer.
    pub async fn look_for_alarms(&self) -> AlarmLook {
        let Some(url) = &self.db.alarm_url else {
            return AlarmLook::default();
        };
        match self.clients.status(url).await {
            Ok(s) => AlarmLook {
                raised: !crate::etcd::alarms_in_status(&s.errors).is_empty(),
                raft_index: Some(s.raft_index),
            },
            Err(_) => AlarmLook::default(),
        }
    }

    fn hash_check_due(&self, obs: &Observation) -> bool {
        let o = &obs.observed;
        let settled = o.membership_known && o.members.iter().all(|m| m.healthy);
        let corrupt_alarm = o.db.alarms.iter().any(|a| a.kind == AlarmKind::Corrupt);
        let stale = self
            .db
            .checked
            .is_none_or(|t| t.elapsed() >= HASH_CHECK_INTERVAL);
        settled && (stale || (corrupt_alarm && self.db.hashes.is_empty()))
    }

    /// Every running member's KV hash at the lowest revision one reported.
    async fn check_hashes(&mut self, obs: &Observation) {
        self.db.checked = Some(Instant::now());
        self.db.hashes.clear();
        let Some(revision) = obs.member_revisions.iter().map(|(_, r)| *r).min() else {
            return;
        };
        if revision <= 0 {
            return;
        }
        let urls: Vec<(String, String)> = obs
            .platform
            .iter()
            .filter(|p| p.running)
            .filter_map(|p| Some((p.addr.name.clone(), p.call_url.clone()?)))
            .collect();
        // Hashes are only ever compared between members: a member alone
        // has nothing to be checked against (and each check opens a
        // connection per member).
        if urls.len() < 2 {
            return;
        }
        let clients = &self.clients;
        let answers = join_all(urls.iter().map(|(name, url)| async move {
            (name.clone(), clients.hash_kv(url, revision).await)
        }))
        .await;
        for (name, answer) in answers {
            match answer {
                Ok(h) => {
                    self.db.hashes.insert(name, h);
                }
                Err(e) => {
                    tracing::debug!(cluster = %self.name, member = %name, "no KV hash: {e}")
                }
            }
        }
        let distinct: std::collections::HashSet<u32> =
            self.db.hashes.values().map(|h| h.hash).collect();
        if distinct.len() > 1 {
            tracing::warn!(
                cluster = %self.name, revision,
                "KV hashes differ at revision {revision}: {:?}",
                self.db.hashes
            );
        }
    }

    /// Compacts the cluster's history up to `revision`.
    pub(super) async fn compact(&mut self, obs: &Observation, revision: i64) -> Result<(), Error> {
        let api = obs.api_url.clone().ok_or(Error::NoLeader)?;
        self.clients.compact(&api, revision).await?;
        self.db.compacted = self.db.compacted.max(revision);
        tracing::info!(cluster = %self.name, revision, "compacted the history");
        Ok(())
    }

    /// Defragments one member, and notes when.
    pub(super) async fn defragment(
        &mut self,
        obs: &Observation,
        member: &str,
    ) -> Result<(), Error> {
        let url = obs
            .platform
            .iter()
            .find(|p| p.addr.name == member)
            .and_then(|p| p.call_url.clone())
            .ok_or_else(|| crate::platform::Error::NoMember {
                cluster: self.name.clone(),
                member: member.to_string(),
            })?;
        let before = obs
            .observed
            .members
            .iter()
            .find(|m| m.name == member)
            .map(|m| m.db.size)
            .unwrap_or_default();
        let started = Instant::now();
        self.clients.defragment(&url).await?;
        self.db
            .defragmented
            .insert(member.to_string(), Instant::now());
        let after = self
            .clients
            .status(&url)
            .await
            .map(|s| s.db_size)
            .unwrap_or_default();
        tracing::info!(
            cluster = %self.name, %member,
            "defragmented in {:?}: database file {} KiB -> {} KiB",
            started.elapsed(), before >> 10, after >> 10
        );
        Ok(())
    }

    /// Forgets what was known of a member that leaves the cluster.
    pub(super) fn forget_db(&mut self, member: &str) {
        self.db.hashes.remove(member);
        self.db.defragmented.remove(member);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alarm_looks_slow_down_only_while_the_log_stands_still() {
        let p = ALARM_POLL;
        // Unknown index (no answer, first look): the short period.
        assert_eq!(next_alarm_poll(p * 4, None, Some(7)), ALARM_POLL);
        assert_eq!(next_alarm_poll(p * 4, Some(7), None), ALARM_POLL);
        // Still: doubling, capped.
        assert_eq!(next_alarm_poll(p, Some(7), Some(7)), p * 2);
        assert_eq!(next_alarm_poll(p * 2, Some(7), Some(7)), ALARM_POLL_STILL);
        assert_eq!(
            next_alarm_poll(ALARM_POLL_STILL, Some(7), Some(7)),
            ALARM_POLL_STILL
        );
        // A write moved it: back to the short period at once.
        assert_eq!(
            next_alarm_poll(ALARM_POLL_STILL, Some(7), Some(8)),
            ALARM_POLL
        );
    }
}
