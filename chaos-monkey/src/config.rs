//! A checked run configuration: built from the command line by
//! [`Config::from_args`], or directly by a library user (the soak runner).
//! Checks that involve several flags live here; selection checks that need
//! the platform (unknown cluster, empty selection) are in [`crate::monkey`].

use std::path::PathBuf;
use std::time::Duration;

mod faults;

pub use faults::{CLOCK_SKEW_ARCH, CLOCK_SKEW_WHY, FaultOptions, kube_refusal};

use crate::cli::{Args, FaultKind, Platform};
use crate::select::Target;
use faults::fault_options;

/// Flags that do not go together. Reported with exit code 2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `--target majority` without `--allow-quorum-loss`.
    #[error(
        "--target majority makes clusters lose quorum; pass --allow-quorum-loss if that is \
         what you want, or use --target minority (the most members a cluster can lose)"
    )]
    QuorumLoss,
    /// A fault the platform cannot inject.
    #[error(
        "--fault pause is only available with --platform local (pods cannot be SIGSTOPped through the Kubernetes API)"
    )]
    PauseOnKube,
    /// A fault that makes no sense for the operator.
    #[error("--target operator takes --fault kill or pause (the operator has no data to destroy)")]
    DestroyOperator,
    /// A cluster name that cannot exist.
    #[error("--cluster: {0}")]
    BadClusterName(String),
    /// A fault that makes no sense for the operator.
    #[error("--target operator takes --fault kill or pause (--fault {0} hits etcd members)")]
    MemberFaultOnOperator(&'static str),
    /// A fault the Kubernetes platform cannot inject.
    #[error("--fault {0} is not supported on kube: {1}")]
    NotOnKube(&'static str, &'static str),
    /// A fault option given for another fault.
    #[error("{0} applies to --fault {1} only (this run injects --fault {2})")]
    OptionForOtherFault(&'static str, &'static str, &'static str),
    /// `--split` with a target that picks several members.
    #[error(
        "--split cuts one victim's cluster in two: it takes --target random, leader or follower \
         (the victim's side is drawn around that member), not --target {0}"
    )]
    SplitTarget(&'static str),
    /// clock-skew off x86_64.
    #[error("--fault clock-skew is not available here: {CLOCK_SKEW_ARCH}")]
    ClockSkewArch,
    /// `--target store` without its address, or with a fault it cannot take.
    #[error(
        "--target store pauses the object store's server (--fault pause) found listening on \
         --store-addr 127.x.y.z:PORT (loopback, local platform): {0}"
    )]
    Store(&'static str),
    /// The local state folder is not there.
    #[error(
        "--state-dir {0}: {1}; pass the --state-dir etcd-operator runs with (`etcd-operator run --state-dir`)"
    )]
    StateDir(String, &'static str),
}

/// Why `--target store` or `--store-addr` cannot be taken as given.
fn store_refusal(a: &Args) -> Option<&'static str> {
    let store = a.target == Target::Store;
    match a.store_addr {
        None if store => Some("--store-addr is missing"),
        Some(_) if !store => Some("--store-addr is for --target store only"),
        Some(addr) if !addr.ip().is_loopback() => Some("the address is not a loopback one"),
        _ if store && a.fault != FaultKind::Pause => Some("only --fault pause hits a store"),
        _ if store && a.platform != Platform::Local => Some("--target store is local only"),
        _ => None,
    }
}

/// The default of `--pause-for`.
pub const DEFAULT_PAUSE_FOR: Duration = Duration::from_secs(10);

/// Where the members are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlatformConfig {
    /// The local platform's state folder.
    Local {
        /// `--state-dir`.
        state_dir: PathBuf,
    },
    /// Kubernetes.
    Kube {
        /// `--kubeconfig`; `None` infers.
        kubeconfig: Option<PathBuf>,
        /// `--namespace`; `None` is the context's.
        namespace: Option<String>,
        /// `--selector`, ANDed with the operator's labels.
        selector: Option<String>,
    },
}

/// Everything a run needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Where the members are.
    pub platform: PlatformConfig,
    /// Clusters to hit; empty means every cluster.
    pub clusters: Vec<String>,
    /// Which members.
    pub target: Target,
    /// The object store's address (`--target store`).
    pub store_addr: Option<std::net::SocketAddrV4>,
    /// What is done to them.
    pub fault: FaultKind,
    /// Time between ticks (> 0).
    pub interval: Duration,
    /// How long a pause lasts (> 0).
    pub pause_for: Duration,
    /// Most victims per tick (>= 1).
    pub max_kill: usize,
    /// Chance a tick fires, 0..=1.
    pub probability: f64,
    /// Members younger than this are spared.
    pub min_age: Duration,
    /// Extra delay per tick in [0, jitter).
    pub jitter: Duration,
    /// Seed of all random choices.
    pub seed: u64,
    /// Log only.
    pub dry_run: bool,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop after this many faults (>= 1).
    pub max_faults: Option<usize>,
    /// Fault log file (`-` is standard output).
    pub fault_log: Option<PathBuf>,
    /// Options of the network and disk faults.
    pub faults: FaultOptions,
}

impl Config {
    /// Checks the flags together. A missing `--seed` becomes a random one.
    pub fn from_args(a: Args) -> Result<Config, Error> {
        if a.target == Target::Majority && !a.allow_quorum_loss {
            return Err(Error::QuorumLoss);
        }
        if a.platform == Platform::Kube && a.fault == FaultKind::Pause {
            return Err(Error::PauseOnKube);
        }
        if let Some(why) = store_refusal(&a) {
            return Err(Error::Store(why));
        }
        if a.target == Target::Operator && a.fault == FaultKind::Destroy {
            return Err(Error::DestroyOperator);
        }
        if a.pause_for.is_some() && a.fault != FaultKind::Pause {
            return Err(Error::OptionForOtherFault(
                "--pause-for",
                "pause",
                a.fault.as_str(),
            ));
        }
        if a.fault == FaultKind::ClockSkew && !cfg!(target_arch = "x86_64") {
            return Err(Error::ClockSkewArch);
        }
        if a.target == Target::Operator && !matches!(a.fault, FaultKind::Kill | FaultKind::Pause) {
            return Err(Error::MemberFaultOnOperator(a.fault.as_str()));
        }
        if a.platform == Platform::Kube
            && let Some(why) = kube_refusal(a.fault)
        {
            return Err(Error::NotOnKube(a.fault.as_str(), why));
        }
        let faults = fault_options(&a)?;
        for name in &a.clusters {
            etcd_operator::validate::check_name(name).map_err(Error::BadClusterName)?;
        }
        if a.platform == Platform::Local {
            let shown = a.state_dir.display().to_string();
            match std::fs::metadata(&a.state_dir) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(Error::StateDir(shown, "not a folder")),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(Error::StateDir(shown, "no such folder"));
                }
                Err(_) => return Err(Error::StateDir(shown, "cannot be read")),
            }
        }
        let platform = match a.platform {
            Platform::Local => PlatformConfig::Local {
                state_dir: a.state_dir,
            },
            Platform::Kube => PlatformConfig::Kube {
                kubeconfig: a.kubeconfig,
                namespace: a.namespace,
                selector: a.selector,
            },
        };
        let mut clusters = a.clusters;
        clusters.sort();
        clusters.dedup();
        Ok(Config {
            platform,
            clusters,
            target: a.target,
            store_addr: a.store_addr,
            fault: a.fault,
            interval: a.kill_interval,
            pause_for: a.pause_for.unwrap_or(DEFAULT_PAUSE_FOR),
            max_kill: a.max_kill.unwrap_or(usize::MAX),
            probability: a.probability,
            min_age: a.min_age,
            jitter: a.jitter,
            seed: a.seed.unwrap_or_else(rand::random),
            dry_run: a.dry_run,
            duration: a.duration,
            max_faults: a.max_faults,
            fault_log: a.fault_log,
            faults,
        })
    }
}

impl Config {
    /// One line saying what the run will do.
    pub fn describe(&self) -> String {
        let d = |d: Duration| humantime::format_duration(d).to_string();
        let o = &self.faults;
        let fault = match self.fault {
            FaultKind::Pause => format!("pause (for {})", d(self.pause_for)),
            FaultKind::Partition => match o.split {
                None => format!("partition (for {})", d(o.fault_for)),
                Some(s) => format!(
                    "partition into two sides, the victim's a {} (for {})",
                    s.as_str(),
                    d(o.fault_for)
                ),
            },
            FaultKind::Delay => format!(
                "delay {} ± {} (for {})",
                d(o.latency),
                d(o.latency_jitter),
                d(o.fault_for)
            ),
            FaultKind::Loss => format!("loss {}% (for {})", o.loss_percent, d(o.fault_for)),
            FaultKind::BlackholeUntilSnapshot => {
                format!("blackhole-until-snapshot (at most {})", d(o.fault_for))
            }
            FaultKind::Corrupt => format!("corrupt the {} of", o.corrupt.as_str()),
            FaultKind::ClockSkew => {
                format!(
                    "shift the wall clock by {} (for {}) of",
                    o.skew,
                    d(o.fault_for)
                )
            }
            FaultKind::SlowDisk => format!(
                "throttle the disk writes to {} per second (for {}) of",
                o.disk_iops,
                d(o.fault_for)
            ),
            other => other.as_str().to_string(),
        };
        let whom = match self.target {
            Target::Random => "1 random member",
            Target::Leader => "the leader",
            Target::Follower => "1 follower",
            Target::Minority => "a minority of the members",
            Target::Majority => "a majority of the members",
            Target::Operator => "the operator",
            Target::Store => "the object store",
        };
        let mut line = format!(
            "seed {seed} (replay with --seed {seed}); every {}",
            d(self.interval),
            seed = self.seed
        );
        if !self.jitter.is_zero() {
            line.push_str(&format!(" + up to {}", d(self.jitter)));
        }
        line.push_str(&format!(": {fault} {whom}"));
        if !matches!(self.target, Target::Operator | Target::Store) {
            if self.clusters.is_empty() {
                line.push_str(" of one cluster (all clusters selected)");
            } else {
                line.push_str(&format!(" of one of: {}", self.clusters.join(", ")));
            }
        }
        if self.probability < 1.0 {
            line.push_str(&format!(", with probability {}", self.probability));
        }
        if let Some(m) = self.duration {
            line.push_str(&format!("; for {}", d(m)));
        }
        if let Some(m) = self.max_faults {
            line.push_str(&format!("; at most {m} faults"));
        }
        if self.dry_run {
            line.push_str(" (DRY RUN: nothing is touched)");
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn parse(args: &[&str]) -> Result<Config, Error> {
        let mut all = vec!["chaos-monkey", "--state-dir", "/"];
        all.extend_from_slice(args);
        Config::from_args(Args::try_parse_from(all).expect("flags parse"))
    }

    #[test]
    fn majority_needs_consent() {
        assert_eq!(parse(&["--target", "majority"]), Err(Error::QuorumLoss));
        let c = parse(&["--target", "majority", "--allow-quorum-loss"]).expect("allowed");
        assert_eq!(c.target, Target::Majority);
    }

    #[test]
    fn platform_and_fault_combinations() {
        assert_eq!(
            parse(&["--platform", "kube", "--fault", "pause"]),
            Err(Error::PauseOnKube)
        );
        assert_eq!(
            parse(&["--target", "operator", "--fault", "destroy"]),
            Err(Error::DestroyOperator)
        );
        assert!(parse(&["--target", "operator", "--fault", "pause"]).is_ok());
    }

    #[test]
    fn cluster_names_are_checked_sorted_and_deduplicated() {
        assert!(matches!(
            parse(&["--cluster", "../etc"]),
            Err(Error::BadClusterName(_))
        ));
        let c = parse(&["--cluster", "b", "--cluster", "a", "--cluster", "b"]).expect("ok");
        assert_eq!(c.clusters, ["a", "b"]);
    }

    #[test]
    fn options_of_other_faults_are_refused_naming_the_flag() {
        let e = parse(&["--fault", "kill", "--fault-for", "5s"]).expect_err("refused");
        assert!(
            e.to_string()
                .starts_with("--fault-for applies to --fault partition"),
            "{e}"
        );
        let e = parse(&["--fault", "partition", "--latency", "5ms"]).expect_err("refused");
        assert_eq!(
            e,
            Error::OptionForOtherFault("--latency", "delay", "partition")
        );
        assert!(parse(&["--fault", "delay", "--loss", "5%"]).is_err());
        assert!(parse(&["--fault", "loss", "--corrupt", "wal"]).is_err());
        assert!(parse(&["--fault", "corrupt", "--fill-max", "64MiB"]).is_err());
        assert!(parse(&["--fault", "kill", "--split", "minority"]).is_err());
        assert_eq!(
            parse(&[
                "--fault",
                "partition",
                "--split",
                "minority",
                "--target",
                "minority"
            ]),
            Err(Error::SplitTarget("minority"))
        );
        let c = parse(&[
            "--fault",
            "delay",
            "--latency",
            "300ms",
            "--latency-jitter",
            "20ms",
            "--fault-for",
            "3s",
        ])
        .expect("ok");
        assert_eq!(c.faults.latency, Duration::from_millis(300));
        assert_eq!(c.faults.latency_jitter, Duration::from_millis(20));
        assert_eq!(c.faults.fault_for, Duration::from_secs(3));
        let c = parse(&[
            "--fault",
            "partition",
            "--split",
            "majority",
            "--target",
            "leader",
        ])
        .expect("ok");
        assert_eq!(c.faults.split, Some(crate::cli::Split::Majority));
        assert_eq!(
            parse(&["--fault", "loss"]).expect("ok").faults.loss_percent,
            30.0
        );
    }

    #[test]
    fn a_store_is_paused_at_a_loopback_address_only() {
        let store = ["--target", "store", "--fault", "pause"];
        assert!(matches!(parse(&store), Err(Error::Store(m)) if m.contains("missing")));
        let at = |addr: &str, fault: &str| {
            parse(&["--target", "store", "--fault", fault, "--store-addr", addr])
        };
        let c = at("127.0.0.1:9000", "pause").expect("a store at loopback");
        assert_eq!(
            c.store_addr,
            Some("127.0.0.1:9000".parse().expect("an address"))
        );
        assert!(
            c.describe().contains("the object store"),
            "{}",
            c.describe()
        );
        assert!(
            matches!(at("10.0.0.1:9000", "pause"), Err(Error::Store(m)) if m.contains("loopback"))
        );
        assert!(
            matches!(at("127.0.0.1:9000", "kill"), Err(Error::Store(m)) if m.contains("pause"))
        );
        let stray = parse(&["--store-addr", "127.0.0.1:9000"]);
        assert!(matches!(stray, Err(Error::Store(m)) if m.contains("--target store only")));
    }

    #[test]
    fn clock_skew_kube_and_operator_refusals() {
        let c = parse(&[
            "--fault",
            "clock-skew",
            "--skew",
            "-45s",
            "--fault-for",
            "3s",
        ])
        .expect("local clock-skew is taken");
        assert_eq!(c.faults.skew.nanos(), -45_000_000_000);
        assert_eq!(c.faults.fault_for, Duration::from_secs(3));
        assert_eq!(
            parse(&["--fault", "clock-skew"])
                .expect("ok")
                .faults
                .skew
                .nanos(),
            30_000_000_000
        );
        assert_eq!(
            parse(&["--fault", "slow-disk", "--disk-iops", "5"])
                .expect("ok")
                .faults
                .disk_iops,
            5
        );
        assert_eq!(
            parse(&["--fault", "kill", "--skew", "5s"]),
            Err(Error::OptionForOtherFault("--skew", "clock-skew", "kill"))
        );
        assert_eq!(
            parse(&["--fault", "clock-skew", "--disk-iops", "5"]),
            Err(Error::OptionForOtherFault(
                "--disk-iops",
                "slow-disk",
                "clock-skew"
            ))
        );
        let e = parse(&["--platform", "kube", "--fault", "clock-skew"]).expect_err("refused");
        assert!(e.to_string().contains("vDSO"), "{e}");
        for f in [
            "slow-disk",
            "delay",
            "loss",
            "blackhole-until-snapshot",
            "corrupt",
            "disk-full",
        ] {
            let e = parse(&["--platform", "kube", "--fault", f]).expect_err("refused");
            assert!(e.to_string().contains("not supported on kube"), "{f}: {e}");
        }
        assert!(parse(&["--platform", "kube", "--fault", "partition"]).is_ok());
        assert_eq!(
            parse(&["--target", "operator", "--fault", "partition"]),
            Err(Error::MemberFaultOnOperator("partition"))
        );
    }

    #[test]
    fn pause_for_needs_the_pause_fault() {
        assert_eq!(
            parse(&["--pause-for", "2s"]),
            Err(Error::OptionForOtherFault("--pause-for", "pause", "kill"))
        );
        let c = parse(&["--fault", "pause", "--pause-for", "2s"]).expect("ok");
        assert_eq!(c.pause_for, Duration::from_secs(2));
        let c = parse(&["--fault", "pause"]).expect("ok");
        assert_eq!(c.pause_for, DEFAULT_PAUSE_FOR);
    }

    #[test]
    fn a_missing_state_folder_says_so() {
        let e = Config::from_args(
            Args::try_parse_from(["chaos-monkey", "--state-dir", "/nonexistent/state"])
                .expect("flags parse"),
        )
        .expect_err("missing");
        assert!(e.to_string().contains("no such folder"), "{e}");
        let kube = Args::try_parse_from([
            "chaos-monkey",
            "--platform",
            "kube",
            "--state-dir",
            "/nonexistent/state",
        ])
        .expect("flags parse");
        assert!(Config::from_args(kube).is_ok(), "kube does not use it");
    }

    #[test]
    fn seed_and_caps() {
        let c = parse(&["--seed", "42", "--max-kill", "2"]).expect("ok");
        assert_eq!((c.seed, c.max_kill), (42, 2));
        assert_eq!(parse(&[]).expect("ok").max_kill, usize::MAX);
    }
}
