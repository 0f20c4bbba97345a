//! The `idle` section: the operator's memory and CPU, and its members'
//! CPU, with 100 clusters of 1 member and nothing to do.

use std::time::Duration;

use etcd_operator::testing::manifest;

use super::operator_env;
use super::support::usage;

/// The pids of the etcd processes whose command line names `dir`.
fn etcd_pids(dir: &std::path::Path) -> Vec<u32> {
    let dir = dir.display().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd);
            let exe = cmd.split('\0').next().unwrap_or_default();
            exe.ends_with("/etcd") && cmd.contains(&dir)
        })
        .collect()
}

/// CPU seconds of `pids` together.
fn cpu_of(pids: &[u32]) -> f64 {
    pids.iter().map(|p| usage(*p).0).sum()
}

pub fn idle_100() {
    let mut env = operator_env(true);
    for i in 0..100 {
        env.write_manifest(
            &format!("i{i}.yaml"),
            &manifest(&format!("i{i}"), 1, "3.4.23"),
        );
    }
    env.start_operator();
    for i in 0..100 {
        env.wait_running(&format!("i{i}"), 1);
    }
    std::thread::sleep(Duration::from_secs(5));
    let pid = u32::try_from(env.operator_process().unwrap().pid).unwrap();
    let members = etcd_pids(env.dir.path());
    let window = Duration::from_secs(30);
    let (cpu0, _) = usage(pid);
    let etcd0 = cpu_of(&members);
    std::thread::sleep(window);
    let (cpu1, rss) = usage(pid);
    let etcd1 = cpu_of(&members);
    let pct = |a: f64, b: f64| 100.0 * (b - a) / window.as_secs_f64();
    println!(
        "{:<34} operator RSS {rss:>6.1} MiB, CPU {:>5.2}% of a core (over {window:?}); its {} etcd \
         members {:>5.1}% of a core together | target < 60 MiB, < 2%",
        "idle, 100 clusters of 1",
        pct(cpu0, cpu1),
        members.len(),
        pct(etcd0, etcd1),
    );
}
