//! The run loop against an in-memory platform, on tokio's paused clock.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use etcd_operator::faults::{Fault, Role};

use super::*;
use crate::config::PlatformConfig;
use crate::select::MemberView;
use crate::target::{Observed, ObservedCluster, Operator};

/// Clusters of members that are either running or stopped (paused).
#[derive(Default)]
struct Fake {
    clusters: BTreeMap<String, Vec<(String, Role)>>,
    /// The clusters that are standbys following a source.
    standbys: HashSet<String>,
    stopped: Mutex<HashSet<MemberKey>>,
    calls: Mutex<Vec<String>>,
    fail: bool,
    /// When the last damage ended.
    damaged: Mutex<Option<SystemTime>>,
}

impl Fake {
    fn new(clusters: &[(&str, usize)]) -> Self {
        let mut f = Fake::default();
        for (name, size) in clusters {
            let members = (0..*size)
                .map(|i| {
                    let role = if i == 1 { Role::Leader } else { Role::Follower };
                    (format!("{name}-{i}"), role)
                })
                .collect();
            f.clusters.insert(name.to_string(), members);
        }
        f
    }
    fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("lock").clone()
    }
}

impl Platform for Fake {
    type Handle = MemberKey;

    async fn standbys(&self, clusters: &[String]) -> HashSet<String> {
        clusters
            .iter()
            .filter(|c| self.standbys.contains(*c))
            .cloned()
            .collect()
    }

    async fn clusters(&self) -> Result<Vec<String>, target::Error> {
        Ok(self.clusters.keys().cloned().collect())
    }

    async fn observe(
        &self,
        clusters: &[String],
        paused: &HashSet<MemberKey>,
        _min_age: Duration,
        _now: SystemTime,
    ) -> Result<Vec<ObservedCluster<MemberKey>>, target::Error> {
        let stopped = self.stopped.lock().expect("lock");
        Ok(clusters
            .iter()
            .filter_map(|c| {
                let members = self.clusters.get(c)?;
                Some(ObservedCluster {
                    name: c.clone(),
                    members: members
                        .iter()
                        .map(|(m, role)| {
                            let key = (c.clone(), m.clone());
                            let running = !stopped.contains(&key) && !paused.contains(&key);
                            Observed {
                                view: MemberView {
                                    name: m.clone(),
                                    role: *role,
                                    running,
                                    eligible: running,
                                },
                                handle: Some(key),
                                role_source: (*role != Role::Unknown)
                                    .then_some(crate::roles::RoleSource::Etcd),
                            }
                        })
                        .collect(),
                })
            })
            .collect())
    }

    async fn inject(&self, fault: Fault, h: &MemberKey) -> Result<(), target::Error> {
        self.calls
            .lock()
            .expect("lock")
            .push(format!("{fault:?} {}/{}", h.0, h.1));
        if self.fail {
            return Err(target::Error::Unsupported("no".into()));
        }
        if fault == Fault::Pause {
            self.stopped.lock().expect("lock").insert(h.clone());
        }
        Ok(())
    }

    async fn resume(&self, h: &MemberKey) -> Result<(), target::Error> {
        self.calls
            .lock()
            .expect("lock")
            .push(format!("Resume {}/{}", h.0, h.1));
        self.stopped.lock().expect("lock").remove(h);
        Ok(())
    }

    type Lasting = String;

    async fn prepare(&self, _cfg: &Config) -> Result<Option<String>, target::Error> {
        Ok(None)
    }

    async fn start(
        &self,
        plan: &target::LastingPlan<MemberKey>,
    ) -> Result<(String, String), target::Error> {
        let victims: Vec<&str> = plan
            .victims
            .iter()
            .map(|&v| plan.members[v].0.as_str())
            .collect();
        let call = format!("{:?} {}/{}", plan.fault, plan.cluster, victims.join(","));
        self.calls.lock().expect("lock").push(call.clone());
        if self.fail {
            return Err(target::Error::Unsupported("no".into()));
        }
        Ok((call, "fake rules".into()))
    }

    async fn settled(&self, _lasting: &mut String) -> Option<String> {
        None
    }

    async fn heal(&self, lasting: &String) -> Result<(), target::Error> {
        self.calls
            .lock()
            .expect("lock")
            .push(format!("Heal {lasting}"));
        Ok(())
    }

    async fn damage(
        &self,
        fault: Fault,
        h: &MemberKey,
        _options: &crate::config::FaultOptions,
        _rng: crate::rng::Rng,
    ) -> Result<String, target::Error> {
        self.calls
            .lock()
            .expect("lock")
            .push(format!("{fault:?} {}/{}", h.0, h.1));
        // Damage takes time (a disk-full burst seconds): a record stamped
        // at its start is told apart from one stamped at its end.
        std::thread::sleep(Duration::from_millis(5));
        *self.damaged.lock().expect("lock") = Some(SystemTime::now());
        Ok("fake damage".into())
    }

    async fn operator(&self) -> Result<Option<Operator<MemberKey>>, target::Error> {
        Ok(Some(Operator {
            name: "etcd-operator".into(),
            handle: (String::new(), "etcd-operator".into()),
        }))
    }
}

fn config() -> Config {
    Config {
        platform: PlatformConfig::Local {
            state_dir: "unused".into(),
        },
        clusters: Vec::new(),
        target: Target::Random,
        store_addr: None,
        store_wildcard: false,
        fault: FaultKind::Kill,
        interval: Duration::from_secs(30),
        start_after: Duration::ZERO,
        pause_for: Duration::from_secs(10),
        max_kill: usize::MAX,
        probability: 1.0,
        min_age: Duration::ZERO,
        jitter: Duration::ZERO,
        seed: 1,
        dry_run: false,
        duration: None,
        max_faults: Some(5),
        fault_log: None,
        faults: crate::config::FaultOptions::default(),
    }
}

fn never() -> impl Future<Output = ()> {
    std::future::pending()
}

async fn go(fake: &Fake, cfg: &Config) -> (Result<Summary, Error>, FaultLog) {
    let mut log = FaultLog::in_memory();
    let r = run(fake, cfg, &mut log, never()).await;
    (r, log)
}

fn victims(log: &FaultLog) -> Vec<String> {
    log.records()
        .iter()
        .map(|r| format!("{:?} {}/{} {}", r.fault, r.cluster, r.member, r.outcome))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn max_faults_bounds_the_run() {
    let fake = Fake::new(&[("a", 3), ("b", 3)]);
    let (r, log) = go(&fake, &config()).await;
    let s = r.expect("run");
    assert_eq!((s.stop, s.ticks, log.faults()), (Stop::MaxFaults, 5, 5));
    assert_eq!(fake.calls().len(), 5);
    assert!(log.records().iter().all(|r| r.injected()));
}

/// `--target applier` hits the leader of a standby still following (the
/// member its applier writes through), never the source; with no such
/// standby, nothing.
#[tokio::test(start_paused = true)]
async fn the_applier_target_hits_the_leader_of_a_following_standby_only() {
    let mut fake = Fake::new(&[("src", 3), ("dr", 3)]);
    fake.standbys.insert("dr".into());
    let cfg = Config {
        target: Target::Applier,
        ..config()
    };
    let (r, log) = go(&fake, &cfg).await;
    r.expect("run");
    assert_eq!(log.faults(), 5);
    assert!(
        log.records()
            .iter()
            .all(|r| r.cluster == "dr" && r.member == "dr-1"),
        "{:?}",
        victims(&log)
    );
    let none = Fake::new(&[("src", 3), ("dr", 3)]);
    let cfg = Config {
        duration: Some(Duration::from_secs(95)),
        max_faults: None,
        ..cfg
    };
    let (r, log) = go(&none, &cfg).await;
    r.expect("run");
    assert_eq!(log.faults(), 0, "{:?}", victims(&log));
    assert!(none.calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_same_seed_gives_the_same_victims() {
    let fake = Fake::new(&[("a", 3), ("b", 5)]);
    let cfg = Config {
        max_faults: Some(20),
        ..config()
    };
    let (_, first) = go(&fake, &cfg).await;
    let (_, second) = go(&fake, &cfg).await;
    assert_eq!(victims(&first), victims(&second));
    let (_, other) = go(&fake, &Config { seed: 2, ..cfg }).await;
    assert_ne!(victims(&first), victims(&other));
}

#[tokio::test(start_paused = true)]
async fn only_the_selected_clusters_are_hit() {
    let fake = Fake::new(&[("a", 3), ("b", 3), ("c", 3)]);
    let cfg = Config {
        clusters: vec!["b".into()],
        max_faults: Some(30),
        ..config()
    };
    let (r, log) = go(&fake, &cfg).await;
    r.expect("run");
    assert!(
        log.records().iter().all(|r| r.cluster == "b"),
        "{:?}",
        victims(&log)
    );
}

#[tokio::test(start_paused = true)]
async fn duration_bounds_the_run() {
    let fake = Fake::new(&[("a", 3)]);
    let cfg = Config {
        duration: Some(Duration::from_secs(95)),
        max_faults: None,
        ..config()
    };
    let (r, log) = go(&fake, &cfg).await;
    let s = r.expect("run");
    assert_eq!((s.stop, log.faults()), (Stop::Duration, 3));
}

/// `--start-after` moves every tick later, within the same `--duration`:
/// 95 s at 30 s ticks is 3 faults from the start, 2 after a 20 s wait
/// (ticks at 50 s and 80 s), none after a 70 s one (the first due at 100 s).
#[tokio::test(start_paused = true)]
async fn start_after_delays_the_first_interval_within_the_duration() {
    for (wait, faults) in [(0, 3), (20, 2), (70, 0)] {
        let fake = Fake::new(&[("a", 3)]);
        let cfg = Config {
            duration: Some(Duration::from_secs(95)),
            start_after: Duration::from_secs(wait),
            max_faults: None,
            ..config()
        };
        let start = Instant::now();
        let mut log = FaultLog::in_memory();
        run(&fake, &cfg, &mut log, never()).await.expect("run");
        assert_eq!(log.faults(), faults, "--start-after {wait}s");
        assert_eq!(start.elapsed(), Duration::from_secs(95));
    }
}

#[tokio::test(start_paused = true)]
async fn probability_zero_never_fires_and_dry_run_touches_nothing() {
    let fake = Fake::new(&[("a", 3)]);
    let cfg = Config {
        duration: Some(Duration::from_secs(301)),
        max_faults: None,
        probability: 0.0,
        ..config()
    };
    let (r, log) = go(&fake, &cfg).await;
    assert_eq!(r.expect("run").ticks, 10);
    assert_eq!(log.faults(), 0);

    let dry = Config {
        dry_run: true,
        fault: FaultKind::Pause,
        ..config()
    };
    let (r, log) = go(&fake, &dry).await;
    assert_eq!(r.expect("run").stop, Stop::MaxFaults);
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());
    assert!(
        log.records()
            .iter()
            .all(|r| r.outcome == "dry-run" && r.fault == Fault::Pause)
    );
    let op = Config {
        target: Target::Operator,
        ..dry
    };
    let (r, log) = go(&fake, &op).await;
    r.expect("run");
    assert!(fake.calls().is_empty());
    assert_eq!(log.records()[0].member, "etcd-operator");
}

#[tokio::test(start_paused = true)]
async fn probability_thins_ticks_reproducibly() {
    let fake = Fake::new(&[("a", 3)]);
    let cfg = Config {
        duration: Some(Duration::from_secs(30 * 200 + 1)),
        max_faults: None,
        probability: 0.5,
        ..config()
    };
    let (_, log) = go(&fake, &cfg).await;
    let n = log.faults();
    assert!((60..=140).contains(&n), "{n} of 200 ticks fired");
    let (_, again) = go(&fake, &cfg).await;
    assert_eq!(victims(&log), victims(&again));
}

#[tokio::test(start_paused = true)]
async fn pauses_are_resumed_after_pause_for_and_at_the_end() {
    let fake = Fake::new(&[("a", 3)]);
    let cfg = Config {
        fault: FaultKind::Pause,
        max_faults: Some(2),
        ..config()
    };
    let start = Instant::now();
    let (r, log) = go(&fake, &cfg).await;
    assert_eq!(r.expect("run").stop, Stop::MaxFaults);
    let kinds: Vec<Fault> = log.records().iter().map(|r| r.fault).collect();
    assert_eq!(
        kinds,
        [Fault::Pause, Fault::Resume, Fault::Pause, Fault::Resume]
    );
    // The last pause lasted its --pause-for before the run ended.
    assert!(
        start.elapsed() >= Duration::from_secs(70),
        "{:?}",
        start.elapsed()
    );
    assert!(fake.stopped.lock().expect("lock").is_empty());
    assert_eq!(log.records()[0].member, log.records()[1].member);
}

#[tokio::test(start_paused = true)]
async fn a_signal_resumes_paused_members_at_once() {
    let fake = Fake::new(&[("a", 5)]);
    let cfg = Config {
        fault: FaultKind::Pause,
        target: Target::Minority,
        pause_for: Duration::from_secs(3600),
        max_faults: None,
        ..config()
    };
    let mut log = FaultLog::in_memory();
    let stop = tokio::time::sleep(Duration::from_secs(45));
    let s = run(&fake, &cfg, &mut log, stop).await.expect("run");
    assert_eq!(s.stop, Stop::Signal);
    assert!(s.left_paused.is_empty());
    let kinds: Vec<Fault> = log.records().iter().map(|r| r.fault).collect();
    assert_eq!(
        kinds,
        [Fault::Pause, Fault::Pause, Fault::Resume, Fault::Resume]
    );
    assert!(fake.stopped.lock().expect("lock").is_empty());
}

#[tokio::test(start_paused = true)]
async fn paused_members_count_as_down_for_minority() {
    let fake = Fake::new(&[("a", 3)]);
    let cfg = Config {
        fault: FaultKind::Pause,
        target: Target::Minority,
        pause_for: Duration::from_secs(3600),
        max_faults: None,
        duration: Some(Duration::from_secs(200)),
        ..config()
    };
    let (_, log) = go(&fake, &cfg).await;
    // One member paused for the whole run: the next ticks find no minority
    // to hit without losing quorum.
    let kinds: Vec<Fault> = log.records().iter().map(|r| r.fault).collect();
    assert_eq!(kinds, [Fault::Pause, Fault::Resume]);
}

#[tokio::test(start_paused = true)]
async fn failures_are_logged_and_the_run_goes_on() {
    let fake = Fake {
        fail: true,
        ..Fake::new(&[("a", 3)])
    };
    let (r, log) = go(
        &fake,
        &Config {
            max_faults: Some(2),
            ..config()
        },
    )
    .await;
    assert_eq!(r.expect("run").stop, Stop::MaxFaults);
    assert!(
        log.records().iter().all(|r| r.outcome == "failed: no"),
        "{:?}",
        victims(&log)
    );
}

#[tokio::test(start_paused = true)]
async fn unknown_clusters_and_empty_selections_are_bad_input() {
    let fake = Fake::new(&[("a", 3)]);
    let cfg = Config {
        clusters: vec!["nope".into()],
        ..config()
    };
    let (r, _) = go(&fake, &cfg).await;
    let e = r.expect_err("unknown cluster");
    assert!(
        matches!(&e, Error::BadInput(m) if m.contains("nope") && m.contains("there are: a")),
        "{e}"
    );
    let (r, _) = go(&Fake::new(&[]), &config()).await;
    assert!(matches!(r, Err(Error::BadInput(m)) if m.contains("empty selection")));
    let (r, _) = go(&Fake::new(&[("a", 0)]), &config()).await;
    assert!(matches!(r, Err(Error::BadInput(_))));
}

#[tokio::test(start_paused = true)]
async fn jitter_delays_ticks_within_bounds() {
    let fake = Fake::new(&[("a", 3)]);
    let cfg = Config {
        jitter: Duration::from_secs(10),
        max_faults: Some(10),
        ..config()
    };
    let start = Instant::now();
    let mut log = FaultLog::in_memory();
    run(&fake, &cfg, &mut log, never()).await.expect("run");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_secs(300) && took < Duration::from_secs(310),
        "{took:?}"
    );
}

mod network;

/// A disk-full record is stamped when the burst ended with NOSPACE (where
/// its recovery runs from), a corrupt one when the member was stopped.
#[tokio::test(start_paused = true)]
async fn a_disk_full_record_is_stamped_at_the_bursts_end() {
    let ms = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .expect("after the epoch")
            .as_millis() as u64
    };
    for (kind, after_the_damage) in [(FaultKind::DiskFull, true), (FaultKind::Corrupt, false)] {
        let fake = Fake::new(&[("a", 3)]);
        let cfg = Config {
            fault: kind,
            max_faults: Some(1),
            ..config()
        };
        let (r, log) = go(&fake, &cfg).await;
        r.expect("run");
        let rec = &log.records()[0];
        assert!(rec.injected(), "{rec:?}");
        let ended = ms(fake.damaged.lock().expect("lock").expect("damaged"));
        assert_eq!(rec.unix_ms >= ended, after_the_damage, "{kind:?}: {rec:?}");
    }
}
