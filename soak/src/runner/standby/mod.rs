//! The standby of a scenario's `standby` section (local platform): once the
//! cluster (the primary) is Running and took its first full backup, a
//! second EtcdCluster `CLUSTER-standby` with `spec.standby` naming it (its
//! backups' place as the run set it; with `stream`, its members' client
//! URLs) is created beside it; its published status, and the revision its
//! members answer with, are sampled every probe interval until the end,
//! when its data is compared with the primary's ([`compare`]), as the
//! standby's root (etcd's auth is on while it is a standby: `HashKV` needs
//! root; the password is read from the operator's state folder).

mod after;
mod compare;
mod lose;

pub(super) use lose::{Live as LoseLive, account, lose_primary, loss_us};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_operator::crd::{
    BackupLocation, EtcdCluster, EtcdClusterSpec, RestoreLocation, StandbySpec, StandbyStream,
};
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::platform::Platform;
use super::steps::wait;
use super::{Error, Options, START_TIMEOUT};
use crate::client::Pool;
use crate::data::StandbyRun;
use crate::history::now_ms;
use crate::invariants::standby::Sample;
use crate::probe::StatusSource;
use crate::progress::Progress;
use crate::scenario::{ClusterSpec, Standby};

/// The standby's cluster for the primary `primary` (as the run placed its
/// backups): the primary's version, `size` members, following it from
/// where its backups are (the default folder when the primary names none)
/// and, with `stream`, live from `endpoints`.
pub(super) fn cluster(primary: &ClusterSpec, sb: &Standby, endpoints: &[String]) -> ClusterSpec {
    let location = primary
        .spec
        .backup
        .as_ref()
        .and_then(|b| b.location.as_ref())
        .map(restore_location);
    ClusterSpec {
        name: Standby::name(&primary.name),
        spec: EtcdClusterSpec {
            standby: Some(StandbySpec {
                cluster: primary.name.clone(),
                location,
                promote: false,
                stream: sb.stream.then(|| StandbyStream {
                    endpoints: endpoints.to_vec(),
                    tls_path: None,
                }),
                ..StandbySpec::default()
            }),
            ..EtcdClusterSpec::minimal(sb.size, &primary.spec.version)
        },
    }
}

/// Where a cluster's backups are, as a standby (or a restore) names it.
fn restore_location(l: &BackupLocation) -> RestoreLocation {
    RestoreLocation {
        path: l.path.clone(),
        persistent_volume_claim: l.persistent_volume_claim.clone(),
        object_store: l.object_store.clone(),
    }
}

/// The standby while the run goes on: its status sampled by a task,
/// stopped when this is finished or dropped.
pub(super) struct Running {
    name: String,
    /// Its cluster as written (promoted by rewriting it).
    spec: ClusterSpec,
    catch_up: Duration,
    status: StatusSource,
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: DropGuard,
    task: tokio::task::JoinHandle<()>,
    created: crate::history::Ms,
    /// The operator's state folder (where the standby's passwords are).
    state: Option<std::path::PathBuf>,
}

/// Waits (bounded) for the primary's first full backup, creates the
/// standby, waits (bounded) for it to be Running and Following, and starts
/// sampling it every `every` (its members asked through `pool`). `None`
/// when interrupted meanwhile.
pub(super) async fn bring_up(
    o: &Options,
    platform: &mut Platform,
    sb: &Standby,
    interrupted: &mut watch::Receiver<bool>,
    progress: &mut Progress,
    (pool, every): (Arc<Pool>, Duration),
) -> Result<Option<Running>, Error> {
    let primary_status = platform.status();
    let s = &o.scenario;
    let backed_up = |c: &EtcdCluster| {
        c.status
            .as_ref()
            .and_then(|st| st.backup.as_ref())
            .is_some_and(|b| b.last_backup.is_some())
    };
    progress.say(&format!(
        "waiting for the first full backup of {} (a standby starts from it)",
        s.cluster.name
    ));
    if !wait(platform, interrupted, START_TIMEOUT, || {
        primary_status().is_some_and(|c| backed_up(&c))
    })
    .await?
    {
        return Err(Error::Start(format!(
            "cluster {} took no full backup within {START_TIMEOUT:?}; a standby starts from \
             one{}",
            s.cluster.name,
            platform.log_tail()
        )));
    }
    if *interrupted.borrow() {
        return Ok(None);
    }
    let endpoints: Vec<String> = primary_status()
        .and_then(|c| c.status)
        .map(|st| st.members.into_iter().map(|m| m.client_url).collect())
        .unwrap_or_default();
    let Some(primary) = platform.primary() else {
        return Err(Error::Setup(
            "standby: a standby is for the local platform only".into(),
        ));
    };
    let standby = cluster(&primary, sb, &endpoints);
    let state = match &*platform {
        Platform::Local(l) => Some(l.state().to_path_buf()),
        Platform::Kube(_) => None,
    };
    let name = standby.name.clone();
    progress.say(&format!(
        "creating standby {name} ({} members, {})",
        sb.size,
        if sb.stream {
            format!("streaming from {}", endpoints.join(","))
        } else {
            "from the store".to_string()
        }
    ));
    platform.create_other(&standby)?;
    let created = now_ms();
    let status = platform.status_of(&name);
    let size = sb.members();
    let following = |c: &EtcdCluster| {
        c.status.as_ref().is_some_and(|st| {
            st.phase.as_str() == "Running"
                && st.members.iter().filter(|m| m.ready).count() == size
                && st
                    .standby
                    .as_ref()
                    .is_some_and(|sb| sb.state == "Following")
        })
    };
    if !wait(platform, interrupted, START_TIMEOUT, || {
        status().is_some_and(|c| following(&c))
    })
    .await?
    {
        let said = status()
            .and_then(|c| c.status)
            .map(|st| format!(" (phase {}, standby {:?})", st.phase.as_str(), st.standby))
            .unwrap_or_default();
        return Err(Error::Start(format!(
            "standby {name} was not Running and Following within {START_TIMEOUT:?}{said}{}",
            platform.log_tail()
        )));
    }
    let samples = Arc::new(Mutex::new(Vec::new()));
    let stop = CancellationToken::new();
    let task = tokio::spawn(sample(
        (status.clone(), pool),
        every,
        samples.clone(),
        stop.clone(),
    ));
    Ok(Some(Running {
        name,
        spec: standby,
        catch_up: sb.catch_up.get(),
        status,
        samples,
        stop: stop.drop_guard(),
        task,
        created,
        state,
    }))
}

impl Running {
    /// The cluster's name.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// Compares the standby with the primary (reached at `primary`) once
    /// the primary stopped changing, then stops sampling; what was
    /// recorded. `compare` false (an interrupted or failed run): only
    /// stops.
    pub(super) async fn finish(self, pool: &Pool, primary: &[String], compare: bool) -> StandbyRun {
        let final_check = if compare {
            let root = self.state.as_deref().and_then(|s| {
                etcd_operator::platform::local::standby_auth::credentials(s, &self.name, "root")
                    .inspect_err(|e| tracing::warn!("the standby's root password: {e}"))
                    .ok()
                    .flatten()
            });
            let how = (&self.status, self.catch_up, root);
            Some(compare::run(pool, primary, how).await)
        } else {
            None
        };
        drop(self.stop);
        let _ = tokio::time::timeout(Duration::from_secs(5), self.task).await;
        let samples = std::mem::take(&mut *lock(&self.samples));
        StandbyRun {
            name: self.name,
            created: self.created,
            samples,
            final_check,
            faults: Vec::new(),
        }
    }
}

fn lock(s: &Mutex<Vec<Sample>>) -> std::sync::MutexGuard<'_, Vec<Sample>> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// Longest a standby member's status call may take (as a probe's).
const STATUS_TIMEOUT: Duration = Duration::from_millis(400);

/// One reading of the standby's published status, and the highest
/// revision its members answer with.
async fn read(status: &StatusSource, pool: &Pool) -> Sample {
    let at = now_ms();
    let Some(st) = status().and_then(|c| c.status) else {
        return Sample {
            at,
            ..Sample::default()
        };
    };
    let mut revision = None;
    for m in &st.members {
        let r = pool
            .call(&m.client_url, STATUS_TIMEOUT, |mut c| async move {
                c.status().await
            })
            .await;
        if let Some(h) = r.ok().as_ref().and_then(|r| r.header()) {
            revision = revision.max(Some(h.revision()));
        }
    }
    let Some(sb) = st.standby else {
        return Sample {
            at,
            revision,
            ..Sample::default()
        };
    };
    Sample {
        at,
        state: Some(sb.state),
        via: sb.via,
        applied: sb.applied_revision,
        source: sb.source_revision,
        lag_revisions: sb.lag_revisions,
        lag_ms: sb.lag_ms,
        message: sb.message,
        revision,
    }
}

/// Samples the standby every `every` until `stop`.
async fn sample(
    (status, pool): (StatusSource, Arc<Pool>),
    every: Duration,
    out: Arc<Mutex<Vec<Sample>>>,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => return,
        }
        let s = tokio::select! {
            s = read(&status, &pool) => s,
            _ = stop.cancelled() => return,
        };
        lock(&out).push(s);
    }
}

#[cfg(test)]
mod tests;
