//! The raft timing the guide (docs/src/spec.md) recommends for loopback keeps a loaded 2-core
//! machine free of spurious elections, against real etcd: a 3-member
//! cluster with that `spec.tuning`, every core kept busy by spinning
//! threads and a writer through every endpoint, for a bounded window; the
//! raft term must not move (no election) and no write may fail.
//!
//! The timing is read from the guide's guidance table (the "loopback"
//! row) and must be the one `scenarios/kill-leader-fast.yaml` uses, so the
//! documentation, the scenario and this test cannot drift apart.
//! `TUNING_UNDER_LOAD=HB/ET` (milliseconds, e.g. `5/25`) runs the same test
//! with another timing by hand: an aggressive one shows that it can fail.
//! `.config/nextest.toml` runs it alone (it spins every core on purpose).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use etcd_operator::testing::writer::{TermWatch, Writer};
use etcd_operator::testing::{Env, client_urls, manifest};

/// How long the machine is kept loaded.
const WINDOW: Duration = Duration::from_secs(15);

/// Spinning threads, one per core, stopped and joined when dropped (also
/// when the test fails).
struct Burners {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Burners {
    fn start() -> Burners {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        std::hint::black_box(x);
                    }
                })
            })
            .collect();
        Burners { stop, threads }
    }
}

impl Drop for Burners {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// `25ms` -> 25.
fn millis(s: &str) -> Option<u32> {
    s.trim().trim_matches('`').strip_suffix("ms")?.parse().ok()
}

/// The (heartbeat, election) the guide recommends for one machine.
fn readme_loopback_tuning() -> (u32, u32) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/src/spec.md");
    let readme = std::fs::read_to_string(path).expect("docs/src/spec.md");
    let row = readme
        .lines()
        .find(|l| l.starts_with("| one machine (loopback)"))
        .expect("the guide's tuning table (docs/src/spec.md) has a loopback row");
    let cell = row.split('|').nth(2).expect("a heartbeat / election cell");
    let (h, e) = cell.split_once('/').expect("heartbeat / election");
    match (millis(h), millis(e)) {
        (Some(h), Some(e)) => (h, e),
        _ => panic!("cannot read the loopback timing from {cell:?}"),
    }
}

/// The (heartbeat, election) of `scenarios/kill-leader-fast.yaml`.
fn scenario_tuning() -> (u32, u32) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/kill-leader-fast.yaml"
    );
    let text = std::fs::read_to_string(path).expect("kill-leader-fast.yaml");
    let field = |name: &str| {
        text.split(&format!("{name}: "))
            .nth(1)
            .and_then(|rest| rest.split([',', '}', '\n']).next())
            .and_then(millis)
            .unwrap_or_else(|| panic!("kill-leader-fast.yaml: no {name} in ms"))
    };
    (field("heartbeatInterval"), field("electionTimeout"))
}

#[test]
fn the_recommended_loopback_tuning_has_no_election_on_a_loaded_machine() {
    let recommended = readme_loopback_tuning();
    assert_eq!(
        scenario_tuning(),
        recommended,
        "scenarios/kill-leader-fast.yaml and the guide's loopback guidance differ"
    );
    let (hb, et) = match std::env::var("TUNING_UNDER_LOAD") {
        Ok(v) => {
            let (h, e) = v.split_once('/').expect("TUNING_UNDER_LOAD=HB/ET in ms");
            (
                h.parse().expect("heartbeat in ms"),
                e.parse().expect("election timeout in ms"),
            )
        }
        Err(_) => recommended,
    };
    let mut env = Env::new();
    let mut m = manifest("calm", 3, "3.4.23");
    m.push_str(&format!(
        "  tuning: {{heartbeatInterval: {hb}ms, electionTimeout: {et}ms}}\n"
    ));
    env.write_manifest("calm.yaml", &m);
    env.start_operator();
    let urls = client_urls(&env.wait_running("calm", 3));
    let watch = TermWatch::start(urls.clone());
    let writer = Writer::start(urls);
    let burners = Burners::start();
    // The observation window itself (no condition to wait for: the test
    // is that nothing happens in it).
    std::thread::sleep(WINDOW);
    drop(burners);
    let report = writer.stop();
    let terms = watch.stop();
    println!(
        "tuning {hb}ms/{et}ms, {WINDOW:?} with every core busy: {} writes acknowledged, {} \
         failovers, longest gap {:?}, raft terms seen {terms:?}",
        report.acked, report.failovers, report.longest_gap
    );
    assert!(report.acked > 0, "nothing was written");
    assert!(
        report.failed.is_empty(),
        "writes failed under load with {hb}ms/{et}ms: {:?}",
        report.failed
    );
    assert_eq!(
        terms.len(),
        1,
        "the raft term moved under load with {hb}ms/{et}ms: {} election(s) nothing caused \
         (terms {terms:?})",
        terms.len().saturating_sub(1)
    );
}
