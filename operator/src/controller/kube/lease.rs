//! Leader election between operator replicas on Kubernetes: a
//! `coordination.k8s.io/v1` Lease held by one replica's identity, taken when
//! absent, released or expired (`renewTime + leaseDurationSeconds < now`),
//! renewed every [`Timing::retry`], written with the Lease's
//! `resourceVersion` so that of two replicas racing for it exactly one wins
//! (the other gets 409 Conflict and stays a follower).
//!
//! kube-rs has no leader election of its own; this is the small part of
//! client-go's that the operator needs. Expiry is judged on the Lease's own
//! `renewTime` against this replica's clock, so replicas' clocks must agree
//! to well within the lease duration (15 s), as NTP-synced nodes do.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::PostParams;

use crate::metrics::server::Health;

/// The Lease's default name.
pub const DEFAULT_NAME: &str = "etcd-operator";

/// Why the Lease could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or could not be reached.
    #[error("lease {lease}: {source}")]
    Api {
        /// `NAMESPACE/NAME`.
        lease: String,
        /// The cause.
        source: kube::Error,
    },
}

/// How long a Lease lasts and how often it is renewed.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// `leaseDurationSeconds` written: how long after its last renewal
    /// another replica may take the Lease.
    pub duration: Duration,
    /// How often the holder renews (and a follower tries to take it).
    pub retry: Duration,
    /// A holder whose renewals failed for this long stops leading: it must
    /// be shorter than `duration`, so it stops before another may take over.
    pub renew_deadline: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            duration: Duration::from_secs(15),
            retry: Duration::from_secs(2),
            renew_deadline: Duration::from_secs(10),
        }
    }
}

/// What to do about the Lease as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// No Lease: create it, held by us.
    Create,
    /// Free (no holder) or expired: take it over.
    Take,
    /// Ours: renew it.
    Renew,
    /// Another replica holds it and it is fresh.
    Wait {
        /// Its holder.
        holder: String,
    },
}

/// Whether a Lease last renewed at `renewed` (`None`: never) for
/// `duration_seconds` has expired at `now`.
pub fn is_expired(renewed: Option<Timestamp>, duration_seconds: i32, now: Timestamp) -> bool {
    let Some(renewed) = renewed else {
        return true;
    };
    let lasts = SignedDuration::from_secs(i64::from(duration_seconds.max(0)));
    match renewed.checked_add(lasts) {
        Ok(until) => until < now,
        // Beyond the calendar: not expired in any lifetime.
        Err(_) => false,
    }
}

/// What `me` should do about `lease` at `now`; a Lease that does not say
/// how long it lasts counts as lasting `default_seconds`.
pub fn next(lease: Option<&Lease>, me: &str, now: Timestamp, default_seconds: i32) -> Next {
    let Some(lease) = lease else {
        return Next::Create;
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.filter(|h| !h.is_empty());
    let Some(holder) = holder else {
        return Next::Take;
    };
    if holder == me {
        return Next::Renew;
    }
    let renewed = spec.renew_time.or(spec.acquire_time).map(|t| t.0);
    let lasts = spec.lease_duration_seconds.unwrap_or(default_seconds);
    if is_expired(renewed, lasts, now) {
        Next::Take
    } else {
        Next::Wait { holder }
    }
}

/// Who leads, as one attempt found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// We hold the Lease (acquired or renewed just now).
    Leader,
    /// Another replica does.
    Follower {
        /// Its identity (`unknown` when a race was lost to a writer not yet
        /// read).
        holder: String,
    },
}

/// Why a leader stopped leading.
#[derive(Debug, PartialEq, Eq)]
pub enum Lost {
    /// Another replica holds the Lease now.
    Taken {
        /// Its identity.
        holder: String,
    },
    /// Renewals failed for longer than the renew deadline.
    Deadline {
        /// The last failure.
        error: String,
    },
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::Taken { holder } => write!(f, "the lease is now held by {holder}"),
            Lost::Deadline { error } => {
                write!(f, "the lease could not be renewed in time: {error}")
            }
        }
    }
}

/// One replica's side of the election.
#[derive(Clone, Debug)]
pub struct Elector {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    timing: Timing,
}

fn is_race(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_conflict() || s.is_already_exists())
}

impl Elector {
    /// An elector for Lease `namespace/name`, as `identity`.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: &str,
        timing: Timing,
    ) -> Elector {
        Elector {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity: identity.to_string(),
            timing,
        }
    }

    /// `NAMESPACE/NAME`.
    pub fn lease(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    fn error(&self, source: kube::Error) -> Error {
        Error::Api {
            lease: self.lease(),
            source,
        }
    }

    fn seconds(&self) -> i32 {
        i32::try_from(self.timing.duration.as_secs()).unwrap_or(i32::MAX)
    }

    /// One attempt at `now`: reads the Lease and creates, takes or renews
    /// it as [`next`] says. A lost race (409) makes us a follower.
    pub async fn step(&self, now: Timestamp) -> Result<Role, Error> {
        let current = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(|e| self.error(e))?;
        let action = next(current.as_ref(), &self.identity, now, self.seconds());
        let mut lease = current.unwrap_or_default();
        let mut spec = lease.spec.take().unwrap_or_default();
        match &action {
            Next::Wait { holder } => {
                return Ok(Role::Follower {
                    holder: holder.clone(),
                });
            }
            Next::Renew => {}
            Next::Create | Next::Take => {
                spec.acquire_time = Some(MicroTime(now));
                if action == Next::Take {
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                } else {
                    spec.lease_transitions = Some(0);
                }
            }
        }
        spec.holder_identity = Some(self.identity.clone());
        spec.lease_duration_seconds = Some(self.seconds());
        spec.renew_time = Some(MicroTime(now));
        lease.spec = Some(spec);
        let written = if action == Next::Create {
            lease.metadata = ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            };
            self.api.create(&PostParams::default(), &lease).await
        } else {
            // Carries the resourceVersion read: a write in between is a 409.
            self.api
                .replace(&self.name, &PostParams::default(), &lease)
                .await
        };
        match written {
            Ok(_) => Ok(Role::Leader),
            Err(e) if is_race(&e) => Ok(Role::Follower {
                holder: "unknown (another replica wrote the lease first)".into(),
            }),
            Err(e) => Err(self.error(e)),
        }
    }

    /// Tries every [`Timing::retry`] until this replica leads. Meanwhile
    /// `/readyz` is ready with a note naming the holder (a standby replica
    /// is healthy, and `kubectl rollout status` waits for every replica to
    /// be ready), or not ready when the Lease cannot be read.
    pub async fn acquire(&self, health: &Health) {
        let mut last: Option<String> = None;
        loop {
            let started = tokio::time::Instant::now();
            let (said, standby) = match self.step(Timestamp::now()).await {
                Ok(Role::Leader) => {
                    crate::fence::renewed(started, self.timing.renew_deadline);
                    tracing::info!(lease = %self.lease(), identity = %self.identity,
                        "leader election: this replica now leads");
                    return;
                }
                Ok(Role::Follower { holder }) => (
                    format!(
                        "standby, not the leader: lease {} is held by {holder}",
                        self.lease()
                    ),
                    true,
                ),
                Err(e) => (format!("not the leader: {e}"), false),
            };
            if last.as_ref() != Some(&said) {
                tracing::info!("leader election: {said}; waiting");
                match standby {
                    true => health.standby(said.clone()),
                    false => health.not_ready(said.clone()),
                }
                last = Some(said);
            }
            tokio::time::sleep(self.timing.retry).await;
        }
    }

    /// Renews every [`Timing::retry`] while this replica leads; returns
    /// when it no longer does (never otherwise).
    pub async fn hold(&self) -> Lost {
        let mut last_ok = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.timing.retry).await;
            let started = tokio::time::Instant::now();
            match self.step(Timestamp::now()).await {
                Ok(Role::Leader) => {
                    // Writes may go on until this renewal's start plus the
                    // renew deadline (shorter than the lease), counted on
                    // this process's own clock: a pause past it closes
                    // the fence before anything else runs.
                    crate::fence::renewed(started, self.timing.renew_deadline);
                    last_ok = tokio::time::Instant::now();
                }
                Ok(Role::Follower { holder }) => {
                    crate::fence::close();
                    return Lost::Taken { holder };
                }
                Err(e) => {
                    tracing::warn!("leader election: cannot renew: {e}");
                    if last_ok.elapsed() >= self.timing.renew_deadline {
                        crate::fence::close();
                        return Lost::Deadline {
                            error: e.to_string(),
                        };
                    }
                }
            }
        }
    }

    /// Gives the Lease up (clears its holder) if this replica holds it, so
    /// another takes over at once instead of after the lease duration.
    pub async fn release(&self) -> Result<(), Error> {
        let Some(mut lease) = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(|e| self.error(e))?
        else {
            return Ok(());
        };
        let mut spec = lease.spec.take().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        lease.spec = Some(spec);
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(()),
            // Someone wrote it in between: it is no longer ours to release.
            Err(e) if is_race(&e) => Ok(()),
            Err(e) => Err(self.error(e)),
        }
    }
}

/// This replica's identity: `POD_NAME` (the downward API in
/// deploy/base/operator.yaml), else the host name and process id.
pub fn identity() -> String {
    let non_empty = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
    if let Some(pod) = non_empty(std::env::var("POD_NAME").ok()) {
        return pod.trim().to_string();
    }
    let host = non_empty(std::env::var("HOSTNAME").ok())
        .or_else(|| non_empty(std::fs::read_to_string("/proc/sys/kernel/hostname").ok()))
        .unwrap_or_else(|| "unknown-host".into());
    format!("{}-{}", host.trim(), std::process::id())
}

#[cfg(test)]
#[path = "lease_tests.rs"]
mod tests;
