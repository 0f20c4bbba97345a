//! A TCP proxy between a client and a server on loopback that can drop
//! everything on the floor, as a network partition or a hung proxy does:
//! while [`Blackhole::drop_all`] is on, connections are accepted and what
//! either side sends is read and discarded, so requests hang until their
//! client gives up and nothing reaches the server (unlike a paused server,
//! which still handles what it was sent once it runs again). [`heal`]
//! closes the connections that lost data and forwards new ones again.
//! Threads only; everything stops when it is dropped.
//!
//! [`heal`]: Blackhole::heal

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a blocked thread looks at the switches.
const POLL: Duration = Duration::from_millis(50);

#[derive(Debug, Default)]
struct Switches {
    dropping: AtomicBool,
    /// Bumped by [`Blackhole::heal`]: connections of an older one close.
    generation: AtomicU64,
    stop: AtomicBool,
}

/// A running proxy.
#[derive(Debug)]
pub struct Blackhole {
    addr: SocketAddr,
    switches: Arc<Switches>,
    accept: Option<JoinHandle<()>>,
}

impl Blackhole {
    /// Forwards a free port of 127.0.0.1 to `upstream`.
    pub fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("address");
        let switches = Arc::new(Switches::default());
        let s = Arc::clone(&switches);
        let accept = std::thread::spawn(move || {
            while !s.stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => connect(client, upstream, &s),
                    Err(_) => std::thread::sleep(POLL),
                }
            }
        });
        Blackhole {
            addr,
            switches,
            accept: Some(accept),
        }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// From now on everything sent either way is discarded.
    pub fn drop_all(&self) {
        self.switches.dropping.store(true, Ordering::SeqCst);
    }

    /// Forwards again; connections that lost data are closed.
    pub fn heal(&self) {
        self.switches.generation.fetch_add(1, Ordering::SeqCst);
        self.switches.dropping.store(false, Ordering::SeqCst);
    }
}

impl Drop for Blackhole {
    fn drop(&mut self) {
        self.switches.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Pumps `client` to and from a new connection to `upstream`.
fn connect(client: TcpStream, upstream: SocketAddr, s: &Arc<Switches>) {
    let born = s.generation.load(Ordering::SeqCst);
    let server = if s.dropping.load(Ordering::SeqCst) {
        None
    } else {
        TcpStream::connect_timeout(&upstream, Duration::from_secs(2)).ok()
    };
    let pair = server.and_then(|server| Some((client.try_clone().ok()?, server)));
    let Some((client2, server)) = pair else {
        // Nothing to forward to: swallow what the client sends until healed.
        let s = Arc::clone(s);
        std::thread::spawn(move || pump(client, None, born, &s));
        return;
    };
    let Ok(server2) = server.try_clone() else {
        return;
    };
    let (a, b) = (Arc::clone(s), Arc::clone(s));
    std::thread::spawn(move || pump(client, Some(server), born, &a));
    std::thread::spawn(move || pump(server2, Some(client2), born, &b));
}

/// Copies `from` to `to` while forwarding; discards while dropping; ends
/// (closing both) when either side closes, the generation moves on or the
/// proxy stops.
fn pump(mut from: TcpStream, mut to: Option<TcpStream>, born: u64, s: &Switches) {
    let _ = from.set_read_timeout(Some(POLL));
    let mut buf = vec![0u8; 64 << 10];
    loop {
        if s.stop.load(Ordering::SeqCst) || s.generation.load(Ordering::SeqCst) != born {
            break;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(_) => break,
        };
        if s.dropping.load(Ordering::SeqCst) {
            continue;
        }
        let Some(out) = to.as_mut() else { continue };
        if out.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    if let Some(out) = to {
        let _ = out.shutdown(Shutdown::Both);
    }
}
