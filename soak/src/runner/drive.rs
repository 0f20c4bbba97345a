//! One run, from the cluster coming up to what the checks need, in phases:
//! observers (probes, KV hash checkpoints, watchers) start, then the load
//! (recording history.jsonl) and the chaos monkey run for the scenario's
//! duration while spec changes are made; then chaos and load stop, the
//! cluster settles, the final checks run, the watchers catch up to the
//! final read-back, and what was recorded is collected. Background tasks
//! live in `JoinSet`s and stop through `CancellationToken`s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::monkeys::{Monkeys, STANDBY_FAULT_LOG};
use super::observers::{Observers, WATCHERS};
use super::platform::Platform;
use super::steps::{self, tally, wait};
use super::{Error, Options, checks, finals, standby};
use crate::data::RunData;
use crate::history::{Phase, now_ms};
use crate::invariants::recovery::FaultEvent;
use crate::load;
use crate::ops::Clock;
use crate::ops::file::Writer;
use crate::probe;
use crate::progress::Progress;
use crate::scenario::Dur;

/// Drives the run; see the module doc.
pub(super) async fn drive(
    o: &Options,
    platform: &mut Platform,
    data: &mut RunData,
    mut interrupted: watch::Receiver<bool>,
) -> Result<(), Error> {
    let s = &o.scenario;
    let mut progress = Progress::new(o.tty, s.duration.get());
    progress.say(&format!(
        "soak {}: creating cluster {} ({} members, etcd {})",
        s.name,
        s.cluster.name,
        s.cluster.members(),
        s.cluster.spec.version
    ));
    if !steps::bring_up(o, platform, &mut interrupted, &mut progress).await? {
        data.interrupted = true;
        return Ok(());
    }
    let clock = Clock::new();
    let mut obs = Observers::start(o, platform, clock);
    // An error stops the run, which is then wound down like a finished one
    // (chaos and load stopped, probes collected) but not settled or checked.
    let mut failure: Option<Error> = None;
    let rec = obs.rec.clone();
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
    let mut standby = None;
    if let Some(sb) = &s.standby
        && failure.is_none()
    {
        let with = (obs.pool.clone(), s.probe.interval.get());
        match standby::bring_up(o, platform, sb, &mut interrupted, &mut progress, with).await {
            Ok(r) => standby = r,
            Err(e) => failure = Some(e),
        }
    }

    let history_path = o.out.join("history.jsonl");
    let history = Arc::new(Writer::create(&history_path).map_err(|e| match e {
        crate::ops::file::Error::Io { path, source } => {
            Error::io(format!("cannot create {}", path.display()), source)
        }
        other => Error::Start(other.to_string()),
    })?);
    let load_state = load::shared();
    let load_stop = CancellationToken::new();
    let cfg = load::Config {
        writers: s.load.writers,
        readers: s.load.readers,
        rate: s.load.rate,
        keys: s.load.keys,
        value_size: steps::cfg_value_size(s),
        timeout: s.load.timeout.get(),
        seed: o
            .seed
            .or(s.chaos.as_ref().and_then(|c| c.seed))
            .unwrap_or(1),
        allow_rollback: s.bounds.data_loss == crate::scenario::DataLoss::SinceBackup,
        txn_share: load::TXN_SHARE,
        history: Some(history.clone()),
        clock,
        sabotage: o.sabotage,
    };
    let mut load_tasks = JoinSet::new();
    load_tasks.spawn(load::run(
        cfg,
        obs.pool.clone(),
        obs.endpoints.clone(),
        load_state.clone(),
        load_stop.clone(),
    ));
    data.started = now_ms();
    let started_us = clock.now();
    let start = Instant::now();
    let fault_log = o.out.join("faults.jsonl");
    progress.say(&format!(
        "running for {} (load: {} writers, {} readers; {} watchers; output in {})",
        s.duration,
        s.load.writers,
        s.load.readers,
        WATCHERS,
        o.out.display()
    ));
    let mut monkeys = Monkeys::default();
    let standby_target = standby
        .as_ref()
        .filter(|_| {
            s.standby
                .as_ref()
                .is_some_and(|sb| sb.chaos_on(s.chaos.is_some()))
        })
        .map(|r| r.name().to_string());
    if failure.is_none() {
        failure = run_phase(
            o,
            platform,
            data,
            &mut interrupted,
            &mut progress,
            &obs,
            &load_state,
            (&mut monkeys, standby_target.as_deref(), standby.as_ref()),
            start,
        )
        .await
        .err();
    }
    if *interrupted.borrow() {
        data.interrupted = true;
    }

    // Stop chaos (it resumes paused members) and the load.
    monkeys.stop(data).await;
    load_stop.cancel();
    let _ = tokio::time::timeout(s.load.timeout.get() + Duration::from_secs(10), async {
        while load_tasks.join_next().await.is_some() {}
    })
    .await;
    if let Err(e) = history.finish() {
        data.errors
            .push(format!("the history could not be written: {e}"));
    }
    data.run_end = now_ms();
    obs.prober.set_phase(Phase::Settle);

    // Settle, then the final checks; the watchers catch up with them.
    let mut back = None;
    if !data.interrupted && failure.is_none() {
        let live = finals::Live {
            pool: &obs.pool,
            prober: &obs.prober,
            rec: &obs.rec,
            endpoints: &obs.endpoints,
            load: &load_state,
        };
        match finals::settle_and_check(
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
            Ok(b) => back = b,
            Err(e) => failure = Some(e),
        }
        if let Some((_, rev)) = &back {
            obs.catch_up(*rev).await;
        }
        data.store_chains = platform.store_chains().await;
    }
    let traces = obs.stop().await;
    // The primary no longer changes (load, chaos and probes stopped): the
    // standby is compared with it.
    if let Some(sb) = standby.take() {
        // After a loss there is no primary to compare with: the promotion's
        // accounting stands in for it.
        let compare = !data.interrupted && failure.is_none() && data.promotion.is_none();
        if compare {
            progress.say(&format!("comparing standby {} with the primary", sb.name()));
        }
        let primary = obs.endpoints.borrow().clone();
        let mut run = sb.finish(&obs.pool, &primary, compare).await;
        run.faults =
            etcd_operator::faults::read(&o.out.join(STANDBY_FAULT_LOG)).unwrap_or_default();
        data.standby = Some(run);
    }
    progress.update(&tally(
        start,
        s.duration.get(),
        &fault_log,
        &obs.rec,
        &load_state,
        s,
        "done",
    ));
    progress.finish();

    let mut r = std::mem::take(&mut *probe::lock(&obs.rec));
    let last_at = r.samples.last().map_or(0, |x| x.at);
    r.violations.extend(r.leaders.finish(last_at));
    let reported = crate::history::restores(&r.samples).first().map(|x| x.at);
    let seen = load::lock(&load_state).stats.first_rollback;
    let cut = match (reported, seen) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
    .map(|ms| ms.saturating_mul(1000));
    // After the primary's loss the history and the watches are checked up
    // to it (the promoted cluster reuses the lost revisions): lose.rs.
    let cut = cut.into_iter().chain(standby::loss_us(data)).min();
    data.samples = r.samples;
    data.checkpoints = r.checkpoints;
    data.live_violations.extend(r.violations);
    data.leader_terms = r.leaders.terms();
    {
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
    }
    data.faults = etcd_operator::faults::read(&fault_log).unwrap_or_default();

    // The history and the watches, checked.
    progress.say("checking the history (linearizability) and the watches");
    let finals = back.map(|(f, rev)| {
        let state: crate::watch::check::FinalState = f
            .into_iter()
            .map(|(k, (v, m))| (k, (crate::watch::value_number(&v), m)))
            .collect();
        (state, rev)
    });
    let after = data
        .promotion
        .is_some()
        .then(|| finals.as_ref().map(|f| f.0.clone()));
    let input = checks::Input {
        started: started_us,
        end: clock.now(),
        traces,
        finals,
        cut,
        options: crate::lin::Options::default(),
    };
    tokio::task::block_in_place(|| checks::run(&history_path, input, data));
    let (after, segment) = ((after.flatten(), clock.now()), steps::segment_interval(s));
    let with = (after.0.as_ref(), after.1);
    tokio::task::block_in_place(|| standby::account(&history_path, data, segment, with));
    if let Some(l) = &data.linearizability {
        progress.say(&format!(
            "history: {} operations over {} keys checked in {:.1}s: {} violations{}",
            l.counts.ops,
            l.keys,
            l.elapsed_ms as f64 / 1000.0,
            l.violations,
            if l.unknown_keys.is_empty() {
                String::new()
            } else {
                format!(", {} keys unknown (time bound)", l.unknown_keys.len())
            }
        ));
    }
    failure.map_or(Ok(()), Err)
}

/// The run itself: spec changes, the chaos monkey, tending the platform
/// and the live view, until the duration is over, an error or Ctrl-C.
#[allow(clippy::too_many_arguments)]
async fn run_phase(
    o: &Options,
    platform: &mut Platform,
    data: &mut RunData,
    interrupted: &mut watch::Receiver<bool>,
    progress: &mut Progress,
    obs: &Observers,
    load_state: &load::Shared,
    (monkeys, standby, running): (&mut Monkeys, Option<&str>, Option<&standby::Running>),
    start: Instant,
) -> Result<(), Error> {
    let s = &o.scenario;
    let mut lose_at = s.standby.as_ref().and_then(|sb| sb.lose_primary_at);
    let duration = s.duration.get();
    let fault_log = o.out.join("faults.jsonl");
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut cluster = s.cluster.clone();
    let mut changes = s.changes.iter().peekable();
    while start.elapsed() < duration && !*interrupted.borrow() {
        tokio::select! {
            _ = tick.tick() => {}
            _ = interrupted.changed() => {}
        }
        while let Some(c) = changes.next_if(|c| start.elapsed() >= c.after.get()) {
            let next = cluster.changed(c);
            let mut what = Vec::new();
            if next.spec.size != cluster.spec.size {
                let (from, to) = (cluster.spec.size, next.spec.size);
                what.push(("resize", format!("size {from} -> {to}")));
            }
            if next.spec.version != cluster.spec.version {
                what.push((
                    "upgrade",
                    format!("version {} -> {}", cluster.spec.version, next.spec.version),
                ));
            }
            platform.change(&next, !s.operator_healing).await?;
            let version =
                (next.spec.version != s.cluster.spec.version).then(|| next.spec.version.clone());
            obs.prober.set_expected(next.members(), version);
            for (kind, detail) in what {
                progress.say(&format!("changing the spec: {detail}"));
                data.changes
                    .push(FaultEvent::change(now_ms(), kind, detail));
            }
            cluster = next;
        }
        let left = Dur::whole_millis(duration.saturating_sub(start.elapsed()));
        if let Some(c) = &s.chaos
            && !data.chaos_started
        {
            data.chaos_started = true;
            if c.start_after >= left.get() {
                // The monkey refuses a wait as long as its run: nothing to inject.
                data.notes.push((
                    now_ms(),
                    format!(
                        "chaos-monkey not started: chaos.startAfter ({}) reaches past the \
                         {left} left of the run",
                        Dur(c.start_after)
                    ),
                ));
            } else {
                *monkeys = Monkeys::start(o, platform, c, standby, left.get())?;
                let after = if c.start_after.is_zero() {
                    String::new()
                } else {
                    format!(", the first interval after {}", Dur(c.start_after))
                };
                let both = standby
                    .map(|n| format!(", and a second one on {n}"))
                    .unwrap_or_default();
                progress.say(&format!(
                    "chaos-monkey started: {} of {} every {}{after}{both} (log: {})",
                    c.fault.as_str(),
                    c.target.as_str(),
                    Dur(c.kill_interval),
                    o.out.join("logs/chaos-monkey.log").display()
                ));
            }
        }
        if let (Some(at), Some(sb)) = (lose_at, running)
            && start.elapsed() >= at.get()
        {
            lose_at = None;
            let live = standby::LoseLive {
                pool: &obs.pool,
                prober: &obs.prober,
                load: load_state,
            };
            let ui = (&mut *interrupted, &mut *progress);
            standby::lose_primary(o, platform, (sb, monkeys), &live, data, ui).await?;
        }
        monkeys.check(data);
        if let Some(note) = platform.tend().await {
            data.notes.push((now_ms(), note));
        }
        progress.update(&tally(
            start, duration, &fault_log, &obs.rec, load_state, s, "run",
        ));
    }
    Ok(())
}
