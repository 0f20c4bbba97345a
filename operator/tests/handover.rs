//! Planned changes without downtime, against real etcd: a rolling upgrade
//! (the leader hands over before its restart) and a scale-down while the
//! newest member leads (it stays; the newest followers go), with a writer
//! through every endpoint. A write that fails, or a new raft term that no handover of
//! the operator explains (an election: the leader was lost), fails the
//! test; the longest gap between two acknowledged writes is printed, never
//! asserted (speed is `make bench`'s).

use std::time::Duration;

use etcd_operator::etcd::Clients;
use etcd_operator::testing::writer::{TermWatch, WriteReport, Writer};
use etcd_operator::testing::{Env, client_urls, manifest};

/// Handovers the operator logged.
fn handovers(env: &Env) -> usize {
    let log = std::fs::read_to_string(env.operator_log()).unwrap_or_default();
    log.matches("leadership handed over").count()
}

/// Prints where the time went (shown on failure, or with `--nocapture`):
/// the operator's log, the members' notable lines and the writer's
/// timeline, merged in time order.
fn story(env: &Env, cluster: &str, report: &WriteReport) {
    let Some(since) = report.started_at else {
        return;
    };
    if let Some((at, via)) = &report.longest_gap_end {
        println!(
            "longest gap {:?} ended at {} via {via}",
            report.longest_gap,
            humantime::format_rfc3339_micros(*at)
        );
    }
    println!(
        "--- story ---\n{}",
        env.story(cluster, since, &report.timeline)
    );
}

fn check(what: &str, report: &WriteReport, terms: &[u64], handed_over: usize) {
    println!(
        "{what}: {} writes acknowledged, {} failovers, longest gap {:?}, terms {terms:?}, \
         {handed_over} handover(s)",
        report.acked, report.failovers, report.longest_gap
    );
    for n in &report.failover_notes {
        println!("  failover: {n}");
    }
    assert!(report.acked > 0, "{what}: nothing was written");
    assert!(
        report.failed.is_empty(),
        "{what}: writes failed: {:?}",
        report.failed
    );
    // Each handover starts one new term; any other new term is an
    // election the operator caused without handing over first.
    let new_terms = terms.len().saturating_sub(1);
    assert!(
        new_terms <= handed_over,
        "{what}: {new_terms} new raft term(s) but {handed_over} handover(s): a leader was lost \
         ({terms:?})"
    );
}

#[test]
fn a_rolling_upgrade_hands_the_leadership_over_and_no_write_fails() {
    let mut env = Env::new();
    env.write_manifest("up.yaml", &manifest("up", 3, "3.4.23"));
    env.start_operator();
    let c = env.wait_running("up", 3);
    let urls = client_urls(&c);
    let watch = TermWatch::start(urls.clone());
    let writer = Writer::start(urls);
    env.write_manifest("up.yaml", &manifest("up", 3, "3.5.1"));
    env.wait_for("every member on 3.5.1", || {
        let c = env.wait_running("up", 3);
        let s = c.status?;
        let all = s
            .members
            .iter()
            .all(|m| m.version.as_deref() == Some("3.5.1"));
        (all && s.current_version.as_deref() == Some("3.5.1")).then_some(())
    });
    let report = writer.stop();
    let terms = watch.stop();
    let handed_over = handovers(&env);
    story(&env, "up", &report);
    check(
        "rolling upgrade 3.4.23 -> 3.5.1",
        &report,
        &terms,
        handed_over,
    );
    assert!(
        handed_over >= 1,
        "the leader was upgraded without a handover"
    );
}

#[test]
fn a_scale_down_while_the_newest_leads_keeps_the_leader_and_no_write_fails() {
    let mut env = Env::new();
    env.write_manifest("sd.yaml", &manifest("sd", 5, "3.4.23"));
    env.start_operator();
    let c = env.wait_running("sd", 5);
    let members = c.status.clone().expect("status").members;
    let newest = members
        .iter()
        .max_by(|a, b| etcd_operator::plan::member_order(&a.name, &b.name));
    let newest = newest.expect("members").clone();
    // Put the leadership on the newest member, which a scale-down that
    // took the newest would remove.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let clients = Clients::new(Duration::from_secs(1));
    let id = u64::from_str_radix(newest.id.as_deref().expect("id"), 16).expect("hex id");
    env.wait_for("the newest member leading", || {
        let c = env.status("sd")?;
        let leader = c.status?.members.into_iter().find(|m| m.leader)?;
        if leader.name == newest.name {
            return Some(());
        }
        let _ = rt.block_on(clients.move_leader(&leader.client_url, id));
        None
    });
    let urls = client_urls(&c);
    let watch = TermWatch::start(urls.clone());
    let writer = Writer::start(urls);
    env.write_manifest("sd.yaml", &manifest("sd", 3, "3.4.23"));
    let c = env.wait_for("three members left", || {
        let c = env.wait_running("sd", 3);
        let s = c.status.as_ref()?;
        let left = s
            .members
            .iter()
            .all(|m| m.name != "sd-2" && m.name != "sd-3");
        left.then_some(c)
    });
    let report = writer.stop();
    let terms = watch.stop();
    let members = c.status.expect("status").members;
    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["sd-0", "sd-1", "sd-4"], "the newest followers went");
    let leader = members.iter().find(|m| m.leader).map(|m| m.name.as_str());
    assert_eq!(leader, Some(newest.name.as_str()), "the leader stayed");
    let handed_over = handovers(&env);
    story(&env, "sd", &report);
    // No handover and no new term: the leadership never changed.
    assert_eq!(handed_over, 0, "a scale-down handed the leadership over");
    check("scale-down 5 -> 3", &report, &terms, handed_over);
}
