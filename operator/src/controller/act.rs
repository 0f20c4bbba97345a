//! Act: carry out one step of the plan through etcd and the platform.
//!
//! Nothing here assumes a step took effect: the controller observes again
//! after every step, and a step that failed half-way is finished or undone
//! by a later plan (see the plan's rules for strays and unstarted members).

use std::time::{Duration, Instant};

use rand::Rng;

use super::Cluster;
use super::facts::Lost;
use crate::etcd;
use crate::observe::Observation;
use crate::plan::tls::for_new_member;
use crate::plan::{Step, TlsState};
use crate::platform::{self, InitialState, MemberAddr, MemberConfig, Platform, Settings};
use crate::tls::with_scheme;
use crate::validate::ValidSpec;

/// Why a step failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The platform failed.
    #[error(transparent)]
    Platform(#[from] platform::Error),
    /// etcd failed or refused.
    #[error(transparent)]
    Etcd(#[from] etcd::Error),
    /// No member answered, so a membership change has nowhere to go.
    #[error("no member answers with a leader")]
    NoLeader,
    /// A backup could not be found or used.
    #[error(transparent)]
    Backup(#[from] crate::backup::Error),
    /// No verified backup to rebuild from.
    #[error("no verified backup to rebuild the cluster from")]
    NoBackup,
    /// A standby's source has no good backup to create it from yet.
    #[error(
        "spec.standby: {0}; the standby is created from the source's newest good full backup \
         once there is one (the source needs spec.backup, with continuous backups to be \
         followed)"
    )]
    NoStandbySource(String),
    /// The provided certificates do not cover a member about to be added:
    /// it is not added (a learner that cannot talk to its peers would stay
    /// in etcd's member list and block every later change).
    #[error("{0}; the member is not added until the certificate covers it")]
    NotCovered(String),
    /// A leadership handover was accepted but the new leader was not seen
    /// leading in time.
    #[error("handing the leadership from {from} to {to}: {to} did not lead within {waited:?}")]
    Handover {
        /// The leader.
        from: String,
        /// The voter that was to lead.
        to: String,
        /// How long it was waited for.
        waited: Duration,
    },
}

impl Error {
    /// A short label for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Platform(e) => e.category(),
            Error::Etcd(e) => e.category(),
            Error::NoLeader => "no_leader",
            Error::Backup(e) => e.category(),
            Error::NoBackup => "no_backup",
            Error::NoStandbySource(_) => "standby",
            Error::Handover { .. } => "handover",
            Error::NotCovered(_) => "tls",
        }
    }

    /// etcd refused a membership change (for a few seconds after a member
    /// reconnects); it will accept soon.
    pub fn is_refused(&self) -> bool {
        matches!(self, Error::Etcd(e) if e.is_refused())
    }
}

/// Carries out `step`.
pub(super) async fn run<P: Platform>(
    c: &mut Cluster<P>,
    step: &Step,
    obs: &Observation,
    spec: &ValidSpec,
) -> Result<(), Error> {
    let api = || obs.api_url.clone().ok_or(Error::NoLeader);
    match step {
        Step::Bootstrap => bootstrap(c, obs, spec).await,
        Step::Start { member } => {
            c.crashes.started(member);
            Ok(c.platform.start(&c.name, member).await?)
        }
        Step::AddLearner => add_learner(c, obs, spec, &api()?).await,
        Step::Promote { id, .. } => Ok(c.clients.promote(&api()?, *id).await?),
        Step::Remove { member, id, why } => {
            c.clients.remove(&api()?, *id).await?;
            if !why.planned() {
                c.lost = Some(match c.moves.get(member) {
                    // Moved on purpose and gone with its pod.
                    Some(_) => Lost::Recreated {
                        member: member.clone(),
                    },
                    None => Lost::Member {
                        member: member.clone(),
                        why: *why,
                    },
                });
            }
            c.crashes.forget(member);
            c.forget_db(member);
            if obs.platform.iter().any(|p| &p.addr.name == member) {
                c.platform.delete(&c.name, member).await?;
            }
            Ok(())
        }
        Step::DeleteStray { member } => {
            c.crashes.forget(member);
            Ok(c.platform.delete(&c.name, member).await?)
        }
        Step::Upgrade { member, to } => {
            let settings = Settings {
                version: *to,
                tuning: spec.tuning,
                backend: spec.backend.clone(),
                pod: spec.pod.clone(),
            };
            c.crashes.started(member);
            Ok(c.platform.restart(&c.name, member, &settings).await?)
        }
        Step::Restart { member, .. } => {
            let on_platform = obs.platform.iter().find(|p| &p.addr.name == member);
            let settings = Settings {
                version: on_platform.map_or(spec.version, |p| p.version),
                tuning: spec.tuning,
                backend: spec.backend.clone(),
                pod: spec.pod.clone(),
            };
            c.crashes.started(member);
            Ok(c.platform.restart(&c.name, member, &settings).await?)
        }
        Step::MoveLeader { from, to, id } => hand_over(c, obs, from, to, *id).await,
        Step::RestoreFromBackup => c.rebuild_from_backup(spec).await,
        Step::ExpandVolume { member, to } => {
            Ok(c.platform.expand_volume(&c.name, member, to).await?)
        }
        Step::RenewCertificates { member } => {
            let p = on_platform(c, obs, member)?;
            let state = state_of(p);
            Ok(c.tls_install(&p.addr, &state).await?)
        }
        Step::Reconfigure { member, id, to } => reconfigure(c, obs, member, *id, to).await,
        Step::UpdatePeerUrl { member, id, https } => {
            let p = on_platform(c, obs, member)?;
            let url = with_scheme(&p.addr.peer_url, *https);
            Ok(c.clients.update_peer_urls(&api()?, *id, vec![url]).await?)
        }
        Step::ClearNoSpace {
            compact_to,
            defrag_order,
            disarm,
        } => {
            c.clear_nospace(obs, *compact_to, defrag_order, disarm)
                .await
        }
        Step::Defragment { member, .. } => c.defragment(obs, member).await,
        Step::Disarm { alarm } => {
            c.clients.disarm(&api()?, *alarm).await?;
            tracing::info!(cluster = %c.name, "{step}: done");
            Ok(())
        }
        Step::RebuildFromSurvivor { member, revision } => {
            c.rebuild_from_survivor(member, *revision).await
        }
        Step::FinishReseed { member } => c.finish_reseed(member).await,
        Step::Wait(_) | Step::Converged => Ok(()),
    }
}

fn on_platform<'a, P>(
    c: &Cluster<P>,
    obs: &'a Observation,
    member: &str,
) -> Result<&'a platform::PlatformMember, Error> {
    obs.platform
        .iter()
        .find(|p| p.addr.name == member)
        .ok_or_else(|| {
            Error::Platform(platform::Error::NoMember {
                cluster: c.name.clone(),
                member: member.to_string(),
            })
        })
}

/// A platform member's TLS as configured.
fn state_of(p: &platform::PlatformMember) -> TlsState {
    TlsState {
        files: p.tls.clone(),
        peer_https: crate::tls::is_https(&p.addr.peer_url),
        client_https: crate::tls::is_https(&p.addr.client_url),
    }
}

/// `addr` with the schemes of `state`.
fn with_schemes(addr: &MemberAddr, state: &TlsState) -> MemberAddr {
    MemberAddr {
        name: addr.name.clone(),
        peer_url: with_scheme(&addr.peer_url, state.peer_https),
        client_url: with_scheme(&addr.client_url, state.client_https),
    }
}

/// Restarts a member with another TLS state: the files of both states are
/// installed first (the running etcd keeps reading its own), then the
/// member restarts with the new state, then etcd's member list learns its
/// peer URL's new scheme.
async fn reconfigure<P: Platform>(
    c: &mut Cluster<P>,
    obs: &Observation,
    member: &str,
    id: u64,
    to: &TlsState,
) -> Result<(), Error> {
    let p = on_platform(c, obs, member)?;
    let from = state_of(p);
    let mut both = to.clone();
    both.files.peer |= from.files.peer;
    both.files.client |= from.files.client;
    c.tls_install(&p.addr, &both).await?;
    let addr = with_schemes(&p.addr, to);
    c.crashes.started(member);
    c.platform
        .reconfigure(&c.name, member, &addr, &to.files)
        .await?;
    if from.peer_https != to.peer_https {
        let api = obs.api_url.clone().ok_or(Error::NoLeader)?;
        // Ask another member when the restarted one was the one answering.
        let api = if crate::tls::same_endpoint(&api, &p.addr.client_url) {
            obs.platform
                .iter()
                .filter(|o| o.addr.name != member && o.running)
                .find_map(|o| o.call_url.clone())
                .unwrap_or(api)
        } else {
            api
        };
        c.clients
            .update_peer_urls(&api, id, vec![addr.peer_url.clone()])
            .await?;
    }
    Ok(())
}

/// How long a handover may take to show after etcd accepted it (etcd
/// answers MoveLeader once the new leader leads; this only bounds the
/// wait for the members to say so).
pub const HANDOVER_WAIT: Duration = Duration::from_secs(5);

/// Hands the leadership from `from` to voter `id` (`to`) and waits until
/// `to` says it leads, so the step that follows (a restart or removal of
/// `from`) costs no election.
async fn hand_over<P: Platform>(
    c: &Cluster<P>,
    obs: &Observation,
    from: &str,
    to: &str,
    id: u64,
) -> Result<(), Error> {
    let leader_url = obs.call_url(from).ok_or(Error::NoLeader)?;
    let started = Instant::now();
    c.clients.move_leader(leader_url, id).await?;
    let target = obs.call_url(to).unwrap_or(leader_url);
    while started.elapsed() < HANDOVER_WAIT {
        if let Ok(s) = c.clients.status(target).await
            && s.leader == id
        {
            tracing::info!(%from, %to, took = ?started.elapsed(), "leadership handed over");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Err(Error::Handover {
        from: from.to_string(),
        to: to.to_string(),
        waited: HANDOVER_WAIT,
    })
}

/// Creates the initial members all at once (`--initial-cluster-state new`).
/// The member names and URLs are saved in the cluster record before
/// anything starts, so a bootstrap cut short is finished with the same ones.
async fn bootstrap<P: Platform>(
    c: &mut Cluster<P>,
    obs: &Observation,
    spec: &ValidSpec,
) -> Result<(), Error> {
    let restore_from = c.restore_source(spec).await?;
    if c.record.initial.is_empty() {
        let first = c.record.next_index;
        let names: Vec<String> = (first..first + u32::try_from(spec.size).unwrap_or(1))
            .map(|i| format!("{}-{i}", c.name))
            .collect();
        let addrs = c.platform.allocate(&c.name, &names).await?;
        c.record.token = format!("{}-{:016x}", c.name, rand::rng().random::<u64>());
        c.record
            .uid
            .get_or_insert_with(crate::platform::new_cluster_uid);
        c.record.next_index = first + u32::try_from(spec.size).unwrap_or(1);
        c.record.initial = addrs;
        c.save_record().await;
    }
    let state = for_new_member(&c.tls.wanted, &[]);
    let initial: Vec<MemberAddr> = c
        .record
        .initial
        .iter()
        .map(|a| with_schemes(a, &state))
        .collect();
    let initial_cluster = initial_cluster(initial.iter());
    // Every member is tried: one that cannot start now (its pod waits for
    // an image, say) does not hold back the others; the first error is
    // reported once all were tried.
    let mut first_error = None;
    for addr in initial {
        match obs.platform.iter().find(|p| p.addr.name == addr.name) {
            Some(p) if p.running => {}
            Some(_) => {
                c.crashes.started(&addr.name);
                if let Err(e) = c.platform.start(&c.name, &addr.name).await {
                    first_error.get_or_insert(e);
                }
            }
            None => {
                let config = MemberConfig {
                    addr: addr.clone(),
                    version: spec.version,
                    initial_cluster: initial_cluster.clone(),
                    initial_state: InitialState::New,
                    token: c.record.token.clone(),
                    bootstrap: true,
                    tls: state.files.clone(),
                    tuning: spec.tuning,
                    backend: spec.backend.clone(),
                    pod: spec.pod.clone(),
                    force_new_cluster: false,
                    fresh_restore: false,
                };
                c.tls_install(&addr, &state).await?;
                c.crashes.started(&addr.name);
                let restore_from = restore_from.as_ref();
                if let Err(e) = c.platform.create(&c.name, &config, restore_from).await {
                    first_error.get_or_insert(e);
                }
            }
        }
    }
    first_error.map_or(Ok(()), |e| Err(e.into()))
}

/// Adds a learner to etcd, then creates and starts it with
/// `--initial-cluster-state existing`.
pub(super) async fn add_learner<P: Platform>(
    c: &mut Cluster<P>,
    obs: &Observation,
    spec: &ValidSpec,
    api: &str,
) -> Result<(), Error> {
    // One name per add in flight: a retry after a refusal takes the same
    // (the record keeps it until the member is created).
    let name = match c.record.adding.clone() {
        Some(name) => name,
        None => {
            let name = c.next_member_name();
            c.record.next_index += 1;
            c.record.adding = Some(name.clone());
            c.save_record().await;
            name
        }
    };
    let addr = c
        .platform
        .allocate(&c.name, std::slice::from_ref(&name))
        .await?
        .pop()
        .ok_or_else(|| platform::Error::NoMember {
            cluster: c.name.clone(),
            member: name.clone(),
        })?;
    let states: Vec<TlsState> = obs.platform.iter().map(state_of).collect();
    let state = for_new_member(&c.tls.wanted, &states.iter().collect::<Vec<_>>());
    let addr = with_schemes(&addr, &state);
    if let Some(message) = c.uncovered(&addr) {
        return Err(Error::NotCovered(message));
    }
    c.tls_install(&addr, &state).await?;
    let (_, members) = c.clients.add_learner(api, &addr.peer_url).await?;
    // Unstarted members have no name in etcd's list: use the platform's.
    let named = members.iter().filter_map(|m| {
        let peer = m.peer_urls.first()?;
        let name = if *peer == addr.peer_url {
            addr.name.clone()
        } else if !m.name.is_empty() {
            m.name.clone()
        } else {
            obs.on_platform(peer)?.addr.name.clone()
        };
        Some(MemberAddr {
            name,
            peer_url: peer.clone(),
            client_url: String::new(),
        })
    });
    let initial_cluster = initial_cluster(named.collect::<Vec<_>>().iter());
    let config = MemberConfig {
        addr,
        version: spec.version,
        initial_cluster,
        initial_state: InitialState::Existing,
        token: c.record.token.clone(),
        bootstrap: false,
        tls: state.files.clone(),
        tuning: spec.tuning,
        backend: spec.backend.clone(),
        pod: spec.pod.clone(),
        force_new_cluster: false,
        fresh_restore: false,
    };
    c.crashes.started(&name);
    c.platform.create(&c.name, &config, None).await?;
    c.record.adding = None;
    c.save_record().await;
    Ok(())
}

/// `name=peerURL,...` for `--initial-cluster`.
fn initial_cluster<'a>(members: impl Iterator<Item = &'a MemberAddr>) -> String {
    members
        .map(|m| format!("{}={}", m.name, m.peer_url))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Error;
    use crate::etcd::{self, ErrorKind};

    fn etcd_error(kind: ErrorKind) -> Error {
        Error::Etcd(etcd::Error {
            op: "member add",
            url: "http://127.0.0.1:2379".into(),
            kind,
        })
    }

    #[test]
    fn only_a_refusal_by_etcd_is_retried_soon() {
        assert!(etcd_error(ErrorKind::Refused("unhealthy cluster".into())).is_refused());
        assert!(!etcd_error(ErrorKind::Timeout(Duration::from_secs(1))).is_refused());
        assert!(!etcd_error(ErrorKind::Unreachable("connection refused".into())).is_refused());
        let platform = Error::Platform(crate::platform::Error::Version("refused".into()));
        assert!(!platform.is_refused());
    }
}
