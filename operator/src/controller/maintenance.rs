//! The controller's side of database maintenance: the facts the plan needs
//! that only the controller can know (the last compaction, the KV hashes of
//! the last hash check, whose scheduled defragmentation is due), and the
//! compaction, defragmentation and disarm steps themselves (a NOSPACE
//! alarm is cleared in one step: compact, defragment each member, disarm).
//!
//! The hash check runs every [`HASH_CHECK_INTERVAL`] while every member is
//! healthy (and at once when etcd lists a CORRUPT alarm): each member's
//! HashKV at the lowest revision any of them reported, so all of them can
//! answer for the same revision.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::future::join_all;

use super::act::Error;
use super::alarm_poll::Seen;
use super::{Cluster, SpecState};
use crate::observe::Observation;
use crate::plan::{Alarm, AlarmKind, KvHash, Observed, room_again};
use crate::platform::Platform;

/// Time between two KV hash checks of a healthy cluster.
pub const HASH_CHECK_INTERVAL: Duration = Duration::from_secs(10);
/// [`Cluster::hash_check_due`] once it knows whether the last check is
/// `stale` and whether it has `no_hashes`.
fn hash_check_due(o: &Observed, stale: bool, no_hashes: bool) -> bool {
    let settled = o.membership_known && o.members.iter().all(|m| m.healthy);
    let alarm = |kind| o.db.alarms.iter().any(|a: &Alarm| a.kind == kind);
    let corrupt = alarm(AlarmKind::Corrupt) && no_hashes;
    settled && (corrupt || (stale && !alarm(AlarmKind::NoSpace)))
}

/// What one look at a cluster's alarms saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AlarmLook {
    /// etcd raised an alarm the last pass did not see.
    pub raised: bool,
    /// The raft index and database size of the member asked, when it
    /// answered.
    pub seen: Option<Seen>,
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
    /// last pass its member list, when that pass saw no alarm (its name
    /// and URL).
    alarm_member: Option<(String, String)>,
    /// The quota the members ran with at the last pass
    /// ([`crate::plan::running_quota`]); `None` before one knew.
    running_quota: Option<i64>,
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
            alarm_member: None,
            running_quota: None,
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
        let api = obs.api_url.as_deref();
        let asked = obs
            .platform
            .iter()
            .find(|p| api.is_some() && p.call_url.as_deref() == api);
        self.db.running_quota = crate::plan::running_quota(&obs.observed.members);
        self.db.alarm_member = asked
            .filter(|_| obs.observed.db.alarms.is_empty())
            .and_then(|p| Some((p.addr.name.clone(), p.call_url.clone()?)));
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
    /// the local platform's task asks this between passes, as often as
    /// [`super::alarm_poll::next_alarm_poll`] says (often while writes fill
    /// a database near its quota, seldom while the log stands still), and
    /// passes at once on a yes. Not raised when the last pass saw
    /// alarms (the plan is on them), knew no member to ask, or the member
    /// does not answer.
    pub async fn look_for_alarms(&self) -> AlarmLook {
        let Some((_, url)) = &self.db.alarm_member else {
            return AlarmLook::default();
        };
        match self.clients.status(url).await {
            Ok(s) => AlarmLook {
                raised: !crate::etcd::alarms_in_status(&s.errors).is_empty(),
                seen: Some(Seen {
                    raft_index: s.raft_index,
                    db_size: u64::try_from(s.db_size).unwrap_or(0),
                }),
            },
            Err(_) => AlarmLook::default(),
        }
    }

    /// The member [`Self::look_for_alarms`] asks, if any.
    pub fn alarm_member(&self) -> Option<&str> {
        self.db.alarm_member.as_ref().map(|(name, _)| name.as_str())
    }

    /// The backend quota etcd enforces on this cluster's members: the one
    /// they ran with at the last pass, which is not the spec's while a
    /// changed quota is rolled out (before any pass: the spec's, etcd's
    /// default when the spec sets none or is not valid).
    pub fn quota(&self) -> u64 {
        u64::try_from(self.quota_bytes()).unwrap_or(0)
    }

    fn quota_bytes(&self) -> i64 {
        self.db.running_quota.unwrap_or(match &self.spec {
            SpecState::Valid { spec, .. } => spec.backend.quota(),
            SpecState::Invalid { .. } => crate::member::backend::DEFAULT_QUOTA,
        })
    }

    /// Whether the KV hashes are checked in this pass: every
    /// [`HASH_CHECK_INTERVAL`] while every member is healthy, at once on a
    /// CORRUPT alarm; not while a NOSPACE alarm stands (refusing writes):
    /// the pass that clears it would first wait for every member to hash
    /// its whole keyspace, and the check comes in the pass after.
    fn hash_check_due(&self, obs: &Observation) -> bool {
        let stale = self
            .db
            .checked
            .is_none_or(|t| t.elapsed() >= HASH_CHECK_INTERVAL);
        hash_check_due(&obs.observed, stale, self.db.hashes.is_empty())
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

    /// Clears a NOSPACE alarm in one go ([`crate::plan::Step::ClearNoSpace`]):
    /// compacts the history to `compact_to` and waits for every member of
    /// `defrag_order` to have applied it ([`Self::compact_everywhere`]),
    /// defragments those members one at a time in that order (stopping at
    /// the first error), then disarms the alarms of `disarm` if every
    /// database file is below the plan's disarm line now ([`room_again`],
    /// with each defragmented member's size asked once, all at the same
    /// time). The next pass observes what came of it.
    pub(super) async fn clear_nospace(
        &mut self,
        obs: &Observation,
        compact_to: Option<i64>,
        defrag_order: &[String],
        disarm: &[Alarm],
    ) -> Result<(), Error> {
        let started = Instant::now();
        self.compact_everywhere(obs, compact_to, defrag_order)
            .await?;
        for member in defrag_order {
            self.defragment(obs, member).await?;
        }
        if disarm.is_empty() {
            return Ok(());
        }
        let Some(largest) = self.largest_db(obs, defrag_order).await else {
            // A member did not say: the next pass looks again.
            return Ok(());
        };
        // The quota the members run with, as the plan judged: disarmed
        // below the spec's while they still run a smaller one, etcd raises
        // NOSPACE again at the next write.
        let quota =
            crate::plan::running_quota(&obs.observed.members).unwrap_or_else(|| self.quota_bytes());
        if !room_again(largest, quota) {
            tracing::info!(
                cluster = %self.name,
                "the NOSPACE alarm stays: the largest database file is {} KiB of a {} KiB quota \
                 after compaction and defragmentation",
                largest >> 10, quota >> 10
            );
            return Ok(());
        }
        let api = obs.api_url.as_deref().ok_or(Error::NoLeader)?;
        for alarm in disarm {
            self.clients.disarm(api, *alarm).await?;
        }
        tracing::info!(
            cluster = %self.name,
            "NOSPACE alarm disarmed: compacted and defragmented in {:?}, the largest database \
             file is {} KiB of a {} KiB quota",
            started.elapsed(), largest >> 10, quota >> 10
        );
        Ok(())
    }

    /// Compacts the history to `compact_to` (when given) and returns once
    /// each member of `members` has applied the compaction (the one to
    /// `compact_to`, else the last the operator made) to its own database
    /// file: the same compaction asked of each of them and of the member
    /// that answers for the cluster, all at the same time.
    ///
    /// etcd compacts in the background on each member, and a physical
    /// compaction waits only on the member asked; a follower defragmented
    /// before its compaction finished keeps the history in its file, and
    /// the pages freed afterwards count as in use until a later write
    /// commits (none comes under NOSPACE), so the plan would see the keys
    /// filling the quota and wait for ever. Asked of the member itself,
    /// the compaction is a barrier: whichever of the requests raft orders
    /// first compacts, every member applies it, and etcd answers each of
    /// the others ("compacted already") once that member's compaction
    /// queued before it is done. Asked together they cost one raft round,
    /// not one before each defragmentation.
    async fn compact_everywhere(
        &mut self,
        obs: &Observation,
        compact_to: Option<i64>,
        members: &[String],
    ) -> Result<(), Error> {
        let started = Instant::now();
        let revision = compact_to.unwrap_or(self.db.compacted);
        if revision <= 0 {
            return Ok(());
        }
        let mut urls = Vec::new();
        if compact_to.is_some() {
            urls.push(obs.api_url.as_deref().ok_or(Error::NoLeader)?);
        }
        for member in members {
            let url = self.member_url(obs, member)?;
            if !urls.contains(&url) {
                urls.push(url);
            }
        }
        let clients = &self.clients;
        let answers = join_all(urls.iter().map(|url| clients.compact(url, revision))).await;
        if compact_to.is_some() && answers.iter().any(Result::is_ok) {
            // Applied by raft: no member goes back on it.
            self.db.compacted = self.db.compacted.max(revision);
        }
        answers.into_iter().collect::<Result<Vec<()>, _>>()?;
        if compact_to.is_some() {
            tracing::info!(
                cluster = %self.name, revision,
                "compacted the history, applied by {} members, in {:?}",
                urls.len(), started.elapsed()
            );
        }
        Ok(())
    }

    /// Where to call `member`, or the platform's error naming it.
    fn member_url<'o>(&self, obs: &'o Observation, member: &str) -> Result<&'o str, Error> {
        obs.call_url(member).ok_or_else(|| {
            crate::platform::Error::NoMember {
                cluster: self.name.clone(),
                member: member.to_string(),
            }
            .into()
        })
    }

    /// The largest database file now: the members of `defragmented` asked
    /// (all at the same time), the others as observed. `None` when one
    /// asked does not answer.
    async fn largest_db(&self, obs: &Observation, defragmented: &[String]) -> Option<i64> {
        let clients = &self.clients;
        let asked = join_all(defragmented.iter().map(|member| async move {
            let url = obs.call_url(member)?;
            clients.status(url).await.ok().map(|s| s.db_size)
        }))
        .await;
        let others = obs
            .observed
            .members
            .iter()
            .filter(|m| !defragmented.contains(&m.name))
            .map(|m| Some(m.db.size));
        asked
            .into_iter()
            .chain(others)
            .try_fold(0, |largest, size| size.map(|s| largest.max(s)))
    }

    /// Defragments one member, and notes when. Logged with what is known
    /// without asking again: its file's size when observed, and the time.
    pub(super) async fn defragment(
        &mut self,
        obs: &Observation,
        member: &str,
    ) -> Result<(), Error> {
        let url = self.member_url(obs, member)?.to_string();
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
        tracing::info!(
            cluster = %self.name, %member,
            "defragmented in {:?} (database file {} KiB before)",
            started.elapsed(), before >> 10
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

    fn with_alarms(kinds: &[AlarmKind]) -> Observed {
        let mut o = Observed {
            membership_known: true,
            ..Observed::default()
        };
        o.db.alarms = kinds
            .iter()
            .map(|&kind| Alarm { member: 1, kind })
            .collect();
        o
    }

    #[test]
    fn no_hash_check_while_nospace_refuses_writes() {
        assert!(hash_check_due(&with_alarms(&[]), true, false));
        assert!(!hash_check_due(&with_alarms(&[]), false, false));
        let nospace = with_alarms(&[AlarmKind::NoSpace]);
        assert!(!hash_check_due(&nospace, true, true));
        assert!(!hash_check_due(&nospace, true, false));
        // A CORRUPT alarm still gets its check at once, NOSPACE or not.
        let both = with_alarms(&[AlarmKind::NoSpace, AlarmKind::Corrupt]);
        assert!(hash_check_due(&both, false, true));
        assert!(hash_check_due(
            &with_alarms(&[AlarmKind::Corrupt]),
            false,
            true
        ));
        let unknown = Observed::default();
        assert!(!hash_check_due(&unknown, true, true));
    }
}
