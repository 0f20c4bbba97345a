//! What a reconcile pass keeps from an observation: the facts a later
//! quorum loss must know (in the cluster's record), and the metrics
//! (leader changes, members, how long members were not all ready).

use std::time::Instant;

use super::{Cluster, STATUS_REFRESH};
use crate::observe::Observation;
use crate::platform::Platform;

impl<P: Platform> Cluster<P> {
    /// Keeps what a later quorum loss must know: that the cluster formed,
    /// its number of voters, and the highest revision seen.
    pub(super) async fn remember(&mut self, obs: &Observation) {
        let mut dirty = false;
        if obs.observed.membership_known && !self.record.bootstrapped {
            self.record.bootstrapped = true;
            self.restore_done().await;
            dirty = true;
        }
        if obs.observed.membership_known && obs.observed.voters_hint != self.record.last_voters {
            self.record.last_voters = obs.observed.voters_hint;
            dirty = true;
        }
        if let Some(rev) = obs.revision
            && rev > self.record.last_revision
        {
            self.record.last_revision = rev;
            self.record.last_revision_ms = crate::backup::follow::now_ms();
            let stale = self
                .revision_saved
                .is_none_or(|t| t.elapsed() >= STATUS_REFRESH);
            dirty |= stale;
        }
        if dirty {
            // A standby's progress too: an operator restarted while it is
            // out of reach starts from about here, not from its bootstrap.
            if let Some(a) = &self.standby {
                let now = a.status();
                if now.state != crate::standby::state::PROMOTED {
                    self.record.standby = Some(now);
                }
            }
            self.revision_saved = Some(Instant::now());
            self.save_record().await;
        }
    }

    /// Leader changes, members, and how long members were not all ready.
    /// A leader change is a new leader or a newer term: a killed leader
    /// restarted fast enough can win the election that follows, and that
    /// election counts too.
    pub(super) fn measure(&mut self, obs: &Observation) {
        if let Some(leader) = &obs.leader {
            let term = obs.leader_term.unwrap_or(0);
            if let Some((last, last_term)) = &self.last_leader
                && (last != leader || term > *last_term)
            {
                self.metrics.leader_changed();
            }
            self.last_leader = Some((leader.clone(), term));
        }
        let members = &obs.observed.members;
        let voting = members
            .iter()
            .filter(|m| m.etcd.is_some_and(|e| !e.learner));
        let learners = members.iter().filter(|m| m.etcd.is_some_and(|e| e.learner));
        self.metrics
            .members(obs.ready(), voting.count(), learners.count());
        if !obs.observed.bootstrapped {
            return;
        }
        let all_ready = obs.observed.membership_known && obs.ready() == obs.members.len();
        self.formed |= all_ready;
        match (all_ready, self.unready_since) {
            (false, None) => self.unready_since = Some(Instant::now()),
            (true, Some(since)) => {
                self.metrics.recovered(since.elapsed());
                self.unready_since = None;
            }
            _ => {}
        }
    }
}
