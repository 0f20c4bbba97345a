//! The programs and kernel interfaces network faults use (`iptables`, the
//! cgroup v2 hierarchy), run as child processes, and the check at start
//! that they are there and usable: root, the iptables matches (cgroup,
//! connmark, statistic, comment; the NFQUEUE target), a cgroup v2 mount.

use std::io;
use std::path::PathBuf;
use std::process::Command;

use super::Error;

/// What network faults need, for error messages and `--help`.
pub const NEEDS: &str = "network faults need root, iptables (with the cgroup, connmark, \
    statistic and comment matches and the NFQUEUE target; Debian package iptables) and a \
    cgroup v2 hierarchy";

/// Runs `prog args...`; its standard output, or an error with its stderr.
pub fn run(prog: &str, args: &[String]) -> Result<String, Error> {
    let out = Command::new(prog)
        .args(args)
        .output()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::Missing(format!("{prog} is not installed; {NEEDS}")),
            _ => Error::Io {
                what: format!("cannot run {prog}"),
                source: e,
            },
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(Error::Command {
            command: format!("{prog} {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// `run` with string slices.
pub fn cmd(prog: &str, args: &[&str]) -> Result<String, Error> {
    let args: Vec<String> = args.iter().map(|s| (*s).to_string()).collect();
    run(prog, &args)
}

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` on hybrid systems).
pub fn cgroup2_root() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|line| {
        // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE SUPER
        let (left, right) = line.split_once(" - ")?;
        let fstype = right.split_whitespace().next()?;
        let mount = left.split_whitespace().nth(4)?;
        (fstype == "cgroup2").then(|| PathBuf::from(mount))
    })
}

/// Checks root, the tools and the kernel features, by adding and removing a
/// probe chain that uses every match the faults use.
pub fn preflight() -> Result<PathBuf, Error> {
    if !rustix::process::geteuid().is_root() {
        return Err(Error::Missing(format!(
            "not running as root (uid {}); {NEEDS}",
            rustix::process::geteuid().as_raw()
        )));
    }
    let root = cgroup2_root()
        .ok_or_else(|| Error::Missing(format!("no cgroup2 file system is mounted; {NEEDS}")))?;
    let probe = format!("CM-probe-{}", std::process::id());
    cmd("iptables", &["-w", "-t", "mangle", "-N", &probe])?;
    let tried = cmd(
        "iptables",
        &[
            "-w",
            "-t",
            "mangle",
            "-A",
            &probe,
            "-m",
            "cgroup",
            "--path",
            "/",
            "-m",
            "connmark",
            "--mark",
            "0x1",
            "-m",
            "comment",
            "--comment",
            "chaos-monkey probe",
            "-j",
            "CONNMARK",
            "--set-mark",
            "0x1",
        ],
    );
    let _ = cmd("iptables", &["-w", "-t", "mangle", "-F", &probe]);
    let _ = cmd("iptables", &["-w", "-t", "mangle", "-X", &probe]);
    tried.map_err(|e| {
        Error::Missing(format!(
            "iptables cannot use a match or target network faults need ({e}); {NEEDS}"
        ))
    })?;
    Ok(root)
}
