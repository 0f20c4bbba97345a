//! `--cleanup` on the local platform: members (and the operator) a killed
//! monkey left paused (SIGSTOP) are resumed, unless another monkey still
//! runs (it may be pausing them on purpose): then they are only named.

use std::path::{Path, PathBuf};

use etcd_operator::platform::local::layout::Layout;
use etcd_operator::platform::local::process::{self, ProcessId};
use etcd_operator::platform::local::running_operator;
use rustix::process::Signal;

/// The state letter of process `pid` in `/proc/PID/stat` (`R`, `S`, `T`,
/// `Z`...); `None` when it is gone.
fn state(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state follows the command name, which may hold ')'.
    let i = stat.rfind(')')?;
    stat[i + 1..].split_whitespace().next().map(str::to_string)
}

/// Whether the process is stopped (`T` in `/proc/PID/stat`); `false` when
/// it is gone.
pub fn stopped(id: &ProcessId) -> bool {
    let Ok(pid) = u32::try_from(id.pid) else {
        return false;
    };
    process::alive(id) && state(pid).as_deref() == Some("T")
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
        .filter(|pid| match works_on(*pid) {
            Works::On(dir) => dir == ours,
            Works::Nothing => false,
            Works::Unknown => true,
        })
        .collect()
}

/// What a monkey process works on.
#[derive(Debug, PartialEq)]
enum Works {
    /// This state folder.
    On(PathBuf),
    /// No state folder: it has exited or is exiting (a zombie, or its
    /// arguments already released), or the folder it names does not exist
    /// (so it is not ours, which does).
    Nothing,
    /// It runs, but where cannot be read: it counts as working on ours.
    Unknown,
}

/// The state folder the monkey `pid` works on.
fn works_on(pid: u32) -> Works {
    match state(pid).as_deref() {
        None | Some("Z" | "X") => return Works::Nothing,
        Some(_) => {}
    }
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
    // A running program has at least its name; an exiting one has none.
    if args.iter().all(String::is_empty) {
        return Works::Nothing;
    }
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
    let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd")) else {
        return if state(pid).is_none() {
            Works::Nothing
        } else {
            Works::Unknown
        };
    };
    match cwd.join(dir).canonicalize() {
        Ok(d) => Works::On(d),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Works::Nothing,
        Err(_) => Works::Unknown,
    }
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

    /// A monkey that has exited (a zombie its parent has not reaped yet)
    /// or that names a folder that does not exist works on nothing; a
    /// running one on the folder its `--state-dir` names from its working
    /// folder.
    #[test]
    fn what_a_process_works_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("st")).expect("mkdir");
        // A shell that waits in short sleeps, with the flag in its
        // arguments (killed, it leaves at most a 50 ms sleep behind).
        let spawn = |script: &str, state: &str| {
            std::process::Command::new("sh")
                .args(["-c", script, "sh", "--state-dir", state])
                .current_dir(dir.path())
                .spawn()
                .expect("sh")
        };
        let wait = "while :; do sleep 0.05; done";
        let mut here = spawn(wait, "st");
        let mut gone = spawn(wait, "missing");
        let mut dead = spawn("exit 0", "st");
        let zombie = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            state(dead.id()).as_deref() == Some("Z")
        });
        let seen = (
            works_on(here.id()),
            works_on(gone.id()),
            works_on(dead.id()),
        );
        for c in [&mut here, &mut gone, &mut dead] {
            let _ = c.kill();
            let _ = c.wait();
        }
        let st = dir.path().join("st").canonicalize().expect("canonical");
        assert!(zombie, "the exited shell never became a zombie");
        assert_eq!(seen, (Works::On(st), Works::Nothing, Works::Nothing));
    }
}
