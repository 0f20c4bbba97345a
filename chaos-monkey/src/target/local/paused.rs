//! `--cleanup` on the local platform: members (and the operator) a killed
//! monkey left paused (SIGSTOP) are resumed, unless another monkey still
//! runs (it may be pausing them on purpose): then they are only named.

use std::path::{Path, PathBuf};

use etcd_operator::platform::local::layout::Layout;
use etcd_operator::platform::local::process::{self, ProcessId};
use etcd_operator::platform::local::running_operator;
use rustix::process::Signal;

/// Whether the process is stopped (`T` in `/proc/PID/stat`); `false` when
/// it is gone.
pub fn stopped(id: &ProcessId) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", id.pid)) else {
        return false;
    };
    // The state follows the command name, which may hold ')'.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    process::alive(id) && matches!(state, Some("T"))
}

/// Other chaos-monkey processes running now on the state folder
/// `state_dir` (their pids), read from each one's arguments, environment
/// and working folder as its `--state-dir` would be.
pub fn other_monkeys(state_dir: &Path) -> Vec<u32> {
    let me = std::process::id();
    let Ok(ours) = state_dir.canonicalize() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim_end() == "chaos-monkey")
        })
        .filter(|pid| monkey_state_dir(*pid).is_none_or(|d| d == ours))
        .collect()
}

/// The state folder the monkey `pid` works on (`None` when that cannot be
/// read: it then counts as working on ours).
fn monkey_state_dir(pid: u32) -> Option<PathBuf> {
    let words = |file: &str| -> Vec<String> {
        std::fs::read(format!("/proc/{pid}/{file}"))
            .map(|b| {
                b.split(|c| *c == 0)
                    .map(|w| String::from_utf8_lossy(w).into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let args = words("cmdline");
    let flag = args.iter().enumerate().find_map(|(i, a)| {
        if a == "--state-dir" {
            args.get(i + 1).cloned()
        } else {
            a.strip_prefix("--state-dir=").map(str::to_string)
        }
    });
    let env = || {
        words("environ").into_iter().find_map(|v| {
            v.strip_prefix("CHAOS_MONKEY_STATE_DIR=")
                .map(str::to_string)
        })
    };
    let dir = PathBuf::from(flag.or_else(env).unwrap_or_else(|| ".state".into()));
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
    cwd.join(dir).canonicalize().ok()
}

/// The stopped processes of the state folder at `layout`: what they are
/// (`member NAME/MEMBER`, `the operator`) and their ids.
pub fn find(layout: &Layout) -> Vec<(String, ProcessId)> {
    let mut out = Vec::new();
    if let Some(op) = running_operator(layout.root()).filter(stopped) {
        out.push(("the operator".to_string(), op));
    }
    for cluster in layout.cluster_names().unwrap_or_default() {
        for name in layout.member_names(&cluster).unwrap_or_default() {
            let Ok(Some(record)) = layout.read_member(&cluster, &name) else {
                continue;
            };
            if let Some(p) = record.process.filter(stopped) {
                out.push((format!("member {cluster}/{name}"), p));
            }
        }
    }
    out
}

/// Resumes what [`find`] finds, unless another monkey runs (`others`);
/// a line for each.
pub fn resume(layout: &Layout, others: &[u32]) -> Vec<String> {
    find(layout)
        .into_iter()
        .map(|(what, id)| {
            if !others.is_empty() {
                let pids: Vec<String> = others.iter().map(u32::to_string).collect();
                return format!(
                    "{what} (pid {}) is paused (SIGSTOP), not resumed: chaos-monkey {} still \
                     runs and may have paused it; stop it, or `kill -CONT {}`",
                    id.pid,
                    pids.join(", "),
                    id.pid
                );
            }
            match process::signal(&id, Signal::CONT) {
                Ok(true) => format!("resumed {what} (pid {}), left paused", id.pid),
                Ok(false) => format!("{what} (pid {}) exited meanwhile", id.pid),
                Err(e) => format!(
                    "{what} (pid {}) is paused and could not be resumed: {e}; `kill -CONT {}`",
                    id.pid, id.pid
                ),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_process_is_seen_and_a_running_one_not() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = i32::try_from(child.id()).expect("pid");
        let id = ProcessId::of(pid).expect("id");
        let stop = |s| process::signal(&id, s).expect("signal");
        assert!(!stopped(&id));
        stop(Signal::STOP);
        let seen = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            stopped(&id)
        });
        stop(Signal::CONT);
        let _ = child.kill();
        let _ = child.wait();
        assert!(seen, "never seen stopped");
    }
}
