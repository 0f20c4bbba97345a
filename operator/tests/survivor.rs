//! Rebuilding a cluster whose quorum is lost for good from the member that
//! survived (`spec.recovery.fromSurvivor`), against real etcd: every
//! acknowledged write it held is kept, the most advanced of two survivors
//! is chosen, and a paused majority is never taken for lost.

use std::collections::HashMap;

use etcd_operator::crd::{EtcdCluster, RecoverySource};
use etcd_operator::platform::local::process;
use etcd_operator::testing::acked::{Writer, not_found, read_prefix};
use etcd_operator::testing::{Env, client_urls, kill9, manifest};
use rustix::process::Signal;

fn from_survivor(name: &str, size: u32) -> String {
    let mut m = manifest(name, size, "3.4.23");
    m.push_str("  recovery:\n    fromSurvivor: true\n");
    m
}

fn signal(env: &Env, cluster: &str, member: &str, s: Signal) {
    let record = env.member(cluster, member).expect("a member");
    let id = record.process.expect("a process");
    assert!(process::signal(&id, s).expect("signal"), "{member} runs");
}

/// SIGCONTs the members it paused when dropped, so a failing test leaves
/// no stopped process for `Env` to wait on.
struct Paused<'a>(&'a Env, &'a str, Vec<String>);

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        for m in &self.2 {
            if let Some(id) = self.0.member(self.1, m).and_then(|r| r.process) {
                let _ = process::signal(&id, Signal::CONT);
            }
        }
    }
}

/// The member names of a published cluster, and its follower names.
fn names(c: &EtcdCluster) -> (Vec<String>, Vec<String>) {
    let members = &c.status.as_ref().expect("status").members;
    let all = members.iter().map(|m| m.name.clone()).collect();
    let followers = members
        .iter()
        .filter(|m| !m.leader)
        .map(|m| m.name.clone())
        .collect();
    (all, followers)
}

fn rebuilt(env: &Env, cluster: &str, size: usize) -> EtcdCluster {
    let what = format!("{cluster} rebuilt with {size} members");
    env.wait_rebuilt(&what, cluster, size).0
}

#[test]
fn two_of_three_destroyed_rebuilt_from_the_third_with_every_acknowledged_write() {
    let mut env = Env::new();
    env.write_manifest("sv.yaml", &from_survivor("sv", 3));
    env.start_operator();
    let c = env.wait_running("sv", 3);
    let urls = client_urls(&c);
    let (all, followers) = names(&c);
    let kept = followers[0].clone();
    let kept_id = c
        .status
        .as_ref()
        .expect("status")
        .members
        .iter()
        .find(|m| m.name == kept)
        .and_then(|m| m.id.clone());
    // Writes go on while two members are destroyed, the leader among them.
    let writer = Writer::start(urls.clone(), "w/");
    env.wait_for("200 writes acknowledged", || {
        (writer.acked().len() >= 200).then_some(())
    });
    for m in all.iter().filter(|m| **m != kept) {
        env.destroy("sv", m);
    }
    let c = rebuilt(&env, "sv", 3);
    let acked = writer.stop();
    let s = c.status.as_ref().expect("status");
    let r = s.last_recovery.as_ref().expect("recovery");
    assert_eq!(r.source, RecoverySource::Survivor, "{r:?}");
    assert_eq!(r.member.as_deref(), Some(kept.as_str()), "{r:?}");
    assert_eq!(r.lost_revisions, 0, "{r:?}");
    let seed = s
        .members
        .iter()
        .find(|m| m.name == kept)
        .expect("the seed stays");
    assert_eq!(seed.id, kept_id, "same member id");
    assert_eq!(s.members.len(), 3);
    // Every acknowledged write is there, with its value.
    let found: HashMap<String, String> = read_prefix(&client_urls(&c), "w/").into_iter().collect();
    let missing: Vec<&str> = not_found(&acked, &found)
        .into_iter()
        .map(|a| a.key.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged writes lost: {missing:?}",
        missing.len(),
        acked.len()
    );
    let log = std::fs::read_to_string(env.operator_log()).expect("log");
    assert!(
        log.contains(&format!("rebuilding the cluster from member {kept}")),
        "the log says which member seeded the cluster"
    );
    // The seed no longer starts with --force-new-cluster.
    let record = env.member("sv", &kept).expect("seed record");
    assert!(!record.config.force_new_cluster);
    drop(urls);
}

#[test]
fn of_two_survivors_the_one_ahead_seeds_and_is_waited_for_while_paused() {
    let mut env = Env::new();
    env.write_manifest("two.yaml", &from_survivor("two", 5));
    env.start_operator();
    let c = env.wait_running("two", 5);
    let urls = client_urls(&c);
    let (all, followers) = names(&c);
    let (behind, ahead) = (followers[0].clone(), followers[1].clone());
    // `behind` is paused while 50 writes go to the other four.
    signal(&env, "two", &behind, Signal::STOP);
    let mut paused = Paused(&env, "two", vec![behind.clone()]);
    let writer = Writer::start(urls.clone(), "k/");
    env.wait_for("50 writes acknowledged", || {
        (writer.acked().len() >= 50).then_some(())
    });
    let acked = writer.stop();
    // `ahead` is paused too, the other three destroyed; then `behind` is
    // killed while paused, so what the leader had sent it (still in its
    // socket buffers) is never read: restarted by the operator with its
    // data, it answers with a position behind `ahead`'s.
    signal(&env, "two", &ahead, Signal::STOP);
    paused.2.push(ahead.clone());
    for m in all.iter().filter(|m| **m != behind && **m != ahead) {
        env.destroy("two", m);
    }
    kill9(env.pid("two", &behind).expect("behind runs"));
    // Three of five lost for good; `ahead` runs silent and may be the
    // most advanced: the rebuild waits for it, though `behind` answers.
    let message = env.wait_for("waiting on the silent survivor ahead", || {
        let s = env.status("two")?.status?;
        let d = s.condition("Degraded")?;
        (d.reason == "SurvivorSilent" && d.message.contains(&ahead)).then(|| d.message.clone())
    });
    assert!(message.contains("does not answer"), "{message}");
    assert!(
        env.status("two")
            .and_then(|c| c.status?.last_recovery)
            .is_none()
    );
    drop(paused); // SIGCONT: `ahead` answers
    // Rebuilt from `ahead` and serving (growing back to five members takes
    // etcd's 5 s reconfiguration guard per member: not waited for here).
    let r = env.wait_for("rebuilt and serving", || {
        let s = env.status("two")?.status?;
        let available = s.condition("Available")?.status == "True";
        s.last_recovery.filter(|_| available)
    });
    assert_eq!(r.member.as_deref(), Some(ahead.as_str()), "{r:?}");
    assert!(
        r.seed_revision >= acked.last().expect("writes").revision,
        "{r:?}"
    );
    let seed_url = c
        .status
        .as_ref()
        .expect("status")
        .members
        .iter()
        .find(|m| m.name == ahead)
        .map(|m| m.client_url.clone())
        .expect("the seed's URL");
    let found: HashMap<String, String> = read_prefix(&[seed_url], "k/").into_iter().collect();
    assert!(
        acked.iter().all(|a| found.get(&a.key) == Some(&a.value)),
        "the survivor ahead held every write"
    );
}

#[test]
fn a_paused_majority_is_never_taken_for_lost() {
    let mut env = Env::new();
    env.write_manifest("ps.yaml", &from_survivor("ps", 3));
    env.start_operator();
    let c = env.wait_running("ps", 3);
    let (all, _) = names(&c);
    let ids: Vec<Option<String>> = c
        .status
        .as_ref()
        .expect("status")
        .members
        .iter()
        .map(|m| m.id.clone())
        .collect();
    let paused: Vec<String> = all[..2].to_vec();
    for m in &paused {
        signal(&env, "ps", m, Signal::STOP);
    }
    let guard = Paused(&env, "ps", paused);
    // The operator sees the quorum gone, and keeps waiting for the paused
    // members through several passes: two fresh statuses, no rebuild.
    let mut seen = None;
    for i in 0..2 {
        let at = env.wait_for(&format!("fresh status {i} without quorum"), || {
            let s = env.status("ps")?.status?;
            let lost = s.condition("Available")?.reason == "QuorumLost";
            (lost && s.observed_at != seen).then_some(s.observed_at)
        });
        seen = at;
        let s = env.status("ps").and_then(|c| c.status).expect("status");
        assert!(s.last_recovery.is_none(), "rebuilt a paused cluster: {s:?}");
        assert!(
            s.last_action
                .as_deref()
                .is_some_and(|a| a.contains("electing")),
            "{:?}",
            s.last_action
        );
    }
    drop(guard);
    let c = env.wait_for("back with the same members", || {
        let c = env.wait_running("ps", 3);
        let now: Vec<Option<String>> = c
            .status
            .as_ref()?
            .members
            .iter()
            .map(|m| m.id.clone())
            .collect();
        (now == ids).then_some(c)
    });
    assert!(c.status.expect("status").last_recovery.is_none());
}
