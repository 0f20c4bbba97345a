//! Each member's raft role, asked of etcd itself: every running member's
//! status says which member it follows; the member list maps ids to names.
//! Leader if its id is the leader's, learner if etcd says so, follower
//! otherwise; unknown when no member answers.

use std::collections::HashMap;
use std::time::Duration;

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
