//! Each member's raft role, asked of etcd itself: every running member's
//! status says which member it follows; the member list maps ids to names.
//! Leader if its id is the leader's, learner if etcd says so, follower
//! otherwise; unknown when no member answers.
//!
//! Where etcd cannot be reached (the kube platform from outside the
//! cluster), [`from_status`] takes the roles the operator published in the
//! EtcdCluster's status instead, trusting its leader only while it is
//! fresh and that member still runs the process the status saw.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use etcd_operator::crd::EtcdClusterStatus;
use etcd_operator::etcd::{Clients, MemberStatus};
use etcd_operator::faults::Role;

/// How long one member has to answer. Members are asked at once, so a tick
/// waits at most this long (twice, with the member list) for roles.
pub const STATUS_TIMEOUT: Duration = Duration::from_secs(2);

/// A member to ask: its name and, when it runs, its client URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ask {
    /// Member name (etcd `--name`).
    pub name: String,
    /// Client URL; `None` for a member that is down or paused (not asked).
    pub url: Option<String>,
}

/// The roles of one cluster's members, in the order of `members`.
pub async fn lookup(clients: &Clients, members: &[Ask]) -> Vec<Role> {
    let asks = members.iter().map(|m| async move {
        match &m.url {
            Some(url) => clients.status(url).await.ok().map(|s| (url.clone(), s)),
            None => None,
        }
    });
    let answers: Vec<Option<(String, MemberStatus)>> = futures::future::join_all(asks).await;
    // The leader of the newest term anyone knows of.
    let Some((url, newest)) = answers
        .iter()
        .flatten()
        .filter(|(_, s)| s.leader != 0)
        .max_by_key(|(_, s)| s.raft_term)
    else {
        return members
            .iter()
            .zip(&answers)
            .map(|(_, a)| match a {
                Some((_, s)) if s.is_learner => Role::Learner,
                _ => Role::Unknown,
            })
            .collect();
    };
    let leader = newest.leader;
    let by_name: HashMap<String, (u64, bool)> = match clients.member_list(url).await {
        Ok(list) => list
            .into_iter()
            .filter(|m| !m.name.is_empty())
            .map(|m| (m.name, (m.id, m.is_learner)))
            .collect(),
        Err(e) => {
            tracing::debug!("member list via {url}: {e}");
            HashMap::new()
        }
    };
    members
        .iter()
        .zip(&answers)
        .map(|(m, answer)| {
            let (id, learner) = match (answer, by_name.get(&m.name)) {
                (Some((_, s)), _) => (s.id, s.is_learner),
                (None, Some(&(id, learner))) => (id, learner),
                (None, None) => return Role::Unknown,
            };
            role_of(id, learner, leader)
        })
        .collect()
}

/// Where a member's role came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RoleSource {
    /// etcd itself (its status and member list).
    Etcd,
    /// The operator's published status of the cluster (`EtcdCluster`
    /// `.status.members[].leader`/`.learner`), because etcd did not answer.
    Status,
}

impl RoleSource {
    /// As the fault log writes it (`roleSource`).
    pub fn as_str(self) -> &'static str {
        match self {
            RoleSource::Etcd => "etcd",
            RoleSource::Status => "status",
        }
    }
}

/// How old a published status may be for its leader to be believed: the
/// operator rewrites it at least every few seconds while it runs, so an
/// older one means nobody is watching the cluster (the operator is down)
/// and the leader may have changed since.
pub const STATUS_MAX_AGE: Duration = Duration::from_secs(30);

/// A member as the platform sees it, for judging a published status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Member name.
    pub name: String,
    /// Its process runs (and is not paused by us).
    pub running: bool,
    /// Since when the process runs, when known.
    pub since: Option<SystemTime>,
}

/// The roles `status` gives `members` (in their order), judged at `now`:
/// a learner is a learner; the leader only if the status is at most
/// [`STATUS_MAX_AGE`] old, names exactly one leader, and that member runs
/// and has run since before the status was observed (a member restarted
/// since, or down, is not the leader the status saw). With a believed
/// leader the other voters are followers; without one every voter is
/// unknown (one of them has likely been elected since). Members the status
/// does not list are unknown.
pub fn from_status(status: &EtcdClusterStatus, members: &[Seen], now: SystemTime) -> Vec<Role> {
    let published = |name: &str| {
        let mut found = status.members.iter().filter(|m| m.name == name);
        match (found.next(), found.next()) {
            (Some(m), None) => Some(m),
            _ => None,
        }
    };
    let observed = status
        .observed_at
        .as_deref()
        .and_then(|t| humantime::parse_rfc3339(t.trim()).ok());
    // A status from the future (clocks apart) counts as new.
    let fresh = observed.is_some_and(|t| {
        now.duration_since(t)
            .map_or(true, |age| age <= STATUS_MAX_AGE)
    });
    let claimed: Vec<&str> = status
        .members
        .iter()
        .filter(|m| m.leader && !m.learner)
        .map(|m| m.name.as_str())
        .collect();
    let leader = match claimed.as_slice() {
        [one] if fresh && status.leader.as_deref().is_none_or(|l| l == *one) => members
            .iter()
            .find(|m| m.name == *one)
            .filter(|m| m.running)
            .filter(|m| match (m.since, observed) {
                (Some(since), Some(seen)) => since <= seen,
                _ => true,
            })
            .map(|m| m.name.as_str()),
        _ => None,
    };
    members
        .iter()
        .map(|m| match published(&m.name) {
            None => Role::Unknown,
            Some(p) if p.learner => Role::Learner,
            Some(_) if leader == Some(m.name.as_str()) => Role::Leader,
            Some(_) if leader.is_some() => Role::Follower,
            Some(_) => Role::Unknown,
        })
        .collect()
}

/// Fills the roles etcd left unknown from `published` (the roles
/// [`from_status`] gives, same order); returns where each role came from
/// (`None`: still unknown). When etcd knows a leader, the status cannot
/// name another one.
pub fn fill(roles: &mut [Role], published: &[Role]) -> Vec<Option<RoleSource>> {
    let etcd_leader = roles.contains(&Role::Leader);
    roles
        .iter_mut()
        .zip(
            published
                .iter()
                .copied()
                .chain(std::iter::repeat(Role::Unknown)),
        )
        .map(|(role, from_status)| {
            if *role != Role::Unknown {
                return Some(RoleSource::Etcd);
            }
            if from_status == Role::Unknown || (from_status == Role::Leader && etcd_leader) {
                return None;
            }
            *role = from_status;
            Some(RoleSource::Status)
        })
        .collect()
}

/// Where roles that all came from etcd (or are unknown) came from.
pub fn etcd_sources(roles: &[Role]) -> Vec<Option<RoleSource>> {
    roles
        .iter()
        .map(|r| (*r != Role::Unknown).then_some(RoleSource::Etcd))
        .collect()
}

fn role_of(id: u64, learner: bool, leader: u64) -> Role {
    if learner {
        Role::Learner
    } else if id == leader {
        Role::Leader
    } else {
        Role::Follower
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_from_ids() {
        assert_eq!(role_of(1, false, 1), Role::Leader);
        assert_eq!(role_of(2, false, 1), Role::Follower);
        assert_eq!(role_of(3, true, 1), Role::Learner);
    }

    const T0: u64 = 1_800_000_000;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// A status observed at T0 listing a-0..a-2, a-1 the leader, a-3 a
    /// learner.
    fn status() -> EtcdClusterStatus {
        let member = |i: usize, leader: bool, learner: bool| etcd_operator::crd::MemberStatus {
            name: format!("a-{i}"),
            id: None,
            client_url: String::new(),
            peer_url: String::new(),
            ready: true,
            leader,
            learner,
            version: None,
            volume_size: None,
            storage_class_name: None,
        };
        EtcdClusterStatus {
            members: vec![
                member(0, false, false),
                member(1, true, false),
                member(2, false, false),
                member(3, false, true),
            ],
            leader: Some("a-1".into()),
            observed_at: Some(humantime::format_rfc3339_millis(at(T0)).to_string()),
            ..EtcdClusterStatus::default()
        }
    }

    fn seen(n: usize, since: u64) -> Vec<Seen> {
        (0..n)
            .map(|i| Seen {
                name: format!("a-{i}"),
                running: true,
                since: Some(at(since)),
            })
            .collect()
    }

    use Role::{Follower as F, Leader as L, Learner as R, Unknown as U};

    #[test]
    fn a_fresh_status_names_leader_followers_and_learners() {
        let s = status();
        assert_eq!(from_status(&s, &seen(4, T0 - 60), at(T0 + 5)), [F, L, F, R]);
        // A member the status does not list (just added) is unknown.
        assert_eq!(
            from_status(&s, &seen(5, T0 - 60), at(T0 + 5)),
            [F, L, F, R, U]
        );
        // Clocks apart: a status from the future is new.
        assert_eq!(from_status(&s, &seen(4, T0 - 60), at(T0 - 3)), [F, L, F, R]);
    }

    #[test]
    fn a_stale_leader_is_not_believed_nor_are_its_followers() {
        let s = status();
        let unknown = [U, U, U, R];
        // The leader's pod is down.
        let mut down = seen(4, T0 - 60);
        down[1].running = false;
        assert_eq!(from_status(&s, &down, at(T0 + 1)), unknown);
        // The leader's pod is gone altogether.
        let mut gone = seen(4, T0 - 60);
        gone.remove(1);
        assert_eq!(from_status(&s, &gone, at(T0 + 1)), [U, U, R]);
        // Restarted after the status was observed: not the leader it saw.
        let mut restarted = seen(4, T0 - 60);
        restarted[1].since = Some(at(T0 + 1));
        assert_eq!(from_status(&s, &restarted, at(T0 + 2)), unknown);
        // Too old: the operator stopped publishing.
        let old = at(T0) + STATUS_MAX_AGE + Duration::from_secs(1);
        assert_eq!(from_status(&s, &seen(4, T0 - 60), old), unknown);
        // No time, or one that does not parse: its age is unknown.
        for t in [None, Some("yesterday".to_string()), Some("é".repeat(20))] {
            let s = EtcdClusterStatus {
                observed_at: t,
                ..status()
            };
            assert_eq!(from_status(&s, &seen(4, T0 - 60), at(T0)), unknown);
        }
    }

    #[test]
    fn a_status_that_contradicts_itself_names_no_leader() {
        let mut two = status();
        two.members[0].leader = true;
        assert_eq!(from_status(&two, &seen(4, T0 - 60), at(T0)), [U, U, U, R]);
        let mut other = status();
        other.leader = Some("a-2".into());
        assert_eq!(from_status(&other, &seen(4, T0 - 60), at(T0)), [U, U, U, R]);
        let mut none = status();
        none.members[1].leader = false;
        none.leader = None;
        assert_eq!(from_status(&none, &seen(4, T0 - 60), at(T0)), [U, U, U, R]);
        // A member listed twice is unknown.
        let mut twice = status();
        let dup = twice.members[0].clone();
        twice.members.push(dup);
        assert_eq!(from_status(&twice, &seen(4, T0 - 60), at(T0)), [U, L, F, R]);
    }

    #[test]
    fn fill_keeps_what_etcd_said_and_never_a_second_leader() {
        let mut roles = [U, U, R];
        let sources = fill(&mut roles, &[F, L, F]);
        assert_eq!(roles, [F, L, R]);
        assert_eq!(
            sources,
            [
                Some(RoleSource::Status),
                Some(RoleSource::Status),
                Some(RoleSource::Etcd)
            ]
        );
        // etcd knows a-0 leads; the status's (stale) leader a-1 is not taken.
        let mut roles = [L, U, U];
        let sources = fill(&mut roles, &[F, L, U]);
        assert_eq!(roles, [L, U, U]);
        assert_eq!(sources, [Some(RoleSource::Etcd), None, None]);
        // A shorter published list leaves the rest unknown.
        let mut roles = [U, U];
        assert_eq!(fill(&mut roles, &[R]), [Some(RoleSource::Status), None]);
        assert_eq!(roles, [R, U]);
        assert_eq!(etcd_sources(&[L, U]), [Some(RoleSource::Etcd), None]);
    }

    #[tokio::test]
    async fn nobody_answers_means_unknown() {
        // Port 9 (discard) on loopback: nothing listens there in tests.
        let clients = Clients::new(Duration::from_millis(300));
        let asks = [
            Ask {
                name: "a-0".into(),
                url: Some("http://127.0.0.1:9".into()),
            },
            Ask {
                name: "a-1".into(),
                url: None,
            },
        ];
        assert_eq!(
            lookup(&clients, &asks).await,
            [Role::Unknown, Role::Unknown]
        );
    }
}
