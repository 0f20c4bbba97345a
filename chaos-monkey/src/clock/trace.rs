//! Stops every thread of a process with ptrace (`PTRACE_SEIZE` +
//! `PTRACE_INTERRUPT`), so its code can be rewritten while no thread runs
//! it, and lets them go again. The only unsafe code of the crate: libc's
//! `ptrace` and `waitpid`, on thread ids read from `/proc/PID/task`.
#![allow(unsafe_code)]

use std::io;
use std::time::{Duration, Instant};

/// How long a thread may take to stop (one stuck in the kernel, in a
/// throttled fsync say, stops when it comes back).
const STOP_WAIT: Duration = Duration::from_secs(5);

/// The threads of a process, each in a ptrace stop; they run again when
/// this is dropped.
#[derive(Debug)]
pub struct Stopped {
    /// Thread id, and the signal to hand back on detach (a stop at a
    /// signal's delivery swallows it otherwise).
    threads: Vec<(i32, i32)>,
}

fn tasks(pid: i32) -> io::Result<Vec<i32>> {
    let mut out: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    out.sort_unstable();
    Ok(out)
}

fn ptrace(req: libc::c_uint, tid: i32, data: usize) -> io::Result<libc::c_long> {
    // SAFETY: requests that take no pointer (SEIZE, INTERRUPT, DETACH): the
    // address is 0 and the data an integer.
    let r = unsafe { libc::ptrace(req, tid, 0usize, data) };
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Waits for `tid`'s ptrace stop; `Ok(None)` when the thread exited,
/// `Ok(Some(sig))` with the signal to hand back on detach.
fn wait_stop(tid: i32, deadline: Instant) -> io::Result<Option<i32>> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a valid out pointer for the call.
        let r = unsafe { libc::waitpid(tid, &mut status, libc::__WALL | libc::WNOHANG) };
        if r == -1 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ECHILD) | Some(libc::ESRCH) => Ok(None),
                Some(libc::EINTR) => continue,
                _ => Err(e),
            };
        }
        if r == tid {
            if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                return Ok(None);
            }
            if libc::WIFSTOPPED(status) {
                let sig = libc::WSTOPSIG(status);
                let event = status >> 16;
                // An event stop (our interrupt, a group stop) swallows no
                // signal; a signal-delivery stop does unless handed back.
                let hand_back = if event == 0 && sig != libc::SIGTRAP {
                    sig
                } else {
                    0
                };
                return Ok(Some(hand_back));
            }
        }
        if Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("thread {tid} did not stop within {STOP_WAIT:?}"),
            ));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

impl Stopped {
    /// Stops every thread of `pid` (threads started meanwhile too).
    pub fn all(pid: i32) -> io::Result<Stopped> {
        let mut s = Stopped {
            threads: Vec::new(),
        };
        let deadline = Instant::now() + STOP_WAIT;
        // New threads may appear while we attach; list until none is new.
        for _ in 0..20 {
            let fresh: Vec<i32> = tasks(pid)?
                .into_iter()
                .filter(|t| !s.threads.iter().any(|(x, _)| x == t))
                .collect();
            if fresh.is_empty() {
                if s.threads.is_empty() {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("process {pid} has no threads"),
                    ));
                }
                return Ok(s);
            }
            for tid in fresh {
                match ptrace(libc::PTRACE_SEIZE, tid, 0) {
                    Ok(_) => {}
                    // Exited since it was listed.
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => continue,
                    Err(e) => return Err(e),
                }
                if let Err(e) = ptrace(libc::PTRACE_INTERRUPT, tid, 0) {
                    let _ = ptrace(libc::PTRACE_DETACH, tid, 0);
                    if e.raw_os_error() == Some(libc::ESRCH) {
                        continue;
                    }
                    return Err(e);
                }
                match wait_stop(tid, deadline) {
                    Ok(Some(sig)) => s.threads.push((tid, sig)),
                    Ok(None) => {}
                    Err(e) => {
                        let _ = ptrace(libc::PTRACE_DETACH, tid, 0);
                        return Err(e);
                    }
                }
            }
        }
        Err(io::Error::other(format!(
            "process {pid} kept starting threads while they were being stopped"
        )))
    }

    /// The instruction pointer of every stopped thread.
    pub fn instruction_pointers(&self) -> io::Result<Vec<u64>> {
        let mut out = Vec::with_capacity(self.threads.len());
        for &(tid, _) in &self.threads {
            // SAFETY: all-zero bytes are a valid `user_regs_struct` (plain
            // integers).
            let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
            // SAFETY: GETREGS writes one `user_regs_struct` at the pointer.
            let r = unsafe {
                libc::ptrace(
                    libc::PTRACE_GETREGS,
                    tid,
                    0usize,
                    &mut regs as *mut libc::user_regs_struct,
                )
            };
            if r == -1 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::ESRCH) {
                    continue;
                }
                return Err(e);
            }
            out.push(regs.rip);
        }
        Ok(out)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        for &(tid, sig) in &self.threads {
            if let Err(e) = ptrace(libc::PTRACE_DETACH, tid, usize::try_from(sig).unwrap_or(0))
                && e.raw_os_error() != Some(libc::ESRCH)
            {
                tracing::warn!("cannot let thread {tid} go (ptrace detach): {e}");
            }
        }
    }
}
