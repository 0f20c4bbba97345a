//! The run: checks the selection, then one tick per interval until a signal,
//! `--duration` or `--max-faults`; resumes every member it paused before it
//! returns, whatever ends the run.

use std::collections::HashSet;
use std::future::Future;
use std::time::SystemTime;

use etcd_operator::faults::{Fault, FaultRecord, Role};
use tokio::time::Instant;

use crate::cli::FaultKind;
use crate::config::Config;
use crate::faultlog::{self, FaultLog};
use crate::rng::{Rng, Stream};
use crate::roles::RoleSource;
use crate::select::{self, Target};
use crate::target::{self, MemberKey, ObservedCluster, Operator, Platform};

/// Why a run could not go on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The selection does not fit what is there (exit code 2).
    #[error("{0}")]
    BadInput(String),
    /// The platform could not be read at start.
    #[error(transparent)]
    Platform(#[from] target::Error),
    /// A fault could not be logged: the run stops rather than leave faults
    /// unrecorded.
    #[error(transparent)]
    FaultLog(#[from] faultlog::Error),
    /// No connection to the platform (a kubeconfig problem).
    #[error("{0}")]
    Connect(String),
}

mod lasting;
mod summary;

pub use summary::Summary;

/// What ended a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// SIGINT or SIGTERM (the shutdown future).
    Signal,
    /// `--duration` is over.
    Duration,
    /// `--max-faults` were injected.
    MaxFaults,
}

struct Paused<H> {
    key: MemberKey,
    role: Role,
    role_source: Option<RoleSource>,
    handle: H,
    until: Instant,
}

struct Run<'a, P: Platform> {
    platform: &'a P,
    cfg: &'a Config,
    log: &'a mut FaultLog,
    paused: Vec<Paused<P::Handle>>,
    lasting: Vec<lasting::Active<P::Lasting>>,
}

/// Runs the monkey against `platform` until `shutdown` completes, the
/// duration is over or the fault budget is spent.
pub async fn run<P: Platform>(
    platform: &P,
    cfg: &Config,
    log: &mut FaultLog,
    shutdown: impl Future<Output = ()>,
) -> Result<Summary, Error> {
    check_selection(platform, cfg).await?;
    let touches = platform.prepare(cfg).await.map_err(|e| match e {
        target::Error::Setup(m) => Error::BadInput(m),
        other => Error::Platform(other),
    })?;
    log.announce(&cfg.describe());
    if let Some(t) = touches {
        log.announce(&t);
    }
    let mut run = Run {
        platform,
        cfg,
        log,
        paused: Vec::new(),
        lasting: Vec::new(),
    };
    let result = run.ticks(shutdown).await;
    let why = match &result {
        Ok((_, Stop::Signal)) => "when the monkey was stopped by a signal",
        Ok((_, Stop::Duration)) => "when --duration ended the run",
        Ok((_, Stop::MaxFaults)) => "at the end of the run",
        Err(_) => "when the run failed",
    };
    let left_unhealed = run.heal_all(why).await;
    let left_paused = run.resume_all().await;
    let (ticks, stop) = result?;
    Ok(Summary {
        ticks,
        stop,
        left_paused,
        left_unhealed,
    })
}

/// Unknown clusters and an empty selection are bad input.
async fn check_selection<P: Platform>(platform: &P, cfg: &Config) -> Result<(), Error> {
    let present = platform.clusters().await?;
    let unknown: Vec<&str> = cfg
        .clusters
        .iter()
        .filter(|c| !present.contains(c))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        let there = if present.is_empty() {
            "there are none".to_string()
        } else {
            format!("there are: {}", present.join(", "))
        };
        return Err(Error::BadInput(format!(
            "--cluster: no such cluster {} ({there})",
            unknown.join(", ")
        )));
    }
    if matches!(cfg.target, Target::Operator | Target::Store) {
        return Ok(());
    }
    let selected = if cfg.clusters.is_empty() {
        &present
    } else {
        &cfg.clusters
    };
    let observed = platform
        .observe(selected, &HashSet::new(), cfg.min_age, SystemTime::now())
        .await?;
    if observed.iter().all(|c| c.members.is_empty()) {
        return Err(Error::BadInput(
            "empty selection: the selected clusters have no etcd members (check --cluster, and \
             --state-dir on the local platform or --namespace and --selector on kube)"
                .into(),
        ));
    }
    Ok(())
}

/// `cluster/member:role` of every member a tick may hit, `:role(status)`
/// for a role taken from the operator's published status (for debug logs,
/// and for telling why two runs of one seed chose differently).
fn candidates<H>(observed: &[ObservedCluster<H>]) -> String {
    let mut out = Vec::new();
    for c in observed {
        for m in c
            .members
            .iter()
            .filter(|m| m.view.running && m.view.eligible)
        {
            let from = match m.role_source {
                Some(RoleSource::Status) => "(status)",
                _ => "",
            };
            out.push(format!(
                "{}/{}:{}{from}",
                c.name,
                m.view.name,
                faultlog::role_name(m.view.role)
            ));
        }
    }
    out.join(" ")
}

fn fault_of(kind: FaultKind) -> Fault {
    match kind {
        FaultKind::Kill => Fault::Kill,
        FaultKind::Destroy => Fault::Destroy,
        FaultKind::Pause => Fault::Pause,
        FaultKind::Partition => Fault::Partition,
        FaultKind::Delay => Fault::Delay,
        FaultKind::Loss => Fault::Loss,
        FaultKind::BlackholeUntilSnapshot => Fault::BlackholeUntilSnapshot,
        FaultKind::Corrupt => Fault::Corrupt,
        FaultKind::DiskFull => Fault::DiskFull,
        FaultKind::ClockSkew => Fault::ClockSkew,
        FaultKind::SlowDisk => Fault::SlowDisk,
    }
}

fn outcome(r: &Result<(), target::Error>) -> String {
    match r {
        Ok(()) => "injected".into(),
        Err(e) => format!("failed: {e}"),
    }
}

impl<P: Platform> Run<'_, P> {
    fn budget_spent(&self) -> bool {
        self.cfg.max_faults.is_some_and(|m| self.log.faults() >= m)
    }

    /// Ticks until something ends the run; returns the tick count.
    async fn ticks(&mut self, shutdown: impl Future<Output = ()>) -> Result<(u64, Stop), Error> {
        tokio::pin!(shutdown);
        let start = Instant::now();
        let end = self.cfg.duration.map(|d| start + d);
        let mut tick = 0u64;
        let mut base = start + self.cfg.start_after + self.cfg.interval;
        let mut next = base + self.jitter(tick);
        loop {
            let spent = self.budget_spent();
            if spent && self.paused.is_empty() && self.lasting.is_empty() {
                return Ok((tick, Stop::MaxFaults));
            }
            let mut wake = if spent { None } else { Some(next) };
            for p in &self.paused {
                wake = Some(wake.map_or(p.until, |w| w.min(p.until)));
            }
            if let Some(l) = self.lasting_wake(Instant::now()) {
                wake = Some(wake.map_or(l, |w| w.min(l)));
            }
            if let Some(e) = end {
                wake = Some(wake.map_or(e, |w| w.min(e)));
            }
            let wake = wake.unwrap_or(next);
            tokio::select! {
                biased;
                () = &mut shutdown => return Ok((tick, Stop::Signal)),
                () = tokio::time::sleep_until(wake) => {}
            }
            let now = Instant::now();
            if end.is_some_and(|e| now >= e) {
                return Ok((tick, Stop::Duration));
            }
            self.resume_due(now).await?;
            self.heal_due(now).await?;
            if !spent && now >= next {
                self.tick(tick).await?;
                tick += 1;
                base += self.cfg.interval;
                next = base + self.jitter(tick);
            }
        }
    }

    fn jitter(&self, tick: u64) -> std::time::Duration {
        if self.cfg.jitter.is_zero() {
            return std::time::Duration::ZERO;
        }
        let u = Rng::for_tick(self.cfg.seed, tick, Stream::Jitter).unit();
        self.cfg.jitter.mul_f64(u)
    }

    async fn tick(&mut self, tick: u64) -> Result<(), Error> {
        let cfg = self.cfg;
        if Rng::for_tick(cfg.seed, tick, Stream::Fire).unit() >= cfg.probability {
            tracing::info!(tick, "tick skipped (--probability {})", cfg.probability);
            return Ok(());
        }
        if cfg.target == Target::Operator {
            let found = self.platform.operator().await;
            return self.hit_one(tick, found, "no operator is running").await;
        }
        if let Some(at) = cfg.store_at() {
            let found = self.platform.store(at).await;
            return self
                .hit_one(tick, found, "nothing listens on --store-addr")
                .await;
        }
        let budget = match cfg.max_faults {
            Some(m) => m.saturating_sub(self.log.faults()),
            None => usize::MAX,
        }
        .min(cfg.max_kill);
        let names = if cfg.clusters.is_empty() {
            match self.platform.clusters().await {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(tick, "tick skipped: {e}");
                    return Ok(());
                }
            }
        } else {
            cfg.clusters.clone()
        };
        let paused: HashSet<MemberKey> = self.paused.iter().map(|p| p.key.clone()).collect();
        // A cluster with a lasting fault in force takes no other.
        let busy = self.busy();
        let mut names = names;
        names.retain(|c| {
            let free = !busy.contains(c.as_str());
            if !free {
                tracing::info!(
                    tick,
                    "cluster {c} skipped: a lasting fault is in force there"
                );
            }
            free
        });
        if names.is_empty() {
            return Ok(());
        }
        let observed = match self
            .platform
            .observe(&names, &paused, cfg.min_age, SystemTime::now())
            .await
        {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(tick, "tick skipped: {e}");
                return Ok(());
            }
        };
        let mut observed = observed;
        if cfg.target == Target::Applier {
            let standbys = self.platform.standbys(&names).await;
            observed.retain(|c| standbys.contains(&c.name));
        }
        let views: Vec<_> = observed.iter().map(|c| c.view()).collect();
        let picks = select::choose(cfg.seed, tick, &views, cfg.target, budget);
        tracing::debug!(
            "tick {tick}: candidates [{}] victims [{}]",
            candidates(&observed),
            picks
                .iter()
                .map(|p| format!(
                    "{}/{}",
                    views[p.cluster].name, views[p.cluster].members[p.member].name
                ))
                .collect::<Vec<_>>()
                .join(" ")
        );
        if picks.is_empty() {
            let why = match cfg.target {
                Target::Leader => {
                    "no running leader is known (down, too young, or no member answered)"
                }
                Target::Follower => "no running follower is known",
                Target::Applier => {
                    "no selected cluster is a standby following its source with a running \
                     leader"
                }
                Target::Minority => {
                    "each selected cluster would lose quorum (members are down or paused)"
                }
                _ => "no member is running and old enough (--min-age)",
            };
            tracing::info!(
                tick,
                "nothing to hit for --target {}: {why}",
                cfg.target.as_str()
            );
            return Ok(());
        }
        if cfg.fault.network() {
            return self.start_network(tick, &observed, &picks).await;
        }
        if cfg.fault.on_member() {
            return self.start_on_members(&observed, &picks).await;
        }
        if matches!(cfg.fault, FaultKind::Corrupt | FaultKind::DiskFull) {
            return self.damage(tick, &observed, &picks).await;
        }
        let fault = fault_of(cfg.fault);
        let mut hits = Vec::new();
        for p in picks {
            let c = &observed[p.cluster];
            let m = &c.members[p.member];
            if let Some(h) = &m.handle {
                hits.push((
                    (c.name.clone(), m.view.name.clone()),
                    (m.view.role, m.role_source),
                    h.clone(),
                ));
            }
        }
        let mut records: Vec<(FaultRecord, Option<RoleSource>)> = hits
            .iter()
            .map(|((c, m), (role, source), _)| {
                (FaultRecord::now(fault, c, m, *role, "dry-run"), *source)
            })
            .collect();
        if !cfg.dry_run {
            let results = futures::future::join_all(
                hits.iter().map(|(_, _, h)| self.platform.inject(fault, h)),
            )
            .await;
            for ((record, _), r) in records.iter_mut().zip(&results) {
                record.outcome = outcome(r);
            }
            let until = Instant::now() + cfg.pause_for;
            for ((key, (role, role_source), handle), r) in hits.into_iter().zip(results) {
                if fault == Fault::Pause && r.is_ok() {
                    self.paused.push(Paused {
                        key,
                        role,
                        role_source,
                        handle,
                        until,
                    });
                }
            }
        }
        for (r, source) in records {
            self.log.write_sourced(r, source)?;
        }
        Ok(())
    }

    /// Hits the one process `found` (the operator, or the object store's
    /// server), which is not a member; `none` says why there is nothing.
    async fn hit_one(
        &mut self,
        tick: u64,
        found: Result<Option<Operator<P::Handle>>, target::Error>,
        none: &str,
    ) -> Result<(), Error> {
        let op = match found {
            Ok(Some(op)) => op,
            Ok(None) => {
                tracing::info!(tick, "nothing to hit: {none}");
                return Ok(());
            }
            Err(e) => {
                tracing::warn!(tick, "tick skipped: {e}");
                return Ok(());
            }
        };
        if self
            .paused
            .iter()
            .any(|p| p.key.0.is_empty() && p.key.1 == op.name)
        {
            tracing::info!(tick, "nothing to hit: {} is paused already", op.name);
            return Ok(());
        }
        let fault = fault_of(self.cfg.fault);
        let mut record = FaultRecord::now(fault, "", &op.name, Role::Unknown, "dry-run");
        if !self.cfg.dry_run {
            let r = self.platform.inject(fault, &op.handle).await;
            record.outcome = outcome(&r);
            if fault == Fault::Pause && r.is_ok() {
                self.paused.push(Paused {
                    key: (String::new(), op.name),
                    role: Role::Unknown,
                    role_source: None,
                    handle: op.handle,
                    until: Instant::now() + self.cfg.pause_for,
                });
            }
        }
        self.log.write(record)?;
        Ok(())
    }

    /// Resumes the members whose pause is over (all of them, then logs).
    async fn resume_due(&mut self, now: Instant) -> Result<(), Error> {
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.paused)
            .into_iter()
            .partition(|p| p.until <= now);
        self.paused = keep;
        let mut records = Vec::new();
        for p in due {
            let r = self.platform.resume(&p.handle).await;
            records.push((
                FaultRecord::now(Fault::Resume, &p.key.0, &p.key.1, p.role, &outcome(&r)),
                p.role_source,
            ));
        }
        for (r, source) in records {
            self.log.write_sourced(r, source)?;
        }
        Ok(())
    }

    /// Resumes every paused member; returns those that could not be (other
    /// than ones that are gone, which are not stopped any more).
    async fn resume_all(&mut self) -> Vec<String> {
        let mut left = Vec::new();
        for p in std::mem::take(&mut self.paused) {
            let r = self.platform.resume(&p.handle).await;
            let name = if p.key.0.is_empty() {
                p.key.1.clone()
            } else {
                format!("{}/{}", p.key.0, p.key.1)
            };
            if let Err(e) = &r
                && !matches!(e, target::Error::Gone(_))
            {
                left.push(name);
            }
            let record = FaultRecord::now(Fault::Resume, &p.key.0, &p.key.1, p.role, &outcome(&r));
            if let Err(e) = self.log.write_sourced(record, p.role_source) {
                tracing::error!("{e}");
            }
        }
        left
    }
}

#[cfg(test)]
mod tests;
