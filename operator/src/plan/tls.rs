//! TLS in the plan: turning peer and client TLS on or off one member at a
//! time, and restarting members whose trusted CAs changed.
//!
//! A member's next TLS state depends on where every member stands, so a
//! change moves in stages, each a rolling restart:
//!
//! * peer on: every member first gets its peer files while its peer URL
//!   stays `http://` (etcd then dials peers that moved with its
//!   certificate); then, member by member, its peer URL goes `https://`
//!   (restart, then etcd's member list is updated). Off is the reverse:
//!   URLs back to `http://` first, the files go once no peer URL is
//!   `https://`.
//! * client on or off: one restart per member with its client URL's new
//!   scheme (merged with the peer stage's restart). A client of that member
//!   reconnects to the URL the status now publishes; the other members
//!   serve meanwhile. (etcd can list `http://` and `https://` on one port,
//!   but then serves gRPC on only one of them, whichever of its two
//!   listeners registers first: measured here with 3.4.23, so a member
//!   never serves both.)
//! * trust: etcd reads its CA files only at start, so a member started
//!   with other CAs than the cluster's is restarted.
//!
//! Each restart takes a voter away for a moment: like an upgrade, it is
//! done only when every member is healthy and a voter can be spared.

use super::{Member, Step, TlsState, TlsWanted, View, Wait, quorum};

/// What member `m` runs next, given the TLS state of every member.
pub fn target(w: &TlsWanted, m: &TlsState, all: &[&TlsState]) -> TlsState {
    let mut next = m.clone();
    // Peer.
    if w.peer {
        if !m.files.peer {
            next.files.peer = true;
        } else if !m.peer_https && all.iter().all(|o| o.files.peer) {
            next.peer_https = true;
        }
    } else if m.peer_https {
        next.peer_https = false;
    } else if m.files.peer && !all.iter().any(|o| o.peer_https) {
        next.files.peer = false;
    }
    // Client.
    next.files.client = w.client;
    next.client_https = w.client;
    // Trust: members with TLS files trust the cluster's CAs.
    next.files.trust = if next.files.peer || next.files.client {
        w.trust.clone()
    } else {
        String::new()
    };
    next
}

/// The TLS state a new member starts with, given the members there are:
/// the spec's, where the cluster stands already; else the stage the
/// cluster is in, so it joins without stopping a change half-way.
pub fn for_new_member(w: &TlsWanted, all: &[&TlsState]) -> TlsState {
    if all.is_empty() {
        let mut s = TlsState::default();
        s.files.peer = w.peer;
        s.peer_https = w.peer;
        s.files.client = w.client;
        s.client_https = w.client;
        s.files.trust = if w.peer || w.client {
            w.trust.clone()
        } else {
            String::new()
        };
        return s;
    }
    let any_peer_files = all.iter().any(|o| o.files.peer);
    let any_peer_https = all.iter().any(|o| o.peer_https);
    let all_peer_https = all.iter().all(|o| o.peer_https);
    let mut s = TlsState::default();
    // It dials peers with https URLs with its certificate; it listens on
    // https only once every peer does (they dial it with theirs).
    s.files.peer = w.peer || any_peer_files || any_peer_https;
    s.peer_https = all_peer_https && (w.peer || any_peer_https);
    s.files.client = w.client;
    s.client_https = w.client;
    s.files.trust = if s.files.peer || s.files.client {
        w.trust.clone()
    } else {
        String::new()
    };
    s
}

impl View<'_> {
    /// A member whose peer URL in etcd's list has another scheme than it
    /// listens on (a TLS change cut short after its restart): the list is
    /// set to what it runs.
    pub(super) fn peer_url_mismatch(&self) -> Option<Step> {
        self.members.iter().find_map(|m| {
            let (p, e) = (m.platform.as_ref()?, m.etcd?);
            (p.tls.peer_https != e.peer_https && p.running).then(|| Step::UpdatePeerUrl {
                member: m.name.clone(),
                id: e.id,
                https: p.tls.peer_https,
            })
        })
    }

    /// The TLS state of every member the platform runs.
    fn tls_states(&self) -> Vec<&TlsState> {
        self.members
            .iter()
            .filter_map(|m| m.platform.as_ref().map(|p| &p.tls))
            .collect()
    }

    /// Whether `m` still has a TLS restart ahead of it at this stage (a
    /// handover prefers a voter without one).
    pub(super) fn tls_behind(&self, w: &TlsWanted, m: &Member) -> bool {
        let states = self.tls_states();
        m.platform
            .as_ref()
            .is_some_and(|p| target(w, &p.tls, &states) != p.tls)
    }

    /// The next TLS restart, followers first, then the leader (after a
    /// handover, see [`super::plan`]); every member is healthy when this is
    /// asked.
    pub(super) fn tls_change(&self, w: &TlsWanted) -> Option<Step> {
        let states = self.tls_states();
        let behind: Vec<(&Member, TlsState)> = self
            .members
            .iter()
            .filter_map(|m| {
                let p = m.platform.as_ref()?;
                let next = target(w, &p.tls, &states);
                (next != p.tls).then_some((m, next))
            })
            .collect();
        let (m, to) = behind
            .iter()
            .find(|(m, _)| !m.etcd.is_some_and(|e| e.leader))
            .or_else(|| behind.first())?;
        if self.healthy_voters < 1 + quorum(self.voters) {
            return Some(Step::Wait(Wait::RestartNeedsThreeMembers));
        }
        Some(Step::Reconfigure {
            member: m.name.clone(),
            id: m.etcd.map(|e| e.id).unwrap_or_default(),
            to: to.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted(peer: bool, client: bool) -> TlsWanted {
        TlsWanted {
            peer,
            client,
            trust: if peer || client {
                "t1".into()
            } else {
                String::new()
            },
        }
    }

    /// Runs the rolling change over `n` members from `start` to `w`,
    /// checking at every restart that no member listens on https for
    /// peers while another cannot dial it, and no member drops its peer
    /// files while a peer still needs them; returns the restarts taken.
    fn roll(n: usize, start: TlsState, w: &TlsWanted) -> (Vec<TlsState>, usize) {
        let mut members = vec![start; n];
        let mut restarts = 0;
        loop {
            let snapshot = members.clone();
            let all: Vec<&TlsState> = snapshot.iter().collect();
            let Some(i) = (0..n).find(|&i| target(w, &snapshot[i], &all) != snapshot[i]) else {
                return (members, restarts);
            };
            members[i] = target(w, &snapshot[i], &all);
            restarts += 1;
            assert!(restarts <= 4 * n, "no convergence: {members:?}");
            let https_peer = members.iter().any(|m| m.peer_https);
            assert!(
                !https_peer || members.iter().all(|m| m.files.peer),
                "a member cannot dial an https peer: {members:?}"
            );
            for m in &members {
                assert!(
                    !m.client_https || m.files.client,
                    "https client URL without files"
                );
                assert!(
                    !m.peer_https || m.files.peer,
                    "https peer URL without files"
                );
            }
        }
    }

    fn settled(w: &TlsWanted) -> TlsState {
        for_new_member(w, &[])
    }

    #[test]
    fn turning_tls_on_and_off_takes_two_rolling_restarts_each_way() {
        let off = wanted(false, false);
        let on = wanted(true, true);
        let (done, restarts) = roll(3, settled(&off), &on);
        assert!(done.iter().all(|m| *m == settled(&on)), "{done:?}");
        assert_eq!(restarts, 6);
        let (done, restarts) = roll(3, settled(&on), &off);
        assert!(done.iter().all(|m| *m == settled(&off)), "{done:?}");
        assert_eq!(restarts, 6);
        // One side at a time.
        for w in [wanted(true, false), wanted(false, true)] {
            let (done, _) = roll(3, settled(&off), &w);
            assert!(done.iter().all(|m| *m == settled(&w)), "{w:?}: {done:?}");
            let (done, _) = roll(5, settled(&on), &w);
            assert!(done.iter().all(|m| *m == settled(&w)), "{w:?}: {done:?}");
        }
    }

    #[test]
    fn new_trust_restarts_each_member_once() {
        let mut w = wanted(true, true);
        let (_, restarts) = roll(3, settled(&w), &w);
        assert_eq!(restarts, 0);
        let old = settled(&w);
        w.trust = "t2".into();
        let (done, restarts) = roll(3, old, &w);
        assert_eq!(restarts, 3);
        assert!(done.iter().all(|m| m.files.trust == "t2"));
    }

    #[test]
    fn a_member_joining_mid_change_fits_the_stage() {
        let on = wanted(true, true);
        let off = settled(&wanted(false, false));
        // Half-way: one member has its files, the others not yet.
        let half = target(&on, &off, &[&off, &off]);
        let new = for_new_member(&on, &[&half, &off]);
        assert!(new.files.peer && !new.peer_https, "{new:?}");
        assert!(new.files.client && new.client_https, "{new:?}");
        // All moved: it starts like them.
        let done = settled(&on);
        assert_eq!(for_new_member(&on, &[&done, &done]), done);
    }
}
