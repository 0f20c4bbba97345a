//! The chaos monkey's command line, from a scenario's chaos section (the
//! monkey's own [`Chaos`], written back as flags by [`Chaos::to_args`]),
//! plus what the runner decides: where the members are, the cluster, how
//! long, the fault log and `soak run --seed`.

use std::path::Path;
use std::time::Duration;

use chaos_monkey::cli::duration_text;

use crate::scenario::Chaos;

/// Where the monkey finds the members.
#[derive(Clone, Debug)]
pub enum Where<'a> {
    /// The operator's state folder.
    Local(&'a Path),
    /// Kubernetes: kubeconfig (default when `None`) and namespace.
    Kube(Option<&'a Path>, &'a str),
}

/// The arguments of `chaos-monkey` for `cluster`, running for `duration`;
/// `seed` (from `soak run --seed`) replaces the scenario's.
pub fn args(
    c: &Chaos,
    at: Where<'_>,
    cluster: &str,
    fault_log: &Path,
    seed: Option<u64>,
    duration: Duration,
) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    let mut flag = |k: &str, v: String| {
        a.push(format!("--{k}"));
        a.push(v);
    };
    match at {
        Where::Local(state) => {
            flag("platform", "local".into());
            flag("state-dir", state.display().to_string());
        }
        Where::Kube(kubeconfig, ns) => {
            flag("platform", "kube".into());
            if let Some(k) = kubeconfig {
                flag("kubeconfig", k.display().to_string());
            }
            flag("namespace", ns.into());
        }
    }
    flag("cluster", cluster.into());
    flag("duration", duration_text(monkey_duration(duration)));
    flag("fault-log", fault_log.display().to_string());
    let chaos = Chaos {
        seed: seed.or(c.seed),
        ..c.clone()
    };
    a.extend(chaos.to_args());
    a
}

/// How long the monkey is told to run when `left` is what is left of the
/// run: rounded up to whole seconds. The monkey prints its run's length on
/// its first line, and a run of `--duration 5m` starts it a few
/// milliseconds in: that line says `for 5m`, not `for 4m 59s 994ms`. Up,
/// not down: the runner stops the monkey at the end of the run, and a
/// monkey that ended first would be noted as having exited early.
pub fn monkey_duration(left: Duration) -> Duration {
    let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    Duration::from_secs(secs.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{FaultKind, Target};
    use chaos_monkey::cli::Args;
    use clap::Parser;

    fn parsed(line: &[String]) -> Args {
        let argv = std::iter::once("chaos-monkey".to_string()).chain(line.iter().cloned());
        Args::try_parse_from(argv).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }

    /// The monkey reads the scenario's section as it was written, and the
    /// runner's own flags as the runner meant them. (That every field of
    /// the section survives its flags is the monkey's own property test,
    /// `cli::chaos::tests::flags_read_back_the_same`.)
    #[test]
    fn the_monkey_reads_the_section_and_the_runners_flags() {
        let c = Chaos {
            kill_interval: Duration::from_millis(2500),
            target: Target::Follower,
            fault: FaultKind::Delay,
            latency: Some(Duration::from_millis(40)),
            start_after: Duration::from_secs(5),
            seed: Some(11),
            dry_run: true,
            ..Chaos::default()
        };
        let line = args(
            &c,
            Where::Local(Path::new("/s")),
            "demo",
            Path::new("f.jsonl"),
            None,
            Duration::from_secs(60),
        );
        let m = parsed(&line);
        assert_eq!(m.chaos, c);
        let odd = Duration::from_nanos(59_999_531_248);
        let at = Where::Local(Path::new("/s"));
        let cut = parsed(&args(&c, at, "demo", Path::new("f"), None, odd));
        assert_eq!(cut.duration, Some(Duration::from_secs(60)));
        assert_eq!(m.clusters, ["demo"]);
        assert_eq!(m.duration, Some(Duration::from_secs(60)));
        assert_eq!(m.state_dir, Path::new("/s"));
        assert_eq!(m.fault_log.as_deref(), Some(Path::new("f.jsonl")));
        // `soak run --seed` wins over the scenario's.
        let line = args(
            &c,
            Where::Local(Path::new("/s")),
            "demo",
            Path::new("f.jsonl"),
            Some(9),
            Duration::from_secs(60),
        );
        assert_eq!(parsed(&line).chaos.seed, Some(9));
    }

    /// A run of `--duration 5m` starts the monkey a few milliseconds in;
    /// its start line says the run's length as given.
    #[test]
    fn the_monkeys_start_line_says_the_duration_as_given() {
        let c = Chaos::default();
        let state = std::env::temp_dir();
        let at = Where::Local(&state);
        let left = Duration::from_secs(300) - Duration::from_millis(6);
        let line = args(&c, at, "demo", Path::new("f"), Some(1), left);
        let config = chaos_monkey::config::Config::from_args(parsed(&line)).expect("valid");
        let said = config.describe();
        assert!(said.ends_with("; for 5m"), "{said}");
        // What is left after a longer start is said as it is, in seconds.
        assert_eq!(
            monkey_duration(Duration::from_millis(258_300)),
            Duration::from_secs(259)
        );
        assert_eq!(
            monkey_duration(Duration::from_millis(1)),
            Duration::from_secs(1)
        );
        assert_eq!(monkey_duration(Duration::ZERO), Duration::from_secs(1));
    }

    #[test]
    fn every_option_becomes_its_flag() {
        let c = Chaos {
            kill_interval: Duration::from_secs(10),
            target: Target::Majority,
            fault: FaultKind::Pause,
            pause_for: Some(Duration::from_millis(1500)),
            max_kill: Some(2),
            probability: 0.5,
            seed: Some(4),
            dry_run: true,
            allow_quorum_loss: true,
            ..Chaos::default()
        };
        let a = args(
            &c,
            Where::Local(Path::new("/s")),
            "demo",
            Path::new("/o/f.jsonl"),
            Some(9),
            Duration::from_secs(60),
        );
        let line = a.join(" ");
        assert_eq!(
            line,
            "--platform local --state-dir /s --cluster demo --duration 60000ms \
             --fault-log /o/f.jsonl --target majority --fault pause --kill-interval 10000ms \
             --start-after 0ms --pause-for 1500ms --max-kill 2 --probability 0.5 \
             --min-age 0ms --jitter 0ms --seed 9 --allow-quorum-loss --dry-run"
        );
        let net = Chaos {
            target: Target::Leader,
            fault: FaultKind::Partition,
            fault_for: Some(Duration::from_secs(8)),
            split: Some(crate::scenario::Split::Minority),
            ..Chaos::default()
        };
        let local = |c: &Chaos| {
            let at = Where::Local(Path::new("/s"));
            args(c, at, "d", Path::new("f"), None, Duration::from_secs(1)).join(" ")
        };
        let a = local(&net);
        assert!(
            a.contains("--target leader --fault partition --kill-interval 30000ms")
                && a.contains("--fault-for 8000ms --split minority"),
            "{a:?}"
        );
        let loss = Chaos {
            fault: FaultKind::Loss,
            loss: Some(30.0),
            ..net
        };
        assert!(local(&loss).contains("--loss 30%"), "{loss:?}");
        let skew = Chaos {
            fault: FaultKind::ClockSkew,
            skew: Some("-30s".parse().expect("skew")),
            ..Chaos::default()
        };
        assert!(local(&skew).contains("--skew -30s"), "{skew:?}");
        let slow = Chaos {
            fault: FaultKind::SlowDisk,
            disk_iops: Some(20),
            ..Chaos::default()
        };
        assert!(local(&slow).contains("--disk-iops 20"), "{slow:?}");
        let a = args(
            &c,
            Where::Kube(None, "soak"),
            "demo",
            Path::new("f"),
            None,
            Duration::from_secs(1),
        );
        assert!(
            a.join(" ")
                .starts_with("--platform kube --namespace soak --cluster demo")
        );
        assert!(a.join(" ").contains("--seed 4"));
    }
}
