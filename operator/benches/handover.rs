//! Benchmark of planned changes and leader recovery (issue 14), each number
//! beside a floor from the same run:
//!
//! * the longest write gap a writer through every endpoint sees during a
//!   rolling upgrade of 3 members (3.4.23 -> 3.5.1) and during a 5 -> 3
//!   scale-down while the newest member leads, with the operator's
//!   handover (it keeps the leader: the newest followers go) and without
//!   it (`--no-leader-handover`: the newest go, the leader among them);
//!   floors: the same writer on an undisturbed cluster for as long, and
//!   the same scale-down done by hand on etcd alone, once with a
//!   MoveLeader and the leader removed, once removing followers only;
//! * leader `kill -9` -> 3 members healthy, with etcd's default timing and
//!   with 25ms/250ms; floor: etcd alone with the same flags, the leader
//!   killed and restarted by hand at once;
//! * new leaders (raft terms) per minute on an idle and on a loaded machine
//!   (every core busy, plus writes) for a few timings: which tuning keeps
//!   a loaded 2-core machine free of spurious elections;
//! * the operator idle with 100 clusters of 1 member (RSS, CPU).
//!
//! Prints numbers; never passes or fails on time. `BENCH_RUNS` sets the
//! runs per measurement (default 5). Arguments after `--` pick sections by
//! name (`gaps`, `leader-kill`, `elections`, `idle`; all by default), e.g.
//! `cargo bench -p etcd-operator --bench handover -- idle`.

// A benchmark that cannot do a step has nothing to report: it stops there.
#![allow(clippy::unwrap_used)]

mod floor;
mod support;

// The sections on the machine's load, in `handover/` beside this file.
#[path = "handover/elections.rs"]
mod elections;
#[path = "handover/idle.rs"]
mod idle;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use elections::spurious_elections;
use etcd_operator::etcd::Clients;
use etcd_operator::member::Tuning;
use etcd_operator::testing::bench::wanted;
use etcd_operator::testing::writer::{WriteReport, Writer};
use etcd_operator::testing::{Env, client_urls, kill9, manifest};
use idle::idle_100;
use support::until_healthy;

fn runs() -> usize {
    support::runs(5)
}

fn operator_env(handover: bool) -> Env {
    let mut env = Env::new();
    env.operator_bin = Some(env!("CARGO_BIN_EXE_etcd-operator").into());
    env.log_filter = "info".into();
    if !handover {
        env.operator_args.push("--no-leader-handover".into());
    }
    env
}

fn tuned(name: &str, size: u32, version: &str, tuning: Option<(u32, u32)>) -> String {
    let mut m = manifest(name, size, version);
    if let Some((h, e)) = tuning {
        m.push_str(&format!(
            "  tuning: {{heartbeatInterval: {h}ms, electionTimeout: {e}ms}}\n"
        ));
    }
    m
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Median and max of a sample, in ms.
fn med_max(v: &mut [Duration]) -> (f64, f64) {
    v.sort();
    (ms(v[v.len() / 2]), ms(v[v.len() - 1]))
}

fn gap_row(
    what: &str,
    with: &mut [Duration],
    without: &mut [Duration],
    floor: &mut [Duration],
    failed: usize,
) {
    let (wm, wx) = med_max(with);
    let (nm, nx) = med_max(without);
    let (fm, fx) = med_max(floor);
    println!(
        "{what:<34} n={:<2} with handover median {wm:>6.0} ms max {wx:>6.0} ms | without \
         median {nm:>6.0} ms max {nx:>6.0} ms | floor (no change) median {fm:>5.0} ms max \
         {fx:>5.0} ms | failed writes {failed} | target < 100 ms with",
        with.len()
    );
}

/// With `BENCH_STORY` set, prints where a run's longest write gap went:
/// the operator's log, the members' notable lines and the writer's
/// timeline, in time order.
fn story(env: &Env, cluster: &str, what: &str, r: &WriteReport) {
    if std::env::var_os("BENCH_STORY").is_none() {
        return;
    }
    let end = r
        .longest_gap_end
        .as_ref()
        .map(|(at, via)| format!("{} via {via}", humantime::format_rfc3339_micros(*at)));
    println!(
        "--- {what}: longest gap {:?} ended {} ---\n{}",
        r.longest_gap,
        end.unwrap_or_default(),
        r.started_at
            .map(|s| env.story(cluster, s, &r.timeline))
            .unwrap_or_default()
    );
}

/// A rolling upgrade under a writer: its report.
fn upgrade_once(handover: bool) -> WriteReport {
    let mut env = operator_env(handover);
    env.write_manifest("u.yaml", &manifest("u", 3, "3.4.23"));
    env.start_operator();
    let urls = client_urls(&env.wait_running("u", 3));
    let writer = Writer::start(urls);
    env.write_manifest("u.yaml", &manifest("u", 3, "3.5.1"));
    env.wait_for("upgraded", || {
        let s = env.wait_running("u", 3).status?;
        (s.current_version.as_deref() == Some("3.5.1")).then_some(())
    });
    let r = writer.stop();
    story(&env, "u", &format!("upgrade, handover {handover}"), &r);
    r
}

/// A 5 -> 3 scale-down while the newest member leads (moved there): with
/// the handover on the operator keeps the leader and removes the newest
/// followers; without it, it removes the newest, the leader among them.
fn scale_down_once(handover: bool, clients: &Clients, rt: &tokio::runtime::Runtime) -> WriteReport {
    let mut env = operator_env(handover);
    env.write_manifest("s.yaml", &manifest("s", 5, "3.4.23"));
    env.start_operator();
    let c = env.wait_running("s", 5);
    let newest = c.status.clone().unwrap().members.pop().unwrap();
    let id = u64::from_str_radix(newest.id.as_deref().unwrap(), 16).unwrap();
    env.wait_for("the newest leading", || {
        let leader = env
            .status("s")?
            .status?
            .members
            .into_iter()
            .find(|m| m.leader)?;
        if leader.name == newest.name {
            return Some(());
        }
        let _ = rt.block_on(clients.move_leader(&leader.client_url, id));
        None
    });
    let writer = Writer::start(client_urls(&c));
    env.write_manifest("s.yaml", &manifest("s", 3, "3.4.23"));
    // With the handover the newest (the leader) stays and the newest
    // followers go; without it the newest go, the leader among them.
    env.wait_running("s", 3);
    let r = writer.stop();
    story(&env, "s", &format!("scale-down, handover {handover}"), &r);
    r
}

/// The same 5 -> 3 scale-down done by hand on etcd alone (no operator),
/// under the same writer, the newest member leading: with `leader_goes`,
/// MoveLeader to the oldest, then remove the two newest (each removed,
/// then killed, as the operator does); without, remove the two newest
/// followers and leave the leader alone (no leadership change at all).
/// What etcd and this client cost for the same changes.
async fn scale_down_by_hand(clients: &Clients, leader_goes: bool, run: usize) -> WriteReport {
    let dir = tempfile::tempdir().unwrap();
    let mut taken = HashSet::new();
    let seed = format!("floor-sd-{run}-{leader_goes}");
    let mut hands = floor::members(dir.path(), 5, &seed, "h", &mut taken);
    for h in &mut hands {
        h.start();
    }
    let urls = floor::client_urls(&hands);
    until_healthy(clients, &urls, Instant::now()).await;
    let mut ids = Vec::new();
    for u in &urls {
        ids.push(clients.status(u).await.unwrap().id);
    }
    // The newest leads, as in the operator's run.
    loop {
        let l = leader(clients, &urls).await;
        if l == 4 {
            break;
        }
        let _ = clients.move_leader(&urls[l], ids[4]).await;
    }
    let writer = Writer::start(urls.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let victims = if leader_goes {
        // MoveLeader answers once h0 leads; on a loaded machine that can
        // take longer than the client waits, so what counts is h0 leading.
        let t0 = Instant::now();
        let _ = clients.move_leader(&urls[4], ids[0]).await;
        while clients.status(&urls[0]).await.ok().map(|s| s.leader) != Some(ids[0]) {
            assert!(t0.elapsed() < support::BOUND, "h0 did not lead");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        [4, 3]
    } else {
        [3, 2]
    };
    for v in victims {
        // etcd refuses a membership change while a member connected less
        // than 5 s ago ("unhealthy cluster"); asked again every 200 ms, as
        // the operator does.
        let t0 = Instant::now();
        while let Err(e) = clients.remove(&urls[0], ids[v]).await {
            assert!(e.is_refused() && t0.elapsed() < support::BOUND, "{e}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        hands[v].kill().await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = tokio::task::spawn_blocking(move || writer.stop())
        .await
        .unwrap();
    for h in &mut hands {
        h.kill().await;
    }
    r
}

/// The writer on an undisturbed cluster for `d`.
fn undisturbed(d: Duration) -> Duration {
    let mut env = operator_env(true);
    env.write_manifest("f.yaml", &manifest("f", 3, "3.4.23"));
    env.start_operator();
    let writer = Writer::start(client_urls(&env.wait_running("f", 3)));
    std::thread::sleep(d);
    writer.stop().longest_gap
}

fn write_gaps(clients: &Clients, rt: &tokio::runtime::Runtime) {
    let (mut moved, mut stayed) = (Vec::new(), Vec::new());
    let mut failed = 0;
    for run in 0..runs() {
        for (leader_goes, out) in [(true, &mut moved), (false, &mut stayed)] {
            let r = rt.block_on(scale_down_by_hand(clients, leader_goes, run));
            failed += r.failed.len();
            if std::env::var_os("BENCH_STORY").is_some() {
                println!(
                    "--- by hand, leader goes {leader_goes}: longest gap {:?} ---\n{}",
                    r.longest_gap,
                    r.timeline.join("\n")
                );
            }
            out.push(r.longest_gap);
        }
    }
    let (mm, mx) = med_max(&mut moved);
    let (sm, sx) = med_max(&mut stayed);
    println!(
        "{:<34} n={:<2} etcd alone, by hand: MoveLeader + remove the 2 newest median {mm:>6.0} ms \
         max {mx:>6.0} ms | remove 2 followers, leader stays median {sm:>6.0} ms max {sx:>6.0} ms \
         | failed writes {failed}",
        "5 -> 3 scale-down floor, write gap",
        moved.len()
    );
    for (what, scale) in [
        ("rolling upgrade of 3, write gap", false),
        ("5 -> 3 scale-down (newest leads)", true),
    ] {
        let (mut with, mut without, mut floor) = (Vec::new(), Vec::new(), Vec::new());
        let mut failed = 0;
        for _ in 0..runs() {
            for (handover, out) in [(true, &mut with), (false, &mut without)] {
                let started = Instant::now();
                let r = if scale {
                    scale_down_once(handover, clients, rt)
                } else {
                    upgrade_once(handover)
                };
                failed += r.failed.len();
                out.push(r.longest_gap);
                if handover {
                    floor.push(undisturbed(started.elapsed().min(Duration::from_secs(10))));
                }
            }
        }
        gap_row(what, &mut with, &mut without, &mut floor, failed);
    }
}

/// The leader of `urls` (its index), by what the members say.
async fn leader(clients: &Clients, urls: &[String]) -> usize {
    loop {
        for (i, u) in urls.iter().enumerate() {
            if let Ok(s) = clients.status(u).await
                && s.leader == s.id
            {
                return i;
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn leader_kill(
    clients: &Clients,
    tuning: Option<(u32, u32)>,
) -> (Vec<Duration>, Vec<Duration>) {
    let mut env = operator_env(true);
    env.write_manifest("k.yaml", &tuned("k", 3, "3.4.23", tuning));
    env.start_operator();
    let urls = client_urls(&env.wait_running("k", 3));
    let mut ours = Vec::new();
    for _ in 0..runs() {
        env.wait_running("k", 3);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let l = leader(clients, &urls).await;
        let name = format!("k-{l}");
        let t0 = Instant::now();
        kill9(env.pid("k", &name).unwrap());
        ours.push(until_healthy(clients, &urls, t0).await);
    }
    drop(env);
    let dir = tempfile::tempdir().unwrap();
    let mut taken = HashSet::new();
    let mut hands = floor::members(dir.path(), 3, "floor-kill", "h", &mut taken);
    for h in &mut hands {
        h.record.tuning = Tuning::new(tuning.map(|t| t.0), tuning.map(|t| t.1));
        h.start();
    }
    let urls = floor::client_urls(&hands);
    until_healthy(clients, &urls, Instant::now()).await;
    let mut floor = Vec::new();
    for _ in 0..runs() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let l = leader(clients, &urls).await;
        let t0 = Instant::now();
        hands[l].kill().await;
        hands[l].start();
        floor.push(until_healthy(clients, &urls, t0).await);
    }
    (ours, floor)
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let clients = Clients::new(Duration::from_millis(100));
    println!(
        "etcd-operator handover benchmark (local platform, {} runs each)",
        runs()
    );
    if wanted("gaps") {
        write_gaps(&clients, &rt);
    }
    for (label, tuning) in [
        ("default 100/1000 ms", None),
        ("tuned 25/250 ms", Some((25, 250))),
    ] {
        if !wanted("leader-kill") {
            break;
        }
        let (mut ours, mut floor) = rt.block_on(leader_kill(&clients, tuning));
        let (om, ox) = med_max(&mut ours);
        let (fm, fx) = med_max(&mut floor);
        println!(
            "{:<34} n={:<2} median {om:>6.0} ms max {ox:>6.0} ms | floor (etcd alone, same flags) \
             median {fm:>6.0} ms max {fx:>6.0} ms | ratio {:>4.2}x | target within 1.2x",
            format!("leader kill -9 -> 3 healthy, {label}"),
            ours.len(),
            om / fm
        );
    }
    let window = Duration::from_secs(60);
    for tuning in [Some((25, 250)), Some((50, 500)), None] {
        if !wanted("elections") {
            break;
        }
        let (idle, loaded) = spurious_elections(tuning, window);
        let label = tuning.map_or("100/1000 ms (default)".to_string(), |(h, e)| {
            format!("{h}/{e} ms")
        });
        println!(
            "{:<34} new leaders in {window:?}: idle {idle}, loaded (all cores busy + writes) {loaded}",
            format!("spurious elections, {label}")
        );
    }
    if wanted("idle") {
        idle_100();
    }
}
