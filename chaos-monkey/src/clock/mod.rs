//! `--fault clock-skew`: shifts a running etcd's wall clock the way Chaos
//! Mesh's TimeChaos does. Go reads the clock through the kernel's vDSO
//! (`__vdso_clock_gettime`, resolved once at start and called directly), so
//! libfaketime cannot reach it; instead the monkey
//! 1. finds `__vdso_clock_gettime` in the victim's `[vdso]` mapping (read
//!    from `/proc/PID/mem`, its ELF symbol table parsed: [`elf`]);
//! 2. stops every thread of the victim with ptrace ([`trace`]) and checks
//!    none is inside the vDSO (else lets them go and tries again);
//! 3. writes [`code::skew_code`] over the function's start through
//!    `/proc/PID/mem` (the kernel copies the page for that process only):
//!    the true time from the `clock_gettime` syscall, shifted for
//!    CLOCK_REALTIME and CLOCK_REALTIME_COARSE; the monotonic clocks, which
//!    etcd's timeouts run on, are left alone;
//! 4. lets the threads go.
//!
//! Healing writes the original bytes back the same way. Before patching, a
//! record of the patch (with the original bytes) is written to
//! `/run/chaos-monkey/clock-*.json`, so `chaos-monkey --cleanup` heals the
//! victims of a monkey that was SIGKILLed; a restart of the member heals it
//! too (a new process gets a fresh vDSO).

pub mod code;
pub mod elf;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod trace;

use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use etcd_operator::platform::local::process::{self, ProcessId};
use serde::{Deserialize, Serialize};

use crate::kinds::Skew;

/// Where the records of patched processes are kept (the network faults'
/// ledger folder).
pub const LEDGER_DIR: &str = crate::net::LEDGER_DIR;

/// The names the vDSO exports `clock_gettime` under, preferred first.
const SYMBOLS: [&str; 2] = ["__vdso_clock_gettime", "clock_gettime"];

/// How often the patch is tried while a thread is inside the vDSO.
const TRIES: usize = 200;

/// Why a clock could not be shifted or restored.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The process is gone (or was replaced) since it was observed.
    #[error("process {0} is gone")]
    Gone(i32),
    /// The process has no `[vdso]` mapping.
    #[error("process {0} has no vDSO mapping")]
    NoVdso(i32),
    /// Its vDSO could not be read.
    #[error("the vDSO of process {0}: {1}")]
    Elf(i32, elf::Error),
    /// The function is too small for the patch.
    #[error("the vDSO clock_gettime of process {pid} is {size} bytes, the patch needs {need}")]
    TooSmall {
        /// The process.
        pid: i32,
        /// The function's size.
        size: u64,
        /// The patch's size.
        need: usize,
    },
    /// Its clock is already shifted (by another monkey?).
    #[error(
        "the clock of process {0} is already shifted (its vDSO clock_gettime is patched); \
         run `chaos-monkey --cleanup` if a killed monkey left it"
    )]
    AlreadySkewed(i32),
    /// At heal, the bytes found are not the patch written.
    #[error("the vDSO clock_gettime of process {0} is not the patch the monkey wrote; left alone")]
    NotOurs(i32),
    /// A thread was always inside the vDSO.
    #[error("a thread of process {0} was inside the vDSO at each of {TRIES} tries")]
    Busy(i32),
    /// ptrace or /proc failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: io::Error,
    },
    /// Not possible on this machine.
    #[error("{0}")]
    Unsupported(String),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// A shifted clock: everything needed to restore it, also from another
/// process (`--cleanup`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Skewed {
    /// The monkey that shifted it.
    pub owner: ProcessId,
    /// The victim.
    pub process: ProcessId,
    /// `cluster/member`, for logs.
    pub member: String,
    /// The address of its vDSO `clock_gettime`.
    pub address: u64,
    /// The bytes the patch replaced.
    pub original: Vec<u8>,
    /// The patch.
    pub patch: Vec<u8>,
    /// The shift, in nanoseconds.
    pub skew_nanos: i64,
}

impl Skewed {
    fn ledger(&self) -> PathBuf {
        PathBuf::from(LEDGER_DIR).join(format!(
            "clock-{}-{}-{}.json",
            self.owner.pid, self.process.pid, self.process.start_time
        ))
    }
}

/// The start and end of the `[vdso]` line of a `/proc/PID/maps` text.
pub fn vdso_range(maps: &str) -> Option<(u64, u64)> {
    let line = maps.lines().find(|l| l.trim_end().ends_with("[vdso]"))?;
    let (a, b) = line.split_whitespace().next()?.split_once('-')?;
    let (a, b) = (
        u64::from_str_radix(a, 16).ok()?,
        u64::from_str_radix(b, 16).ok()?,
    );
    (a < b && b - a <= 1 << 20).then_some((a, b))
}

fn mem(pid: i32, write: bool) -> Result<std::fs::File, Error> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(write)
        .open(format!("/proc/{pid}/mem"))
        .map_err(io_err(format!("cannot open /proc/{pid}/mem")))
}

/// The vDSO's range and `clock_gettime` in process `pid`.
fn locate(pid: i32) -> Result<((u64, u64), elf::Symbol), Error> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            Error::Gone(pid)
        } else {
            io_err(format!("cannot read /proc/{pid}/maps"))(e)
        }
    })?;
    let (start, end) = vdso_range(&maps).ok_or(Error::NoVdso(pid))?;
    let mut img = vec![0; usize::try_from(end - start).unwrap_or(0)];
    mem(pid, false)?
        .read_exact_at(&mut img, start)
        .map_err(io_err(format!("cannot read the vDSO of process {pid}")))?;
    let sym = elf::find(&img, &SYMBOLS).map_err(|e| Error::Elf(pid, e))?;
    Ok(((start, end), sym))
}

/// Replaces `expect` by `with` at `address` in process `p`, with every
/// thread stopped outside `vdso`. Checks `expect` is there first.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn rewrite(
    p: &ProcessId,
    vdso: (u64, u64),
    address: u64,
    expect: &[u8],
    with: &[u8],
) -> Result<(), Error> {
    let pid = p.pid;
    let file = mem(pid, true)?;
    for _ in 0..TRIES {
        if !process::alive(p) {
            return Err(Error::Gone(pid));
        }
        let stopped = match trace::Stopped::all(pid) {
            Ok(s) => s,
            Err(_) if !process::alive(p) => return Err(Error::Gone(pid)),
            Err(e) => return Err(io_err(format!("cannot stop process {pid} (ptrace)"))(e)),
        };
        let ips = stopped.instruction_pointers().map_err(io_err(format!(
            "cannot read the registers of process {pid}"
        )))?;
        if ips.iter().any(|ip| (vdso.0..vdso.1).contains(ip)) {
            drop(stopped);
            std::thread::yield_now();
            continue;
        }
        let mut now = vec![0; expect.len()];
        file.read_exact_at(&mut now, address)
            .map_err(io_err(format!("cannot read the vDSO of process {pid}")))?;
        if now != expect {
            return Err(if now.starts_with(&code::SIGNATURE) {
                Error::AlreadySkewed(pid)
            } else {
                Error::NotOurs(pid)
            });
        }
        file.write_all_at(with, address)
            .map_err(io_err(format!("cannot write the vDSO of process {pid}")))?;
        file.read_exact_at(&mut now, address)
            .map_err(io_err(format!("cannot read the vDSO of process {pid}")))?;
        drop(stopped);
        return if now == with {
            Ok(())
        } else {
            Err(Error::Io {
                what: format!("the vDSO of process {pid} did not take the write"),
                source: io::Error::other("read back differs"),
            })
        };
    }
    Err(Error::Busy(pid))
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn rewrite(_: &ProcessId, _: (u64, u64), _: u64, _: &[u8], _: &[u8]) -> Result<(), Error> {
    Err(Error::Unsupported(
        crate::config::CLOCK_SKEW_ARCH.to_string(),
    ))
}

/// Shifts the wall clock of process `p` by `skew`; blocks (ptrace).
pub fn skew(p: &ProcessId, member: &str, skew: Skew) -> Result<Skewed, Error> {
    let pid = p.pid;
    let (vdso, sym) = locate(pid)?;
    let patch = code::skew_code(skew);
    if sym.size < patch.len() as u64 {
        return Err(Error::TooSmall {
            pid,
            size: sym.size,
            need: patch.len(),
        });
    }
    let address = vdso.0 + sym.offset;
    let mut original = vec![0; patch.len()];
    mem(pid, false)?
        .read_exact_at(&mut original, address)
        .map_err(io_err(format!("cannot read the vDSO of process {pid}")))?;
    if original.starts_with(&code::SIGNATURE) {
        return Err(Error::AlreadySkewed(pid));
    }
    let owner = ProcessId::of(i32::try_from(std::process::id()).unwrap_or(0))
        .ok_or_else(|| Error::Unsupported("cannot read this process's start time".into()))?;
    let s = Skewed {
        owner,
        process: *p,
        member: member.to_string(),
        address,
        original,
        patch,
        skew_nanos: skew.nanos(),
    };
    // The record goes first: a monkey killed right after the write leaves
    // enough behind for --cleanup.
    std::fs::create_dir_all(LEDGER_DIR).map_err(io_err(format!("cannot create {LEDGER_DIR}")))?;
    let text = serde_json::to_string(&s).map_err(|e| Error::Unsupported(e.to_string()))?;
    std::fs::write(s.ledger(), text)
        .map_err(io_err(format!("cannot write {}", s.ledger().display())))?;
    if let Err(e) = rewrite(p, vdso, address, &s.original, &s.patch) {
        let _ = std::fs::remove_file(s.ledger());
        return Err(e);
    }
    Ok(s)
}

/// Writes the original code back. A process that is gone (or replaced: a
/// restarted member has a fresh vDSO) needs nothing.
pub fn restore(s: &Skewed) -> Result<(), Error> {
    let r = match locate(s.process.pid) {
        _ if !process::alive(&s.process) => Ok(()),
        Ok((vdso, sym)) if vdso.0 + sym.offset == s.address => {
            match rewrite(&s.process, vdso, s.address, &s.patch, &s.original) {
                Err(Error::Gone(_)) => Ok(()),
                other => other,
            }
        }
        Ok(_) => Err(Error::NotOurs(s.process.pid)),
        Err(Error::Gone(_)) => Ok(()),
        Err(e) => Err(e),
    };
    if r.is_ok() {
        let _ = std::fs::remove_file(s.ledger());
    }
    r
}

/// The patches recorded by monkeys that are gone.
pub fn leftovers() -> Vec<Skewed> {
    let Ok(dir) = std::fs::read_dir(LEDGER_DIR) else {
        return Vec::new();
    };
    dir.flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("clock-"))
        .filter_map(|e| {
            serde_json::from_str::<Skewed>(&std::fs::read_to_string(e.path()).ok()?).ok()
        })
        .filter(|s| !process::alive(&s.owner))
        .collect()
}

/// Restores the clocks that gone monkeys shifted; a line per clock.
pub fn cleanup() -> Result<Vec<String>, Error> {
    let mut done = Vec::new();
    for s in leftovers() {
        let alive = process::alive(&s.process);
        restore(&s)?;
        done.push(if alive {
            format!(
                "restored the clock of {} (process {}, shifted by {} ns by gone monkey {})",
                s.member, s.process.pid, s.skew_nanos, s.owner.pid
            )
        } else {
            format!(
                "removed the record of {}'s shifted clock (process {} is gone)",
                s.member, s.process.pid
            )
        });
    }
    Ok(done)
}

/// Whether this process may patch other processes: x86_64, and root or
/// CAP_SYS_PTRACE (and Yama does not forbid ptrace outright).
pub fn preflight() -> Result<(), String> {
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        return Err(crate::config::CLOCK_SKEW_ARCH.into());
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    const CAP_SYS_PTRACE: u32 = 19;
    if cap_eff & (1 << CAP_SYS_PTRACE) == 0 {
        return Err(
            "--fault clock-skew patches the member's memory through ptrace: run the \
                    monkey as root (it needs CAP_SYS_PTRACE)"
                .into(),
        );
    }
    if std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").is_ok_and(|s| s.trim() == "3")
    {
        return Err(
            "--fault clock-skew needs ptrace, which kernel.yama.ptrace_scope=3 forbids \
                    (until reboot)"
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vdso_line_is_found() {
        let maps = "7ffd1000-7ffd3000 r--p 00000000 00:00 0    [vvar]\n\
                    7ffd3000-7ffd5000 r-xp 00000000 00:00 0    [vdso]\n";
        assert_eq!(vdso_range(maps), Some((0x7ffd3000, 0x7ffd5000)));
        assert_eq!(vdso_range("00-10 r-xp 0 00:00 0 [stack]\n"), None);
        assert_eq!(vdso_range("zz-10 r-xp 0 00:00 0 [vdso]\n"), None);
        assert_eq!(vdso_range("20-10 r-xp 0 00:00 0 [vdso]\n"), None);
    }
}
