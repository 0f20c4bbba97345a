//! Helpers of the run: starting the chaos monkey, bounded waits, and the
//! counts the progress display shows.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use etcd_operator::crd::EtcdCluster;
use tokio::sync::watch;

use super::platform::Platform;
use super::procs::Proc;
use super::{Error, Options, START_TIMEOUT, chaos};
use crate::history::{Ms, now_ms};
use crate::invariants::recovery::group;
use crate::load;
use crate::probe;
use crate::progress::{Progress, Tally};
use crate::scenario::Scenario;

pub(super) fn cfg_value_size(s: &Scenario) -> usize {
    usize::try_from(s.load.value_size).unwrap_or(64)
}

/// Starts a chaos monkey on `cluster` with the scenario's options, its
/// fault log `fault_log`, its output in `logs/LOG_NAME.log`.
pub(super) fn start_chaos(
    o: &Options,
    platform: &Platform,
    c: &crate::scenario::Chaos,
    (cluster, log_name): (&str, &str),
    fault_log: &Path,
    left: Duration,
) -> Result<Proc, Error> {
    let at = match platform {
        Platform::Local(l) => chaos::Where::Local(l.state()),
        Platform::Kube(k) => chaos::Where::Kube(k.kubeconfig(), k.namespace()),
    };
    let mut args = chaos::args(c, at, cluster, fault_log, o.seed, left);
    if let Platform::Local(l) = platform
        && let Some(addr) = l.store_addr()
        && c.target == crate::scenario::Target::Store
    {
        args.extend(["--store-addr".to_string(), addr.to_string()]);
    }
    let mut cmd = Command::new(&o.chaos_bin);
    cmd.args(&args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("CHAOS_MONKEY_") {
            cmd.env_remove(k);
        }
    }
    tracing::debug!("starting chaos-monkey {}", args.join(" "));
    let logs = o.out.join("logs");
    Ok(Proc::spawn(
        "chaos-monkey",
        cmd,
        &logs.join(format!("{log_name}.log")),
    )?)
}

/// Waits (bounded) until `done`, tending the platform; false on timeout.
/// Returns early (true) when interrupted.
pub(super) async fn wait(
    platform: &mut Platform,
    interrupted: &mut watch::Receiver<bool>,
    within: Duration,
    mut done: impl FnMut() -> bool,
) -> Result<bool, Error> {
    let deadline = Instant::now() + within;
    let mut last_tend = Instant::now();
    loop {
        if done() || *interrupted.borrow() {
            return Ok(true);
        }
        if Instant::now() > deadline {
            return Ok(false);
        }
        if last_tend.elapsed() >= Duration::from_millis(500) {
            platform.tend_keeping().await;
            last_tend = Instant::now();
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = interrupted.changed() => {}
        }
    }
}

pub(super) fn tally(
    start: Instant,
    duration: Duration,
    fault_log: &Path,
    rec: &probe::SharedRecorder,
    load_state: &load::Shared,
    s: &Scenario,
    phase: &'static str,
) -> Tally {
    let events = group(&etcd_operator::faults::read(fault_log).unwrap_or_default());
    let measured: Vec<Ms> = events
        .iter()
        .filter(|e| e.measured())
        .map(|e| e.at)
        .collect();
    let now = now_ms();
    let max = u64::try_from(s.bounds.recovery_max.get().as_millis()).unwrap_or(u64::MAX);
    let r = probe::lock(rec);
    let recovered = measured
        .iter()
        .filter(|&&at| r.healthy_since(at).is_some())
        .count();
    let overdue = measured
        .iter()
        .filter(|&&at| r.healthy_since(at).is_none() && now.saturating_sub(at) > max)
        .count();
    let st = load::lock(load_state);
    let (ops_per_s, p99_ms) = st.stats.recent.now();
    Tally {
        phase,
        elapsed: start.elapsed(),
        duration,
        faults: events.iter().filter(|e| e.injected()).count(),
        recovered,
        violations: r.violations.len() + st.violations.len() + overdue,
        writes: st.stats.writes_ok,
        ops_per_s,
        p99_ms,
        healthy: r.healthy_now(),
    }
}

/// Creates the cluster (and on the local platform starts the operator),
/// waits for it to be Running, and pauses it when the scenario turns healing
/// off. Returns false when interrupted meanwhile.
pub(super) async fn bring_up(
    o: &Options,
    platform: &mut Platform,
    interrupted: &mut watch::Receiver<bool>,
    progress: &mut Progress,
) -> Result<bool, Error> {
    let s = &o.scenario;
    let size = s.cluster.members();
    platform.create(false).await?;
    if let Platform::Local(l) = platform {
        l.start_operator()?;
    }
    let status = platform.status();
    let running = |c: &EtcdCluster, phase: &str| {
        c.status.as_ref().is_some_and(|st| {
            st.phase.as_str() == phase
                && (phase != "Running"
                    || (st.members.iter().filter(|m| m.ready).count() == size
                        && st.members.len() == size))
        })
    };
    if !wait(platform, interrupted, START_TIMEOUT, || {
        status().is_some_and(|c| running(&c, "Running"))
    })
    .await?
    {
        return Err(Error::Start(format!(
            "cluster {} was not Running with {size} ready members within {START_TIMEOUT:?}{}",
            s.cluster.name,
            platform.log_tail()
        )));
    }
    if *interrupted.borrow() {
        return Ok(false);
    }
    if !s.operator_healing {
        progress.say("operatorHealing is false: pausing the cluster (spec.paused) so the operator heals nothing");
        platform.create(true).await?;
        if !wait(platform, interrupted, Duration::from_secs(30), || {
            status().is_some_and(|c| running(&c, "Paused"))
        })
        .await?
        {
            return Err(Error::Start(
                "the operator did not report the cluster Paused within 30s".into(),
            ));
        }
    }

    Ok(!*interrupted.borrow())
}

/// The cluster's segment interval of continuous backups, when it has
/// them (and it parses).
pub(super) fn segment_interval(s: &crate::scenario::Scenario) -> Option<Duration> {
    let c = s.cluster.spec.backup.as_ref()?.continuous.as_ref()?;
    etcd_operator::units::parse_duration(&c.segment_interval).ok()
}
