//! Observe: what the platform runs plus what etcd says, joined by peer URL
//! into the plan's [`Observed`] and the members of the status.

use std::collections::HashSet;
use std::time::Instant;

use futures::future::join_all;

use crate::crd::MemberStatus;
use crate::etcd::{self, Clients, ListedMember};
use crate::plan::{DbFacts, EtcdMember, Member, Observed, Position, Runtime, TlsState};
use crate::platform::{self, ClusterRecord, Platform, PlatformMember};
use crate::tls::{ClientTls, is_https, same_endpoint, url_host};

mod lists;
pub use self::lists::{LIST_SETTLE, ListCache, ListedAt};

/// One observation of a cluster.
#[derive(Clone, Debug, Default)]
pub struct Observation {
    /// The plan's input.
    pub observed: Observed,
    /// Members for the status, in name order.
    pub members: Vec<MemberStatus>,
    /// What the platform runs.
    pub platform: Vec<PlatformMember>,
    /// etcd's member list, when it was read.
    pub listed: Option<Vec<ListedMember>>,
    /// Client URL of a member that answered with a leader (the leader
    /// itself when it answered); membership changes are sent there.
    pub api_url: Option<String>,
    /// Name of the leader.
    pub leader: Option<String>,
    /// The newest raft term a member that knows a leader reported.
    pub leader_term: Option<u64>,
    /// The version every member reports, when they agree.
    pub current_version: Option<String>,
    /// The highest store revision a member reported.
    pub revision: Option<i64>,
    /// The store revision each member that answered reported.
    pub member_revisions: Vec<(String, i64)>,
    /// Every member asked refused the TLS handshake (its trusted CAs and
    /// the operator's client certificate, or the other way round, do not
    /// match): one of their errors. Nothing can be judged about quorum then.
    pub tls_refused: Option<String>,
}

/// One of the TLS refusals when every member that was asked refused the
/// TLS handshake (`None` when any answered, or failed another way).
fn tls_refusal(answers: &[Option<etcd::Result<etcd::MemberStatus>>]) -> Option<String> {
    let asked: Vec<&etcd::Result<etcd::MemberStatus>> = answers.iter().flatten().collect();
    let refused = |a: &&etcd::Result<etcd::MemberStatus>| matches!(a, Err(e) if matches!(e.kind, etcd::ErrorKind::TlsRefused(_)));
    if asked.is_empty() || !asked.iter().all(refused) {
        return None;
    }
    asked
        .first()
        .and_then(|a| a.as_ref().err())
        .map(ToString::to_string)
}

impl Observation {
    /// Number of ready members.
    pub fn ready(&self) -> usize {
        self.members.iter().filter(|m| m.ready).count()
    }

    /// Where the operator calls member `name` (its `call_url`), if the
    /// platform runs it and it can be reached.
    pub fn call_url(&self, name: &str) -> Option<&str> {
        let m = self.platform.iter().find(|p| p.addr.name == name)?;
        m.call_url.as_deref()
    }

    /// The platform's member with this peer URL.
    pub fn on_platform(&self, peer_url: &str) -> Option<&PlatformMember> {
        self.platform
            .iter()
            .find(|p| same_endpoint(&p.addr.peer_url, peer_url))
    }
}

/// Observes `cluster`. `crash_looping` names members whose data is no
/// longer trusted because they keep dying right after start; `tls` is the
/// operator's client certificate for members with `https://` URLs; `lists`
/// the member list last read, reused while it cannot have changed.
pub async fn observe<P: Platform>(
    platform: &P,
    clients: &Clients,
    lists: &mut ListCache,
    cluster: &str,
    record: &ClusterRecord,
    crash_looping: &HashSet<String>,
    tls: Option<&ClientTls>,
) -> platform::Result<Observation> {
    let pm = platform.members(cluster).await?;
    if let Some(tls) = tls {
        for m in &pm {
            register_tls(clients, tls, m.call_url.as_deref(), &m.addr.client_url);
        }
    }
    // The operator's own calls go to `call_url` (a pod's IP on
    // Kubernetes); the status publishes `client_url`.
    let answers: Vec<Option<etcd::Result<etcd::MemberStatus>>> =
        join_all(pm.iter().map(|m| async {
            match &m.call_url {
                Some(url) if m.running => Some(clients.status(url).await),
                _ => None,
            }
        }))
        .await;
    let tls_refused = tls_refusal(&answers);
    let statuses: Vec<Option<etcd::MemberStatus>> = answers
        .into_iter()
        .map(|a| a.and_then(Result::ok))
        .collect();
    // A member that runs but does not answer on its client port may be
    // waiting for a quorum to publish itself (restarted after a quorum
    // loss): its metrics still say how far its log goes. A paused or cut
    // off member answers neither.
    let metered: Vec<Option<Position>> =
        join_all(pm.iter().zip(&statuses).map(|(m, s)| async move {
            match (&m.metrics_url, s) {
                (Some(url), None) if m.running => crate::member::metrics::position(url).await,
                _ => None,
            }
        }))
        .await;

    // The leader as the member with the newest term sees it.
    let leader_id = statuses
        .iter()
        .flatten()
        .filter(|s| s.leader != 0)
        .max_by_key(|s| s.raft_term)
        .map(|s| s.leader);
    let answering = pm.iter().zip(&statuses).filter_map(|(m, s)| {
        let url = m.call_url.clone()?;
        s.as_ref().filter(|s| s.leader != 0).map(|s| {
            let at = ListedAt {
                id: s.id,
                term: s.raft_term,
                index: s.raft_index,
            };
            (url, at)
        })
    });
    let mut sources: Vec<(String, ListedAt)> = answering.collect();
    sources.sort_by_key(|(_, at)| Some(at.id) != leader_id);
    let mut listed = None;
    let mut api_url = None;
    let now = Instant::now();
    for (url, at) in &sources {
        let list = match lists.reuse(url, *at) {
            Some(list) => Ok(list),
            None => clients.member_list(url).await,
        };
        if let Ok(list) = list {
            lists.keep(url, *at, now, &list);
            api_url = Some(url.clone());
            listed = Some(list);
            break;
        }
    }
    let known = listed.is_some();
    // The alarms, as the member that gave the member list reported them in
    // its Status (etcd's `alarm list` is a raft proposal: asked every pass
    // of every cluster, it wrote the WAL of every member each time).
    let alarms = api_url
        .as_deref()
        .and_then(|url| {
            pm.iter()
                .zip(&statuses)
                .find(|(m, _)| m.call_url.as_deref() == Some(url))
        })
        .and_then(|(_, s)| s.as_ref())
        .map(|s| etcd::alarms_in_status(&s.errors))
        .unwrap_or_default();

    let mut observation = Observation {
        api_url,
        leader_term: statuses
            .iter()
            .flatten()
            .filter(|s| s.leader != 0)
            .map(|s| s.raft_term)
            .max(),
        revision: statuses.iter().flatten().map(|s| s.revision).max(),
        member_revisions: pm
            .iter()
            .zip(&statuses)
            .filter_map(|(m, s)| Some((m.addr.name.clone(), s.as_ref()?.revision)))
            .collect(),
        tls_refused,
        ..Observation::default()
    };
    let mut seen_peers = Vec::new();
    let mut pm = pm;
    for ((m, status), metered) in pm.iter_mut().zip(&statuses).zip(metered) {
        seen_peers.push(m.addr.peer_url.clone());
        // Matched whatever the scheme: a member moving to or from TLS is
        // listed with its old scheme until the list is updated.
        let entry = listed.as_ref().and_then(|l| {
            l.iter().find(|e| {
                e.peer_urls
                    .iter()
                    .any(|u| same_endpoint(u, &m.addr.peer_url))
            })
        });
        let moving = status.as_ref().and_then(|s| not_yet(m.version, &s.version));
        if let Some(note) = &moving {
            m.moving.get_or_insert_with(|| note.clone());
        }
        let healthy = status.as_ref().is_some_and(|s| s.leader != 0)
            && (!known || entry.is_some())
            && moving.is_none();
        let runtime = Runtime {
            running: m.running,
            has_data: m.has_data,
            crash_looping: m.crash_looping || crash_looping.contains(&m.addr.name),
            version: m.version,
            tuning: m.tuning,
            backend: m.backend.clone(),
            pod: m.pod.clone(),
            volume: m.volume.clone(),
            bootstrap: m.bootstrap,
            tls: TlsState {
                files: m.tls.clone(),
                peer_https: is_https(&m.addr.peer_url),
                client_https: is_https(&m.addr.client_url),
            },
            certs_due: false,
        };
        let version = status
            .as_ref()
            .map(|s| s.version.clone())
            .unwrap_or_else(|| m.version.to_string());
        observation.push(
            &m.addr.name,
            Some(runtime),
            entry,
            (leader_id, position(status.as_ref()).or(metered)),
            healthy,
            (&m.addr.client_url, &m.addr.peer_url),
            Some(version),
        );
        if let (Some(v), Some(last)) = (&m.volume, observation.members.last_mut()) {
            let size = v
                .capacity
                .filter(|c| *c >= v.requested)
                .unwrap_or(v.requested);
            last.volume_size = Some(crate::member::volume::size_text(size));
            last.storage_class_name = v.class.clone();
        }
        if let (Some(s), Some(last)) = (status, observation.observed.members.last_mut()) {
            last.db = DbFacts {
                size: s.db_size,
                in_use: s.db_size_in_use,
                ..DbFacts::default()
            };
            // Without the member list a learner still says what it is: it
            // keeps no quorum and seeds no rebuild (plan::lost).
            if !known && s.is_learner {
                last.etcd = Some(EtcdMember {
                    id: s.id,
                    started: true,
                    learner: true,
                    leader: false,
                    peer_https: is_https(&m.addr.peer_url),
                });
            }
        }
    }
    // Members etcd lists that the platform does not have.
    let orphans: Vec<&ListedMember> = listed
        .iter()
        .flatten()
        .filter(|e| {
            !e.peer_urls
                .iter()
                .any(|p| seen_peers.iter().any(|s| same_endpoint(s, p)))
        })
        .collect();
    if let Some(tls) = tls {
        for e in &orphans {
            if let Some(u) = e.client_urls.first() {
                register_tls(clients, tls, Some(u), u);
            }
        }
    }
    let orphan_status = join_all(orphans.iter().map(|e| async {
        match e.client_urls.first() {
            Some(url) => clients.status(url).await.ok(),
            None => None,
        }
    }))
    .await;
    for (e, status) in orphans.iter().zip(orphan_status) {
        let name = if e.name.is_empty() {
            format!("unknown-{:x}", e.id)
        } else {
            e.name.clone()
        };
        // A member this operator created whose process or pod is gone (an
        // emptyDir pod just deleted, its container not yet stopped) may
        // still answer for a moment: it is on its way out and is replaced,
        // not someone else's member to leave alone.
        let healthy =
            status.as_ref().is_some_and(|s| s.leader != 0) && !created(cluster, record, &name);
        let client = e.client_urls.first().cloned().unwrap_or_default();
        let peer = e.peer_urls.first().cloned().unwrap_or_default();
        let at = position(status.as_ref());
        observation.push(
            &name,
            None,
            Some(e),
            (leader_id, at),
            healthy,
            (&client, &peer),
            status.map(|s| s.version),
        );
    }
    observation
        .members
        .sort_by(|a, b| crate::plan::member_order(&a.name, &b.name));
    let versions: HashSet<&str> = observation
        .members
        .iter()
        .filter_map(|m| m.version.as_deref())
        .collect();
    if versions.len() == 1 {
        observation.current_version = versions.into_iter().next().map(str::to_string);
    }
    observation.observed.db.alarms = alarms;
    observation.observed.db.revision = observation.revision.unwrap_or_default();
    observation.observed.bootstrapped = record.bootstrapped || known;
    observation.observed.membership_known = known;
    observation.observed.voters_hint = if known {
        observation
            .observed
            .members
            .iter()
            .filter(|m| m.etcd.is_some_and(|e| !e.learner))
            .count()
    } else {
        record.last_voters
    };
    observation.observed.reseeding = record.reseeding.clone();
    observation.observed.not_serving = pm
        .iter()
        .filter(|m| m.pod_ready == Some(false))
        .map(|m| m.addr.name.clone())
        .collect();
    observation.platform = pm;
    observation.listed = listed;
    Ok(observation)
}

/// Registers the operator's client certificate for a member reached at
/// `call_url`, checking its certificate against the host of its published
/// `client_url` when the two differ (a pod reached at its IP).
fn register_tls(clients: &Clients, tls: &ClientTls, call_url: Option<&str>, client_url: &str) {
    let Some(call) = call_url.filter(|u| is_https(u)) else {
        return;
    };
    let name = url_host(client_url).filter(|h| Some(*h) != url_host(call));
    clients.set_tls(call, Some(tls.with_server_name(name.map(str::to_string))));
}

/// Whether `member` is a name this operator gave in `cluster`
/// (`CLUSTER-N` below the record's next index).
fn created(cluster: &str, record: &ClusterRecord, member: &str) -> bool {
    let n = member
        .strip_prefix(cluster)
        .and_then(|r| r.strip_prefix('-'));
    let n = n.and_then(|n| n.parse::<u32>().ok());
    n.is_some_and(|n| n < record.next_index) || record.initial.iter().any(|a| a.name == member)
}

/// Why a member that answers does not count yet: etcd reports another
/// version than the one the platform runs it at. Right after an upgrade
/// step the old process may still answer (a kubelet takes hundreds of
/// milliseconds to swap a container), and a member counts as moved only
/// once etcd itself reports the new version. `None` when they agree, or
/// when etcd's answer is no version.
pub fn not_yet(platform: crate::version::Version, reported: &str) -> Option<String> {
    let reported: crate::version::Version = reported.parse().ok()?;
    (reported != platform).then(|| {
        format!("etcd answers as {reported}, not yet as {platform}: the member is being moved")
    })
}

impl Observation {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        name: &str,
        platform: Option<Runtime>,
        entry: Option<&ListedMember>,
        (leader_id, position): (Option<u64>, Option<Position>),
        healthy: bool,
        (client_url, peer_url): (&str, &str),
        version: Option<String>,
    ) {
        let etcd = entry.map(|e| EtcdMember {
            id: e.id,
            started: !e.name.is_empty(),
            learner: e.is_learner,
            leader: Some(e.id) == leader_id,
            peer_https: e.peer_urls.first().is_some_and(|u| is_https(u)),
        });
        let leader = etcd.is_some_and(|e| e.leader);
        if leader {
            self.leader = Some(name.to_string());
        }
        self.members.push(MemberStatus {
            name: name.to_string(),
            id: etcd.map(|e| format!("{:x}", e.id)),
            client_url: client_url.to_string(),
            peer_url: peer_url.to_string(),
            ready: healthy,
            leader,
            learner: etcd.is_some_and(|e| e.learner),
            version,
            volume_size: None,
            storage_class_name: None,
        });
        self.observed.members.push(Member {
            name: name.to_string(),
            platform,
            etcd,
            healthy,
            db: DbFacts::default(),
            position,
        });
    }
}

/// How far a member's log goes, from its status.
fn position(status: Option<&etcd::MemberStatus>) -> Option<Position> {
    status.map(|s| Position {
        raft_index: s.raft_index,
        revision: s.revision,
    })
}

#[cfg(test)]
mod tests;
