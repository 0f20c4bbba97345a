//! The chaos monkey's command line, from a scenario's chaos section.

use std::path::Path;
use std::time::Duration;

use crate::scenario::{Chaos, Dur};

/// Where the monkey finds the members.
#[derive(Clone, Debug)]
pub enum Where<'a> {
    /// The operator's state folder.
    Local(&'a Path),
    /// Kubernetes: kubeconfig (default when `None`) and namespace.
    Kube(Option<&'a Path>, &'a str),
}

/// The arguments of `chaos-monkey` for `cluster`, running for `duration`.
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
    flag("kill-interval", c.kill_interval.flag());
    if let Some(t) = c.target {
        flag("target", t.as_str().into());
    }
    if let Some(f) = c.fault {
        flag("fault", f.as_str().into());
    }
    if let Some(d) = c.pause_for {
        flag("pause-for", d.flag());
    }
    if let Some(d) = c.fault_for {
        flag("fault-for", d.flag());
    }
    if let Some(sp) = c.split {
        flag("split", sp.as_str().into());
    }
    if let Some(d) = c.latency {
        flag("latency", d.flag());
    }
    if let Some(d) = c.latency_jitter {
        flag("latency-jitter", d.flag());
    }
    if let Some(l) = c.loss {
        flag("loss", format!("{l}%"));
    }
    if let Some(p) = c.corrupt {
        flag("corrupt", p.as_str().into());
    }
    if let Some(k) = c.skew {
        flag("skew", k.to_string());
    }
    if let Some(n) = c.disk_iops {
        flag("disk-iops", n.to_string());
    }
    if let Some(n) = c.max_kill {
        flag("max-kill", n.to_string());
    }
    if let Some(p) = c.probability {
        flag("probability", p.to_string());
    }
    if let Some(d) = c.min_age {
        flag("min-age", d.flag());
    }
    if let Some(d) = c.jitter {
        flag("jitter", d.flag());
    }
    if let Some(s) = seed.or(c.seed) {
        flag("seed", s.to_string());
    }
    if let Some(n) = c.max_faults {
        flag("max-faults", n.to_string());
    }
    flag(
        "duration",
        Dur(duration.max(Duration::from_millis(1))).flag(),
    );
    flag("fault-log", fault_log.display().to_string());
    if c.dry_run {
        a.push("--dry-run".into());
    }
    if c.allow_quorum_loss {
        a.push("--allow-quorum-loss".into());
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{FaultKind, Target};

    /// The monkey's command line for `c` on a local state folder, as one
    /// line.
    fn local_line(c: &Chaos) -> String {
        let at = Where::Local(Path::new("/s"));
        args(c, at, "d", Path::new("f"), None, Duration::from_secs(1)).join(" ")
    }

    /// Every field of a scenario's chaos section reaches the monkey: the
    /// line built here parses with the monkey's own command line into the
    /// same values. The destructuring names every field, so a field added
    /// to `Chaos` breaks this test's build until it is mapped here (and,
    /// for the test to pass, in `args`).
    #[test]
    fn every_field_parses_back_the_same_in_the_monkeys_own_command_line() {
        use chaos_monkey::cli::Args;
        use clap::Parser;

        use crate::scenario::{CorruptPart, Split};
        let d = |ms: u64| Dur(Duration::from_millis(ms));
        let full = Chaos {
            kill_interval: d(2500),
            target: Some(Target::Follower),
            fault: Some(FaultKind::Delay),
            pause_for: Some(d(3000)),
            max_kill: Some(2),
            probability: Some(0.25),
            min_age: Some(d(7000)),
            jitter: Some(d(300)),
            seed: Some(11),
            dry_run: true,
            max_faults: Some(9),
            allow_quorum_loss: true,
            fault_for: Some(d(8000)),
            split: Some(Split::Majority),
            latency: Some(d(40)),
            latency_jitter: Some(d(5)),
            loss: Some(12.5),
            corrupt: Some(CorruptPart::Wal),
            skew: Some("-30s".parse().expect("a skew")),
            disk_iops: Some(20),
            start_after: Some(d(5000)),
        };
        let at = Where::Local(Path::new("/s"));
        let line = args(
            &full,
            at,
            "demo",
            Path::new("f.jsonl"),
            None,
            Duration::from_secs(60),
        );
        let argv = std::iter::once("chaos-monkey".to_string()).chain(line.clone());
        let m = Args::try_parse_from(argv).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        let Chaos {
            kill_interval,
            target,
            fault,
            pause_for,
            max_kill,
            probability,
            min_age,
            jitter,
            seed,
            dry_run,
            max_faults,
            allow_quorum_loss,
            fault_for,
            split,
            latency,
            latency_jitter,
            loss,
            corrupt,
            skew,
            disk_iops,
            start_after,
        } = full;
        let dur = |d: Option<Dur>| d.map(|d| d.0);
        assert_eq!(m.kill_interval, kill_interval.0);
        assert_eq!(Some(m.target), target);
        assert_eq!(Some(m.fault), fault);
        assert_eq!(m.pause_for, dur(pause_for));
        assert_eq!(m.max_kill, max_kill.map(|n| n as usize));
        assert_eq!(Some(m.probability), probability);
        assert_eq!(Some(m.min_age), dur(min_age));
        assert_eq!(Some(m.jitter), dur(jitter));
        assert_eq!(m.seed, seed);
        assert_eq!(m.dry_run, dry_run);
        assert_eq!(m.max_faults, max_faults.map(|n| n as usize));
        assert_eq!(m.allow_quorum_loss, allow_quorum_loss);
        assert_eq!(m.fault_for, dur(fault_for));
        assert_eq!(m.split, split);
        assert_eq!(m.latency, dur(latency));
        assert_eq!(m.latency_jitter, dur(latency_jitter));
        assert_eq!(m.loss, loss);
        assert_eq!(m.corrupt, corrupt);
        assert_eq!(m.skew, skew);
        assert_eq!(m.disk_iops, disk_iops);
        // The runner's own: it starts the monkey that much later.
        assert!(start_after.is_some());
        assert_eq!(m.clusters, ["demo"]);
        assert_eq!(m.duration, Some(Duration::from_secs(60)));
        assert_eq!(m.state_dir, Path::new("/s"));
        assert_eq!(m.fault_log.as_deref(), Some(Path::new("f.jsonl")));
    }

    #[test]
    fn every_option_becomes_its_flag() {
        let c = Chaos {
            kill_interval: Dur(Duration::from_secs(10)),
            target: Some(Target::Majority),
            fault: Some(FaultKind::Pause),
            pause_for: Some(Dur(Duration::from_millis(1500))),
            max_kill: Some(2),
            probability: Some(0.5),
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
            "--platform local --state-dir /s --cluster demo --kill-interval 10000ms \
             --target majority --fault pause --pause-for 1500ms --max-kill 2 --probability 0.5 \
             --seed 9 --duration 60000ms --fault-log /o/f.jsonl --dry-run --allow-quorum-loss"
        );
        let net = Chaos {
            kill_interval: Dur(Duration::from_secs(30)),
            target: Some(Target::Leader),
            fault: Some(FaultKind::Partition),
            fault_for: Some(Dur(Duration::from_secs(8))),
            split: Some(crate::scenario::Split::Minority),
            ..Chaos::default()
        };
        let a = args(
            &net,
            Where::Local(Path::new("/s")),
            "demo",
            Path::new("f"),
            None,
            Duration::from_secs(60),
        );
        assert!(
            a.join(" ")
                .contains("--target leader --fault partition --fault-for 8000ms --split minority"),
            "{a:?}"
        );
        let loss = Chaos {
            fault: Some(FaultKind::Loss),
            loss: Some(30.0),
            ..net
        };
        let a = local_line(&loss);
        assert!(a.contains("--loss 30%"), "{a:?}");
        let skew = Chaos {
            fault: Some(FaultKind::ClockSkew),
            skew: Some("-30s".parse().expect("skew")),
            ..Chaos::default()
        };
        let a = local_line(&skew);
        assert!(a.contains("--fault clock-skew --skew -30s"), "{a:?}");
        let slow = Chaos {
            fault: Some(FaultKind::SlowDisk),
            disk_iops: Some(20),
            ..Chaos::default()
        };
        let a = local_line(&slow);
        assert!(a.contains("--fault slow-disk --disk-iops 20"), "{a:?}");
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
