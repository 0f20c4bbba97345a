//! A checked run configuration: built from the command line by
//! [`Config::from_args`], or directly by a library user (the soak runner).
//! Checks that involve several flags live here; selection checks that need
//! the platform (unknown cluster, empty selection) are in [`crate::monkey`].

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::{Args, FaultKind, Platform};
use crate::select::Target;

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
}

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
        if a.target == Target::Operator && a.fault == FaultKind::Destroy {
            return Err(Error::DestroyOperator);
        }
        for name in &a.clusters {
            etcd_operator::validate::check_name(name).map_err(Error::BadClusterName)?;
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
            fault: a.fault,
            interval: a.kill_interval,
            pause_for: a.pause_for,
            max_kill: a.max_kill.unwrap_or(usize::MAX),
            probability: a.probability,
            min_age: a.min_age,
            jitter: a.jitter,
            seed: a.seed.unwrap_or_else(rand::random),
            dry_run: a.dry_run,
            duration: a.duration,
            max_faults: a.max_faults,
            fault_log: a.fault_log,
        })
    }
}

impl Config {
    /// One line saying what the run will do.
    pub fn describe(&self) -> String {
        let d = |d: Duration| humantime::format_duration(d).to_string();
        let fault = match self.fault {
            FaultKind::Kill => "kill".to_string(),
            FaultKind::Destroy => "destroy".to_string(),
            FaultKind::Pause => format!("pause (for {})", d(self.pause_for)),
        };
        let whom = match self.target {
            Target::Random => "1 random member",
            Target::Leader => "the leader",
            Target::Follower => "1 follower",
            Target::Minority => "a minority of the members",
            Target::Majority => "a majority of the members",
            Target::Operator => "the operator",
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
        if self.target != Target::Operator {
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
        let mut all = vec!["chaos-monkey"];
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
    fn seed_and_caps() {
        let c = parse(&["--seed", "42", "--max-kill", "2"]).expect("ok");
        assert_eq!((c.seed, c.max_kill), (42, 2));
        assert_eq!(parse(&[]).expect("ok").max_kill, usize::MAX);
    }
}
