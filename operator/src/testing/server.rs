//! A server process a test starts on a free port of 127.0.0.1: waited for
//! (bounded) until it is ready, killed when dropped (also when a test
//! panics).

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running server process.
#[derive(Debug)]
pub struct Served {
    child: Option<Child>,
    addr: SocketAddr,
}

impl Served {
    /// Picks a free port of 127.0.0.1, starts `command(port)` (standard
    /// input, output and error closed) and waits (bounded by
    /// [`super::WAIT`]) until `ready(address)`; `what` names the server in
    /// a panic.
    pub fn start(
        what: &str,
        command: impl FnOnce(u16) -> Command,
        ready: impl Fn(SocketAddr) -> bool,
    ) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let child = command(port)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {what}: {e}"));
        let server = Served {
            child: Some(child),
            addr,
        };
        let deadline = Instant::now() + super::WAIT;
        while !ready(addr) {
            assert!(Instant::now() < deadline, "{what} did not answer on {addr}");
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops it answering (SIGSTOP: its connections stay open, nothing is
    /// answered, as a hung store or a network that drops packets) until
    /// [`Self::resume`], or until it is dropped.
    pub fn pause(&self) {
        self.signal(rustix::process::Signal::STOP);
    }

    /// Lets a paused server answer again (SIGCONT).
    pub fn resume(&self) {
        self.signal(rustix::process::Signal::CONT);
    }

    fn signal(&self, sig: rustix::process::Signal) {
        let pid = self
            .child
            .as_ref()
            .and_then(|c| i32::try_from(c.id()).ok())
            .and_then(rustix::process::Pid::from_raw);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, sig);
        }
    }

    /// Kills it (a no-op when it is stopped already).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop();
    }
}
