//! The runner: sets up the cluster, runs load, probes and the chaos monkey
//! for the scenario's duration, settles, runs the final checks and tears
//! everything down, also on failure and Ctrl-C.

pub mod chaos;
mod finals;
pub mod kube;
pub mod local;
mod platform;
mod preflight;
pub mod procs;
mod steps;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use self::kube::Kube;
use self::local::Local;
use self::platform::Platform;
pub use self::preflight::{check_binaries, platform_problems};
use self::procs::Proc;
use self::steps::{start_chaos, tally, wait};
use crate::client::Pool;
use crate::history::{Phase, now_ms};
use crate::load;
use crate::probe::{self, Prober, Recorder};
use crate::progress::Progress;
use crate::report::RunData;
use crate::scenario::Scenario;

/// Longest wait for the cluster to be Running at the start.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// Grace of the chaos monkey on SIGTERM (it resumes paused members).
const CHAOS_GRACE: Duration = Duration::from_secs(30);

/// Why a run could not be done.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input, found before anything started.
    #[error("{0}")]
    Setup(String),
    /// The cluster could not be brought up.
    #[error("{0}")]
    Start(String),
    /// A file or folder.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A process could not be started.
    #[error(transparent)]
    Proc(#[from] procs::Error),
    /// A Kubernetes API call failed during the run (after preparation).
    #[error("{0}")]
    Kube(String),
}

/// A run that ended in an error, with what it had recorded until then.
#[derive(Debug)]
pub struct Failure {
    /// What went wrong.
    pub error: Error,
    /// The data recorded before it (the error is among its `errors`), when
    /// the output folder existed: a partial report can be written from it.
    pub partial: Option<Box<RunData>>,
}

impl Failure {
    fn bare(error: Error) -> Self {
        Failure {
            error,
            partial: None,
        }
    }
}

impl Error {
    /// An I/O error.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

/// Where the cluster runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PlatformKind {
    /// etcd processes on loopback addresses, run by the runner's own operator.
    Local,
    /// Kubernetes, with the operator already deployed.
    Kube,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// The scenario (validated), its duration already overridden.
    pub scenario: Scenario,
    /// Its file.
    pub scenario_file: PathBuf,
    /// Platform.
    pub platform: PlatformKind,
    /// Output folder.
    pub out: PathBuf,
    /// Seed override for chaos and load.
    pub seed: Option<u64>,
    /// The etcd-operator binary (local).
    pub operator_bin: PathBuf,
    /// The chaos-monkey binary.
    pub chaos_bin: PathBuf,
    /// Folder of etcd binaries as VERSION/etcd (local).
    pub etcd_binaries: PathBuf,
    /// Work folder (local); a temporary one when `None`.
    pub work_dir: Option<PathBuf>,
    /// Kubeconfig (kube).
    pub kubeconfig: Option<PathBuf>,
    /// Namespace (kube).
    pub namespace: String,
    /// Live display on a terminal.
    pub tty: bool,
}

/// Runs a scenario. `interrupted` turns true on Ctrl-C or SIGTERM: the run
/// stops early, tears down and still reports. On an error the run is torn
/// down too, and what it recorded until then comes with the error.
pub async fn run(o: &Options, interrupted: watch::Receiver<bool>) -> Result<RunData, Failure> {
    check_binaries(o).map_err(Failure::bare)?;
    std::fs::create_dir_all(&o.out)
        .map_err(|e| Failure::bare(Error::io(format!("cannot create {}", o.out.display()), e)))?;
    let logs = o.out.join("logs");
    let _ = std::fs::remove_dir_all(&logs);
    let _ = std::fs::remove_file(o.out.join("faults.jsonl"));
    let s = &o.scenario;
    let mut data = RunData::new(s.clone(), o.platform, o.seed);
    let fail = |mut data: RunData, error: Error| {
        data.ended = now_ms();
        data.errors.push(format!("the run failed: {error}"));
        Failure {
            error,
            partial: Some(Box::new(data)),
        }
    };
    let prepared = match o.platform {
        PlatformKind::Local => Local::prepare(
            &s.cluster,
            &o.operator_bin,
            &o.etcd_binaries,
            o.work_dir.as_deref(),
            &logs,
        )
        .map(|l| Platform::Local(Box::new(l))),
        PlatformKind::Kube => {
            Kube::prepare(&s.cluster, o.kubeconfig.as_deref(), &o.namespace, &logs)
                .await
                .map(|k| Platform::Kube(Box::new(k)))
        }
    };
    let mut platform = match prepared {
        Ok(p) => p,
        Err(e) => return Err(fail(data, e)),
    };
    let result = drive(o, &mut platform, &mut data, interrupted).await;
    platform.teardown().await;
    data.ended = now_ms();
    match result {
        Ok(()) => Ok(data),
        Err(e) => Err(fail(data, e)),
    }
}

async fn drive(
    o: &Options,
    platform: &mut Platform,
    data: &mut RunData,
    mut interrupted: watch::Receiver<bool>,
) -> Result<(), Error> {
    let s = &o.scenario;
    let size = s.cluster.members();
    let mut progress = Progress::new(o.tty);
    progress.say(&format!(
        "soak {}: creating cluster {} ({} members, etcd {})",
        s.name, s.cluster.name, size, s.cluster.version
    ));
    if !steps::bring_up(o, platform, &mut interrupted, &mut progress).await? {
        data.interrupted = true;
        return Ok(());
    }
    let status = platform.status();

    // Probes first; load and chaos once the probes see a healthy cluster.
    let pool = Arc::new(Pool::new());
    let prober = Arc::new(Prober::new(
        pool.clone(),
        s.probe.timeout.get(),
        status.clone(),
        platform.url_map(),
        size,
    ));
    let rec = Arc::new(std::sync::Mutex::new(Recorder::default()));
    let initial: Vec<String> = status()
        .and_then(|c| c.status)
        .map(|st| {
            st.members
                .iter()
                .map(|m| (platform.url_map())(&m.client_url))
                .collect()
        })
        .unwrap_or_default();
    let (eps_tx, eps_rx) = watch::channel(initial);
    let (stop_probes, stop_probes_rx) = watch::channel(false);
    let probes = tokio::spawn(probe::run(
        prober.clone(),
        rec.clone(),
        s.probe.interval.get(),
        eps_tx,
        stop_probes_rx.clone(),
    ));
    let checkpoints = tokio::spawn(probe::checkpoints(
        prober.clone(),
        rec.clone(),
        s.probe.checkpoint_interval.get(),
        stop_probes_rx,
    ));
    // An error stops the run, which is then wound down like a finished one
    // (chaos and load stopped, probes collected) but not settled or checked.
    let mut failure: Option<Error> = None;
    match wait(platform, &mut interrupted, Duration::from_secs(30), || {
        probe::lock(&rec).healthy_now()
    })
    .await
    {
        Ok(true) => {}
        Ok(false) => data.notes.push((
            now_ms(),
            "the probes did not find the cluster healthy within 30s of Running; starting anyway"
                .into(),
        )),
        Err(e) => failure = Some(e),
    }

    let load_state = load::shared();
    let (stop_load, stop_load_rx) = watch::channel(false);
    let cfg = load::Config {
        writers: s.load.writers,
        readers: s.load.readers,
        rate: s.load.rate,
        keys: s.load.keys,
        value_size: usize::try_from(s.load.value_size).unwrap_or(64),
        timeout: s.load.timeout.get(),
        seed: o
            .seed
            .or(s.chaos.as_ref().and_then(|c| c.seed))
            .unwrap_or(1),
        allow_rollback: s.bounds.data_loss == crate::scenario::DataLoss::SinceBackup,
    };
    let load_task = tokio::spawn(load::run(
        cfg,
        pool.clone(),
        eps_rx.clone(),
        load_state.clone(),
        stop_load_rx,
    ));
    data.started = now_ms();
    let start = Instant::now();
    let duration = s.duration.get();
    let fault_log = o.out.join("faults.jsonl");
    let chaos_at = s
        .chaos
        .as_ref()
        .and_then(|c| c.start_after)
        .map(|d| d.get())
        .unwrap_or_default();
    let mut monkey: Option<Proc> = None;
    progress.say(&format!(
        "running for {} (load: {} writers, {} readers; output in {})",
        s.duration,
        s.load.writers,
        s.load.readers,
        o.out.display()
    ));

    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut cluster = s.cluster.clone();
    let mut changes = s.changes.iter().peekable();
    'run: while failure.is_none() && start.elapsed() < duration && !*interrupted.borrow() {
        tokio::select! {
            _ = tick.tick() => {}
            _ = interrupted.changed() => {}
        }
        while let Some(c) = changes.next_if(|c| start.elapsed() >= c.after.get()) {
            let next = cluster.changed(c);
            let mut what = Vec::new();
            if next.size != cluster.size {
                what.push(("resize", format!("size {} -> {}", cluster.size, next.size)));
            }
            if next.version != cluster.version {
                what.push((
                    "upgrade",
                    format!("version {} -> {}", cluster.version, next.version),
                ));
            }
            if let Err(e) = platform.change(&next, !s.operator_healing).await {
                failure = Some(e);
                break 'run;
            }
            let version = (next.version != s.cluster.version).then(|| next.version.clone());
            prober.set_expected(next.members(), version);
            for (kind, detail) in what {
                progress.say(&format!("changing the spec: {detail}"));
                data.changes
                    .push(crate::invariants::recovery::FaultEvent::change(
                        now_ms(),
                        kind,
                        detail,
                    ));
            }
            cluster = next;
        }
        if let Some(c) = &s.chaos
            && monkey.is_none()
            && !data.chaos_started
            && start.elapsed() >= chaos_at
        {
            match start_chaos(
                o,
                platform,
                c,
                &fault_log,
                duration.saturating_sub(start.elapsed()),
            ) {
                Ok(m) => monkey = Some(m),
                Err(e) => {
                    failure = Some(e);
                    break 'run;
                }
            }
            data.chaos_started = true;
            progress.say(&format!(
                "chaos-monkey started: {} of {} every {} (log: {})",
                c.fault.map(|f| f.as_str()).unwrap_or("kill"),
                c.target.map(|t| t.as_str()).unwrap_or("random"),
                c.kill_interval,
                o.out.join("logs/chaos-monkey.log").display()
            ));
        }
        if let Some(m) = monkey.as_mut()
            && let Some(st) = m.exited()
        {
            let note = format!(
                "chaos-monkey exited before the end of the run ({st}): {}",
                m.log_tail(5)
            );
            if st.code() == Some(2) {
                data.errors.push(format!(
                    "chaos-monkey rejected its input: {}",
                    m.log_tail(5)
                ));
            }
            data.notes.push((now_ms(), note));
            monkey = None;
        }
        if let Some(note) = platform.tend().await {
            data.notes.push((now_ms(), note));
        }
        progress.update(&tally(
            start,
            duration,
            &fault_log,
            &rec,
            &load_state,
            s,
            "run",
        ));
    }
    if *interrupted.borrow() {
        data.interrupted = true;
    }

    // Stop chaos (it resumes paused members) and the load.
    if let Some(mut m) = monkey.take() {
        match m.stop_async(CHAOS_GRACE).await {
            Some(st) if st.success() => {}
            Some(st) => data.notes.push((
                now_ms(),
                format!("chaos-monkey stopped with {st}: {}", m.log_tail(5)),
            )),
            None => data
                .notes
                .push((now_ms(), "chaos-monkey had to be killed".into())),
        }
    }
    let _ = stop_load.send(true);
    let _ = tokio::time::timeout(s.load.timeout.get() + Duration::from_secs(10), load_task).await;
    data.run_end = now_ms();
    prober.set_phase(Phase::Settle);

    // Settle, then the final checks.
    if !data.interrupted && failure.is_none() {
        let live = finals::Live {
            pool: &pool,
            prober: &prober,
            rec: &rec,
            endpoints: &eps_rx,
            load: &load_state,
        };
        if let Err(e) = finals::settle_and_check(
            o,
            platform,
            &live,
            data,
            &mut interrupted,
            &mut progress,
            &fault_log,
        )
        .await
        {
            failure = Some(e);
        }
    }
    let _ = stop_probes.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(30), probes).await;
    let _ = tokio::time::timeout(Duration::from_secs(30), checkpoints).await;
    progress.update(&tally(
        start,
        duration,
        &fault_log,
        &rec,
        &load_state,
        s,
        "done",
    ));
    progress.finish();

    let r = std::mem::take(&mut *probe::lock(&rec));
    data.samples = r.samples;
    data.checkpoints = r.checkpoints;
    data.live_violations.extend(r.violations);
    data.leader_terms = r.leaders.terms();
    let mut st = load::lock(&load_state);
    data.live_violations.append(&mut st.violations);
    if st.dropped > 0 {
        data.errors.push(format!(
            "{} more client-side violations (stale reads, revisions going back) were counted but not kept",
            st.dropped
        ));
    }
    data.ledger_acked = st.ledger.acked();
    data.ledger_uncertain = st.ledger.uncertain_count();
    data.load = std::mem::take(&mut st.stats);
    data.faults = etcd_operator::faults::read(&fault_log).unwrap_or_default();
    failure.map_or(Ok(()), Err)
}
