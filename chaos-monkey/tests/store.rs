//! `--target store` against real processes: moto's S3 server, paused by a
//! monkey that is then killed (SIGKILL), is resumed by `--cleanup`; a
//! process that cannot be told to be the store (a listening socket several
//! processes share, an etcd member's address) is refused at start and
//! nothing is paused.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use chaos_monkey::net::sockets::{holders, listening_now};
use common::{FakeState, Monkey, proc_state, run, wait_for};
use etcd_operator::platform::local::layout::write_json;
use etcd_operator::platform::local::process::ProcessId;
use etcd_operator::testing::s3::{S3Server, moto_server};

/// The process listening on exactly `addr`, once one does.
fn listener(addr: SocketAddrV4) -> i32 {
    wait_for(
        &format!("one process listening on {addr}"),
        || match holders(&listening_now(addr).ok()?.exact).as_slice() {
            [pid] => Some(*pid),
            _ => None,
        },
    )
}

/// Whether an HTTP server answers at `addr` (within 2 s).
fn answers(addr: SocketAddrV4) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr.into(), Duration::from_secs(2)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut head = [0u8; 12];
    write!(s, "GET / HTTP/1.0\r\nHost: {addr}\r\n\r\n").is_ok()
        && s.read_exact(&mut head).is_ok()
        && head.starts_with(b"HTTP/")
}

fn store_args<'a>(state: &'a str, addr: &'a str) -> Vec<&'a str> {
    vec![
        "--state-dir",
        state,
        "--target",
        "store",
        "--store-addr",
        addr,
        "--fault",
        "pause",
        "--pause-for",
        "10m",
        "--kill-interval",
        "100ms",
    ]
}

#[test]
fn a_store_a_killed_monkey_paused_is_resumed_by_cleanup() {
    let s = FakeState::new();
    let store = S3Server::start();
    let addr: SocketAddrV4 = store
        .endpoint()
        .trim_start_matches("http://")
        .parse()
        .expect("the store's address");
    let pid = listener(addr);
    let addr_arg = addr.to_string();
    let monkey = Monkey::start(&store_args(s.state_arg(), &addr_arg));
    wait_for("the store paused", || {
        (proc_state(pid) == Some('T')).then_some(())
    });
    let stderr = monkey.stderr();
    // SIGKILL: the monkey cannot resume the store itself.
    drop(monkey);
    assert_eq!(proc_state(pid), Some('T'), "left paused; {stderr}");
    assert!(!answers(addr), "a paused store does not answer");
    let done = run(&["--cleanup", "--state-dir", s.state_arg()]);
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    assert!(
        done.stderr.contains(&format!(
            "resumed the object store store@{addr} (pid {pid})"
        )),
        "{}",
        done.stderr
    );
    wait_for("the store answering again", || answers(addr).then_some(()));
    let again = run(&["--cleanup", "--state-dir", s.state_arg()]);
    assert!(
        again.stderr.contains("nothing left behind"),
        "{}",
        again.stderr
    );
}

/// A python listening on a free port of 127.0.0.1 (printed first to its
/// log), forked once after `listen` when `fork`: both processes then hold
/// the socket. Tracked by `s` (the parent) and killed with its process
/// group on drop (the child).
struct Listener {
    group: i32,
    addr: SocketAddrV4,
}

impl Listener {
    fn start(s: &mut FakeState, fork: bool) -> Listener {
        const SCRIPT: &str = "import os, socket, sys, time\n\
            s = socket.socket()\n\
            s.bind(('127.0.0.1', 0))\n\
            s.listen()\n\
            print(s.getsockname()[1], flush=True)\n\
            if sys.argv[1] == 'fork':\n    os.fork()\n\
            time.sleep(300)\n";
        let python = moto_server().with_file_name("python");
        let log: PathBuf = s.dir.path().join(format!("listener-{fork}.log"));
        let how = if fork { "fork" } else { "alone" };
        let id = s.spawn_logged(&python, &["-c", SCRIPT, how], &log);
        let port: u16 = wait_for("the listener's port", || {
            std::fs::read_to_string(&log)
                .ok()?
                .lines()
                .next()?
                .trim()
                .parse()
                .ok()
        });
        let l = Listener {
            group: id.pid,
            addr: SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, port),
        };
        let want = if fork { 2 } else { 1 };
        wait_for("the listener's processes", || {
            let found = listening_now(l.addr).ok()?;
            (holders(&found.exact).len() == want).then_some(())
        });
        l
    }

    fn pids(&self) -> Vec<i32> {
        holders(&listening_now(self.addr).expect("tables").exact)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.group) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

#[test]
fn a_listening_socket_several_processes_share_is_refused() {
    let mut s = FakeState::new();
    let shared = Listener::start(&mut s, true);
    let addr = shared.addr.to_string();
    let done = run(&store_args(s.state_arg(), &addr));
    done.assert_exit(2, "2 processes hold its listening socket");
    assert!(
        done.stderr.contains(&format!("--store-addr {addr}")),
        "{}",
        done.stderr
    );
    for pid in shared.pids() {
        assert_ne!(proc_state(pid), Some('T'), "nothing is paused");
    }
}

#[test]
fn an_etcd_members_address_is_refused() {
    let mut s = FakeState::new();
    let long_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    s.add_member("demo", "demo-0", false, long_ago);
    let member = Listener::start(&mut s, false);
    let [pid] = member.pids()[..] else {
        panic!("one listener");
    };
    // The listener is the member's process, as the operator records it.
    let layout = s.layout();
    let mut record = layout
        .read_member("demo", "demo-0")
        .expect("read")
        .expect("a record");
    record.process = Some(ProcessId::of(pid).expect("alive"));
    write_json(&layout.member_record("demo", "demo-0"), &record).expect("write");
    let addr = member.addr.to_string();
    let done = run(&store_args(s.state_arg(), &addr));
    done.assert_exit(2, "is etcd member demo/demo-0, not an object store");
    assert_ne!(proc_state(pid), Some('T'), "nothing is paused");
}
