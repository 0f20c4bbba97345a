//! Network faults against real 3-member etcd clusters on loopback: each is
//! injected, seen in etcd's own view (a new leader, "no leader" on the
//! member cut off, a snapshot sent), healed, and the kernel's rule list is
//! checked clean afterwards (a guard removes the monkey's rules when a test
//! fails). Needs root and iptables, as the faults do.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::etcd::{Cluster, RulesGuard};
use common::{Monkey, one_fault_args, records, wait_for};
use etcd_operator::etcd::MemberStatus;
use etcd_operator::faults::{Fault, FaultRecord, Role};
use etcd_operator::platform::local::process;

fn no_leader(c: &Cluster, i: usize) -> bool {
    c.statuses()[i]
        .as_ref()
        .is_some_and(|s| s.leader == 0 || s.errors.iter().any(|e| e.contains("no leader")))
}

/// A monkey injecting one network fault into a cluster, with a guard that
/// removes its rules also when the test fails, and its fault log.
struct Faulted {
    m: Monkey,
    guard: RulesGuard,
    pid: i32,
    log: PathBuf,
}

impl Faulted {
    /// Runs the monkey once against `c`: `fault` (with its `settings`) on
    /// a `target` member for `fault_for`.
    fn start(c: &Cluster, fault: &str, settings: &[&str], target: &str, fault_for: &str) -> Self {
        let log = c.state.dir.path().join("faults.jsonl");
        let mut all = one_fault_args(c.state_arg(), &log, &["--seed", "5"]);
        all.extend_from_slice(&["--fault", fault]);
        all.extend_from_slice(settings);
        all.extend_from_slice(&["--target", target, "--fault-for", fault_for]);
        let m = Monkey::start(&all);
        let pid = m.pid();
        let guard = RulesGuard(pid);
        Faulted { m, guard, pid, log }
    }

    /// Waits for (`what`) the first record of `fault` in the log.
    fn first(&self, what: &str, fault: Fault) -> FaultRecord {
        wait_for(what, || {
            records(&self.log).into_iter().find(|r| r.fault == fault)
        })
    }

    /// Waits for the monkey to exit 0 and checks that the kernel holds none
    /// of its rules; returns the fault log.
    fn finish(self) -> PathBuf {
        let done = self.m.wait();
        assert_eq!(done.code(), Some(0), "{}", done.stderr);
        RulesGuard::clean(self.pid).expect("the kernel holds none of the monkey's rules");
        drop(self.guard);
        self.log
    }
}

#[test]
fn partition_of_the_leader_elects_another_and_heals_clean() {
    let c = Cluster::start(3, &[]);
    let old = c.wait_leader();
    let f = Faulted::start(&c, "partition", &[], "leader", "4s");
    f.first("the partition record", Fault::Partition);
    // etcd's view: the others elect a new leader, the old one has none.
    wait_for("a new leader among the others, none on the old one", || {
        let s = c.statuses();
        let others: Vec<_> = (0..3).filter(|&i| i != old).collect();
        let lead = s[others[0]].as_ref()?.leader;
        let agreed = others.iter().all(|&i| {
            s[i].as_ref().is_some_and(|m| {
                m.leader == lead && lead != 0 && lead != s[old].as_ref().map_or(0, |o| o.id)
            })
        });
        (agreed && no_leader(&c, old)).then_some(())
    });
    let recs = records(&f.finish());
    let kinds: Vec<(Fault, Role)> = recs.iter().map(|r| (r.fault, r.role)).collect();
    assert_eq!(
        kinds,
        [
            (Fault::Partition, Role::Leader),
            (Fault::Heal, Role::Leader)
        ]
    );
    assert!(
        recs.iter()
            .all(|r| r.member == c.names[old] && r.injected()),
        "{recs:?}"
    );
    // Healed: all three agree on one leader again.
    c.wait_leader();
}

#[test]
fn a_split_cuts_the_cluster_in_two_sides() {
    let c = Cluster::start(3, &[]);
    c.wait_leader();
    let split = ["--split", "majority"];
    let f = Faulted::start(&c, "partition", &split, "follower", "4s");
    let side = wait_for("the two records of the victim's side", || {
        let r: Vec<String> = records(&f.log)
            .into_iter()
            .filter(|r| r.fault == Fault::Partition)
            .map(|r| r.member)
            .collect();
        (r.len() == 2).then_some(r)
    });
    let lone = (0..3)
        .find(|&i| !side.contains(&c.names[i]))
        .expect("the other side");
    wait_for("the lone member has no leader", || {
        no_leader(&c, lone).then_some(())
    });
    f.finish();
    c.wait_leader();
}

#[test]
fn full_loss_on_a_followers_links_leaves_it_without_a_leader() {
    let c = Cluster::start(3, &[]);
    c.wait_leader();
    let f = Faulted::start(&c, "loss", &["--loss", "100%"], "follower", "4s");
    let r = f.first("the loss record", Fault::Loss);
    assert_eq!(r.role, Role::Follower);
    let victim = c.index(&r.member);
    wait_for("the follower loses its leader", || {
        no_leader(&c, victim).then_some(())
    });
    f.finish();
    c.wait_leader();
}

#[test]
fn a_killed_monkeys_rules_block_the_next_start_until_cleanup() {
    let c = Cluster::start(3, &[]);
    c.wait_leader();
    let f = Faulted::start(&c, "partition", &[], "follower", "10m");
    let r = f.first("the partition record", Fault::Partition);
    let victim = c.index(&r.member);
    let Faulted { m, guard, pid, .. } = f;
    m.signal(rustix::process::Signal::KILL);
    let _ = m.wait();
    assert!(RulesGuard::clean(pid).is_err(), "SIGKILL leaves the rules");
    // A new monkey refuses to start while they are there.
    let again = common::run(&[
        "--state-dir",
        c.state_arg(),
        "--fault",
        "partition",
        "--kill-interval",
        "1s",
        "--max-faults",
        "1",
    ]);
    assert_eq!(again.code(), Some(2), "{}", again.stderr);
    assert!(again.stderr.contains("--cleanup"), "{}", again.stderr);
    let cleanup = common::run(&["--cleanup"]);
    assert_eq!(cleanup.code(), Some(0), "{}", cleanup.stderr);
    RulesGuard::clean(pid).expect("clean after --cleanup");
    drop(guard);
    wait_for("the victim rejoins", || {
        (!no_leader(&c, victim)).then_some(())
    });
    c.wait_leader();
}

#[test]
fn sigterm_heals_before_the_monkey_exits() {
    let c = Cluster::start(3, &[]);
    c.wait_leader();
    let f = Faulted::start(&c, "partition", &[], "leader", "10m");
    f.first("the partition record", Fault::Partition);
    f.m.signal(rustix::process::Signal::TERM);
    let heal = records(&f.finish())
        .into_iter()
        .find(|r| r.fault == Fault::Heal)
        .expect("heal");
    assert!(heal.injected(), "{heal:?}");
    c.wait_leader();
}

#[test]
fn blackhole_until_snapshot_waits_for_the_leaders_compaction() {
    // A snapshot every 100 entries: the leader compacts past the victim
    // once it is 5000 (etcd's catch-up entries) + 100 entries ahead.
    let c = Cluster::start(3, &["--snapshot-count", "100"]);
    let leader = c.wait_leader();
    let f = Faulted::start(&c, "blackhole-until-snapshot", &[], "follower", "2m");
    let r = f.first("the blackhole record", Fault::BlackholeUntilSnapshot);
    let victim = c.index(&r.member);
    assert_ne!(victim, leader);
    let rt = common::etcd::rt();
    // 16 writers, `n` puts each (round `round`'s keys).
    let writes = |round: usize, n: usize| {
        rt.block_on(async {
            let client = etcd_client::Client::connect([c.url(leader)], None)
                .await
                .expect("client");
            let mut tasks = Vec::new();
            for w in 0..16 {
                let mut kv = client.kv_client();
                tasks.push(tokio::spawn(async move {
                    for i in 0..n {
                        let key = format!("k{round}-{w}-{i}");
                        kv.put(key, "v", None).await.expect("put");
                    }
                }));
            }
            for t in tasks {
                t.await.expect("writer");
            }
        });
    };
    writes(0, 360);
    // The monkey lets the victim back once the leader saves a snapshot
    // after it saw the leader's index pass the victim's + 5000: on a busy
    // machine it may look only after the last snapshot of the first
    // writes, so more come, a snapshot's worth at a time, until it did.
    let mut round = 0;
    wait_for(
        "the leader compacted past the victim, in the fault log",
        || {
            let log = std::fs::read_to_string(&f.log).unwrap_or_default();
            if log.contains("compacted past the victim") {
                return Some(());
            }
            round += 1;
            writes(round, 7);
            None
        },
    );
    let line = std::fs::read_to_string(f.finish()).expect("log");
    assert!(line.contains("compacted past the victim"), "{line}");
    // etcd's view: the victim received a snapshot and caught up.
    wait_for("the victim received a snapshot", || {
        let m = rt.block_on(chaos_monkey::net::snapshot::metric_labelled(
            &c.url(victim),
            "etcd_network_snapshot_receive_success",
        ))?;
        (m >= 1.0).then_some(())
    });
    wait_for("the victim caught up", || {
        let s = c.statuses();
        let l = s[leader].as_ref()?.revision;
        (s[victim].as_ref()?.revision == l).then_some(())
    });
}

#[test]
fn delay_slows_what_goes_through_the_victims_links() {
    let c = Cluster::start(3, &[]);
    c.wait_leader();
    let delay = ["--latency", "500ms", "--latency-jitter", "10ms"];
    let f = Faulted::start(&c, "delay", &delay, "follower", "6s");
    let r = f.first("the delay record", Fault::Delay);
    let victim = c.index(&r.member);
    // A put through the victim goes to the leader and back over its
    // delayed links: each way held at least latency - jitter. (A lower
    // bound: a loaded machine only makes it slower.) The latency stays
    // well under etcd's election timeout (1 s): at 1 s the victim's
    // heartbeats came late enough for it to campaign (these 3.4 members
    // run without the operator's `--pre-vote=true`), and the put timed
    // out in the election that followed.
    let rt = common::etcd::rt();
    let took = rt.block_on(async {
        let mut client = etcd_client::Client::connect([c.url(victim)], None)
            .await
            .expect("client");
        let start = std::time::Instant::now();
        client
            .put("through-the-victim", "x", None)
            .await
            .expect("put");
        start.elapsed()
    });
    assert!(
        took >= Duration::from_millis(980),
        "a put through the victim took {took:?}; the monkey said:\n{}",
        f.m.stderr()
    );
    let recs = records(&f.finish());
    assert_eq!(
        recs.iter().map(|r| r.fault).collect::<Vec<_>>(),
        [Fault::Delay, Fault::Heal]
    );
    c.wait_leader();
}

/// Raft terms around a follower cut off for longer than its election
/// timeout: the leader's before, and every member's once all agree on a
/// leader again. (etcd's Status reports the term of the newest entry
/// applied, so a candidate's raised term shows only once an election
/// wrote an entry in it.)
struct Rejoin {
    before: u64,
    after: Vec<u64>,
    same_leader: bool,
}

/// A 3.4.23 cluster whose members run with `flags`, and `followers`
/// added to both followers' (restarted with them before the fault: a
/// cluster part way through getting a flag on restarts); a follower cut
/// off by the monkey until it has lost its leader for a while, then
/// healed.
fn rejoin(flags: &[&str], followers: &[&str]) -> Rejoin {
    let mut c = Cluster::start(3, flags);
    let mut leader = c.wait_leader();
    if !followers.is_empty() {
        c.flags.extend(followers.iter().map(|s| s.to_string()));
        for i in (0..3).filter(|&i| i != leader) {
            let id = c.state.process("net", &c.names[i]).expect("a process");
            let _ = process::signal(&id, rustix::process::Signal::TERM);
            wait_for("the follower stopped", || {
                (!process::alive(&id)).then_some(())
            });
            c.spawn(i, "existing");
        }
        leader = c.wait_leader();
    }
    let term = |s: &[Option<MemberStatus>], i: usize| s[i].as_ref().map(|m| m.raft_term);
    let before = term(&c.statuses(), leader).expect("the leader's term");
    // Cut off for 4 s: two to four of etcd's election timeouts (1 s,
    // randomized up to 2 s).
    let f = Faulted::start(&c, "partition", &[], "follower", "4s");
    let r = f.first("the partition record", Fault::Partition);
    let victim = c.index(&r.member);
    assert_ne!(victim, leader);
    wait_for("the victim has lost its leader", || {
        no_leader(&c, victim).then_some(())
    });
    f.finish();
    let now = c.wait_leader();
    let s = c.statuses();
    eprintln!(
        "flags {flags:?}, followers {followers:?}: term {before} -> {:?}, leader {}",
        s.iter()
            .map(|m| m.as_ref().map(|m| m.raft_term))
            .collect::<Vec<_>>(),
        if now == leader { "kept" } else { "changed" }
    );
    Rejoin {
        before,
        after: (0..3).filter_map(|i| term(&s, i)).collect(),
        same_leader: now == leader,
    }
}

/// Why 3.4 members get `--pre-vote=true` (the operator's flag): without
/// it, a follower cut off past its election timeout raises its term, and
/// when it is heard again that term deposes the leader (an election no
/// one needed: the soak on Kubernetes saw 6.2 s of it after a follower's
/// pod was killed); with it, the victim only asks, the others still hear
/// their leader and say no, and nothing moves. A follower restarted with
/// the flag, its leader without (a cluster part way through getting it
/// on restarts), is held back the same: what counts is the flag of the
/// member that comes back.
#[test]
fn a_follower_back_from_a_partition_deposes_the_leader_only_without_pre_vote() {
    let pre_vote = etcd_operator::member::flags::PRE_VOTE;
    let without = rejoin(&[], &[]);
    assert!(
        without.after.iter().all(|&t| t > without.before),
        "the leader was deposed: terms {} -> {:?}",
        without.before,
        without.after
    );
    for (flags, followers) in [(&[pre_vote][..], &[][..]), (&[], &[pre_vote])] {
        let with = rejoin(flags, followers);
        assert_eq!(with.after, [with.before; 3], "no election: {followers:?}");
        assert!(with.same_leader, "the leader stayed: {followers:?}");
    }
}
