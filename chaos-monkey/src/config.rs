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
    /// `--start-after` as long as the run or longer.
    #[error(
        "--start-after {0} is not shorter than --duration {1}: the run would end before its \
         first interval; shorten --start-after or lengthen --duration"
    )]
    StartAfterDuration(String, String),
}

/// Why `--target store` or `--store-addr` cannot be taken as given.
fn store_refusal(a: &Args) -> Option<&'static str> {
    let store = a.chaos.target == Target::Store;
    match a.store_addr {
        None if store => Some("--store-addr is missing"),
        Some(_) if !store => Some("--store-addr is for --target store only"),
        None if a.store_wildcard => Some("--store-wildcard is for --target store only"),
        Some(addr) if !addr.ip().is_loopback() => Some("the address is not a loopback one"),
        _ if store && a.chaos.fault != FaultKind::Pause => Some("only --fault pause hits a store"),
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
    /// A process listening on every address may be the store
    /// (`--store-wildcard`).
    pub store_wildcard: bool,
    /// What is done to them.
    pub fault: FaultKind,
    /// Time between ticks (> 0).
    pub interval: Duration,
    /// Time before the first interval begins.
    pub start_after: Duration,
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
        if let Some(d) = a.duration
            && a.chaos.start_after >= d
        {
            let text = |d| humantime::format_duration(d).to_string();
            return Err(Error::StartAfterDuration(
                text(a.chaos.start_after),
                text(d),
            ));
        }
        if a.chaos.target == Target::Majority && !a.chaos.allow_quorum_loss {
            return Err(Error::QuorumLoss);
        }
        if a.platform == Platform::Kube && a.chaos.fault == FaultKind::Pause {
            return Err(Error::PauseOnKube);
        }
        if let Some(why) = store_refusal(&a) {
            return Err(Error::Store(why));
        }
        if a.chaos.target == Target::Operator && a.chaos.fault == FaultKind::Destroy {
            return Err(Error::DestroyOperator);
        }
        if let Some((flag @ "--pause-for", wants)) = a.chaos.options_for_other_faults().first() {
            return Err(Error::OptionForOtherFault(
                flag,
                wants,
                a.chaos.fault.as_str(),
            ));
        }
        if a.chaos.fault == FaultKind::ClockSkew && !cfg!(target_arch = "x86_64") {
            return Err(Error::ClockSkewArch);
        }
        if a.chaos.target == Target::Operator
            && !matches!(a.chaos.fault, FaultKind::Kill | FaultKind::Pause)
        {
            return Err(Error::MemberFaultOnOperator(a.chaos.fault.as_str()));
        }
        if a.platform == Platform::Kube
            && let Some(why) = kube_refusal(a.chaos.fault)
        {
            return Err(Error::NotOnKube(a.chaos.fault.as_str(), why));
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
            target: a.chaos.target,
            store_addr: a.store_addr,
            store_wildcard: a.store_wildcard,
            fault: a.chaos.fault,
            interval: a.chaos.kill_interval,
            start_after: a.chaos.start_after,
            pause_for: a.chaos.pause_for.unwrap_or(DEFAULT_PAUSE_FOR),
            max_kill: a.chaos.max_kill.unwrap_or(usize::MAX),
            probability: a.chaos.probability,
            min_age: a.chaos.min_age,
            jitter: a.chaos.jitter,
            seed: a.chaos.seed.unwrap_or_else(rand::random),
            dry_run: a.chaos.dry_run,
            duration: a.duration,
            max_faults: a.chaos.max_faults,
            fault_log: a.fault_log,
            faults,
        })
    }
}

/// The store the monkey was told of, as `--store-addr` and
/// `--store-wildcard` give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreAt {
    /// Where it listens.
    pub addr: std::net::SocketAddrV4,
    /// Whether a process listening on every address may be it.
    pub wildcard: bool,
}

impl Config {
    /// The object store `--target store` hits, as its flags give it.
    pub fn store_at(&self) -> Option<StoreAt> {
        let addr = self.store_addr.filter(|_| self.target == Target::Store)?;
        Some(StoreAt {
            addr,
            wildcard: self.store_wildcard,
        })
    }

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
            Target::Applier => "the member a standby's applier writes through (its leader)",
        };
        let mut line = format!(
            "seed {seed} (replay with --seed {seed}); every {}",
            d(self.interval),
            seed = self.seed
        );
        if !self.jitter.is_zero() {
            line.push_str(&format!(" + up to {}", d(self.jitter)));
        }
        if !self.start_after.is_zero() {
            line.push_str(&format!(" after the first {}", d(self.start_after)));
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
mod tests;
