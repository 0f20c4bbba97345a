//! Benchmark of disaster recovery (issue 15), each number beside a floor
//! from the same run (the same steps by hand with etcd, etcdctl and
//! etcdutl, no operator), operator and floor runs alternating:
//!
//! * `survivor`: a majority (2 of 3) destroyed (killed, data wiped) under a
//!   writer, the third kept: loss -> 3 healthy members with one leader,
//!   rebuilt by the operator from the survivor (`recovery.fromSurvivor`);
//!   floor: the survivor restarted alone with `--force-new-cluster`, the
//!   others `etcdctl member add`ed and started on empty data one at a time.
//! * `backup`: the same loss with `recovery: {restoreFromBackup: true,
//!   fromSurvivor: false}` and continuous backups (1 s segments): rebuilt
//!   from the full backup plus its delta segments; floor
//!   (`support/dr_backup.rs`): the same steps by hand, the changes after a
//!   full snapshot followed by a watch, then after the loss the snapshot
//!   restored into a scratch member, the changes replayed into it, its
//!   database sealed as a snapshot and every member restored from that and
//!   started.
//! * `throughput`: the operator's restore path of a chain of
//!   `BENCH_RESTORE_MIB` MiB (default 500: a full backup of 80 %, delta
//!   segments of 20 %): the base restored into a scratch member, the
//!   segments replayed, the member stopped and its database sealed as a
//!   snapshot file, its revision checked
//!   (`LocalBackups::open_chain_for_restore`, what a rebuild calls); floor:
//!   `etcdutl snapshot restore` of the resulting snapshot.
//!
//! Both loss rows print the acknowledged writes missing afterwards and the
//! loss window in seconds (from the last write kept to the last write
//! acknowledged before the loss). Prints numbers; never passes or fails on
//! time. `BENCH_RUNS` sets the runs per measurement (default 3). Arguments
//! after `--` pick sections by name (all by default), e.g.
//! `cargo bench -p etcd-operator --bench recovery -- throughput`.

// A benchmark that cannot do a step has nothing to report: it stops there.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use etcd_operator::etcd::Clients;
use etcd_operator::testing::bench::wanted;
use etcd_operator::testing::{client_urls, manifest};
use support::dr;
use support::dr_backup;
use support::rebuild::{self, Run, destroy, loss_text, operator_env, recovery, until_rebuilt};
use support::stats;

use support::throughput;

fn runs() -> usize {
    support::runs(3)
}

fn from_survivor(name: &str) -> String {
    let mut m = manifest(name, 3, "3.4.23");
    m.push_str("  recovery:\n    fromSurvivor: true\n");
    m
}

fn survivor_operator(rt: &tokio::runtime::Runtime, clients: &Clients) -> Run {
    let mut env = operator_env();
    env.write_manifest("sv.yaml", &from_survivor("sv"));
    env.start_operator();
    let c = env.wait_running("sv", 3);
    let members = c.status.clone().unwrap().members;
    let keep = members.iter().find(|m| !m.leader).unwrap().name.clone();
    let writer = dr::writer_with_acks(client_urls(&c), "w/");
    for m in members.iter().filter(|m| m.name != keep) {
        destroy(&env, "sv", &m.name);
    }
    let lost_at = Instant::now();
    let (took, c) = rt.block_on(until_rebuilt(&env, clients, "sv", lost_at));
    let acked = writer.stop();
    let r = recovery(&c);
    Run {
        took,
        loss: dr::loss(&acked, &client_urls(&c), "w/", lost_at),
        note: format!("source {:?}, {} revisions lost", r.source, r.lost_revisions),
    }
}

fn survivor_floor(rt: &tokio::runtime::Runtime, clients: &Clients, run: usize) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let mut taken = HashSet::new();
    let tag = format!("dr-survivor-{run}");
    let mut hands = rt.block_on(dr::hand_cluster(clients, dir.path(), &tag, &mut taken));
    let urls = dr::urls(&hands);
    let keep = rt.block_on(dr::a_follower(clients, &urls));
    let writer = dr::writer_with_acks(urls.clone(), "w/");
    for i in (0..hands.len()).filter(|i| *i != keep) {
        rt.block_on(dr::destroy(&mut hands[i]));
    }
    let lost_at = Instant::now();
    let took = rt.block_on(dr::rebuild_from_survivor(
        clients, &mut hands, keep, lost_at,
    ));
    let acked = writer.stop();
    Run {
        took,
        loss: dr::loss(&acked, &urls, "w/", lost_at),
        note: String::new(),
    }
}

fn backup_floor(
    rt: &tokio::runtime::Runtime,
    clients: &Clients,
    run: usize,
    revisions: i64,
) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let mut taken = HashSet::new();
    let tag = format!("dr-backup-{run}");
    let mut hands = rt.block_on(dr::hand_cluster(clients, dir.path(), &tag, &mut taken));
    let urls = dr::urls(&hands);
    let snapshot = dir.path().join("full.db");
    dr::snapshot_save(&urls[0], &snapshot);
    let tool = etcd_operator::backup::tools::Tool {
        label: "etcdctl 3.4.23".into(),
        path: dr::etcdctl_34(),
    };
    let base = rt
        .block_on(etcd_operator::backup::tools::status(&tool, &snapshot))
        .unwrap()
        .revision;
    // The changes after the snapshot, followed as the operator's delta
    // segments follow them.
    let changes = rt.block_on(dr_backup::Changes::follow(&urls, base + 1));
    let writer = dr::writer_with_acks(urls.clone(), "w/");
    // The workload: as many revisions after the snapshot as the operator
    // replayed (the replay is one transaction per revision).
    let since = Instant::now();
    while changes.followed() < revisions {
        assert!(since.elapsed() < support::BOUND, "no {revisions} revisions");
        std::thread::sleep(Duration::from_millis(5));
    }
    for h in &mut hands {
        rt.block_on(dr::destroy(h));
    }
    let lost_at = Instant::now();
    let chain = changes.take(base);
    let revisions = chain.last_revision() - base;
    let (took, p) = rt.block_on(dr_backup::rebuild(
        clients,
        &mut hands,
        dir.path(),
        &snapshot,
        &chain,
        lost_at,
    ));
    let acked = writer.stop();
    Run {
        took,
        loss: dr::loss(&acked, &urls, "w/", lost_at),
        note: format!(
            "{revisions} revisions replayed after {:.3}s, sealed after {:.3}s, 3 restores done \
             after {:.3}s",
            p.replayed.as_secs_f64(),
            p.sealed.as_secs_f64(),
            p.restored.as_secs_f64()
        ),
    }
}

fn report(what: &str, ours: &[Run], floor: &[Run], floor_note: &str) {
    let t = |v: &[Run]| v.iter().map(|r| r.took).collect::<Vec<_>>();
    let (om, op) = stats(&t(ours));
    let (fm, fp) = stats(&t(floor));
    println!(
        "{what:<36} n={:<2} operator median {om:>7.3}s p99 {op:>7.3}s | floor median {fm:>7.3}s \
         p99 {fp:>7.3}s | ratio {:>5.2}x | target within 2x",
        ours.len(),
        om / fm
    );
    println!("    operator: {}", loss_text(ours));
    for r in ours {
        println!("      {:.3}s, {}", r.took.as_secs_f64(), r.note);
    }
    println!("    floor ({floor_note}): {}", loss_text(floor));
    for r in floor.iter().filter(|r| !r.note.is_empty()) {
        println!("      {:.3}s, {}", r.took.as_secs_f64(), r.note);
    }
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let clients = Clients::new(Duration::from_millis(200));
    println!(
        "etcd-operator disaster-recovery benchmark (local platform, {} runs each)",
        runs()
    );
    if wanted("survivor") {
        let (mut ours, mut floor) = (Vec::new(), Vec::new());
        for run in 0..runs() {
            ours.push(survivor_operator(&rt, &clients));
            floor.push(survivor_floor(&rt, &clients, run));
        }
        report(
            "2 of 3 destroyed -> 3 healthy, survivor",
            &ours,
            &floor,
            "--force-new-cluster + member add by hand",
        );
    }
    if wanted("backup") {
        let (mut ours, mut floor) = (Vec::new(), Vec::new());
        for run in 0..runs() {
            let (r, revisions) = rebuild::backup_operator(&rt, &clients, None);
            ours.push(r);
            floor.push(backup_floor(&rt, &clients, run, revisions));
        }
        report(
            "majority destroyed -> 3 healthy, backups",
            &ours,
            &floor,
            "all 3 destroyed; full snapshot restored into a scratch member, the changes after \
             it (watched) replayed, its database sealed, 3 members restored from it",
        );
    }
    if wanted("throughput") {
        throughput::run(&rt, runs());
    }
}
