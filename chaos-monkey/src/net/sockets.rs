//! The TCP connections a process has open, read from `/proc/PID/fd` (its
//! socket inodes) and `/proc/PID/net/tcp` (the connections of its network
//! namespace): a partition must also cut the connections the members
//! opened before it began, which no cgroup rule can match (a socket keeps
//! the cgroup it was created in).

use std::collections::HashSet;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};

/// One open TCP connection, as the process sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Conn {
    /// Its own end.
    pub local: SocketAddrV4,
    /// The other end.
    pub remote: SocketAddrV4,
}

/// TCP states worth cutting: ESTABLISHED, SYN_SENT, SYN_RECV.
const LIVE_STATES: [&str; 3] = ["01", "02", "03"];

/// The live IPv4 TCP connections of process `pid` whose other end is one of
/// `remotes`.
pub fn connections_to(pid: i32, remotes: &[Ipv4Addr]) -> io::Result<Vec<Conn>> {
    let inodes = socket_inodes(pid)?;
    let table = match std::fs::read_to_string(format!("/proc/{pid}/net/tcp")) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(parse_tcp(&table)
        .into_iter()
        .filter(|(conn, state, inode)| {
            inodes.contains(inode)
                && LIVE_STATES.contains(&state.as_str())
                && remotes.contains(conn.remote.ip())
        })
        .map(|(conn, _, _)| conn)
        .collect())
}

/// The process listening on TCP `addr` (a socket of the machine's network
/// namespace in state LISTEN), if any: its socket's inode looked up among
/// every process's open files.
pub fn listener(addr: SocketAddrV4) -> Option<i32> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let (_, _, inode) = parse_tcp(&table).into_iter().find(|(conn, state, _)| {
        let ip = *conn.local.ip();
        state == LISTEN
            && conn.local.port() == addr.port()
            && (ip == *addr.ip() || ip.is_unspecified())
    })?;
    let pids = std::fs::read_dir("/proc").ok()?.flatten();
    pids.filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .find(|&pid| socket_inodes(pid).is_ok_and(|i| i.contains(&inode)))
}

/// TCP state LISTEN.
const LISTEN: &str = "0A";

/// Inodes of the sockets `pid` holds open.
fn socket_inodes(pid: i32) -> io::Result<HashSet<u64>> {
    let dir = match std::fs::read_dir(format!("/proc/{pid}/fd")) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(HashSet::new()),
        Err(e) => return Err(e),
    };
    let mut out = HashSet::new();
    for entry in dir.flatten() {
        if let Ok(target) = std::fs::read_link(entry.path())
            && let Some(inode) = target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse().ok())
        {
            out.insert(inode);
        }
    }
    Ok(out)
}

/// The rows of a `/proc/net/tcp` table: connection, state (hex), inode.
/// Rows that do not parse are skipped.
pub fn parse_tcp(table: &str) -> Vec<(Conn, String, u64)> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local = endpoint(f.get(1)?)?;
            let remote = endpoint(f.get(2)?)?;
            let state = (*f.get(3)?).to_string();
            let inode = f.get(9)?.parse().ok()?;
            Some((Conn { local, remote }, state, inode))
        })
        .collect()
}

/// `0100007F:094C` (the address as the kernel stores it, printed as a host
/// integer; the port in host order) -> 127.0.0.1:2380.
fn endpoint(s: &str) -> Option<SocketAddrV4> {
    let (addr, port) = s.split_once(':')?;
    if addr.len() != 8 {
        return None;
    }
    let raw = u32::from_str_radix(addr, 16).ok()?;
    let port = u16::from_str_radix(port, 16).ok()?;
    Some(SocketAddrV4::new(Ipv4Addr::from(raw.to_ne_bytes()), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_listening_on_an_address_is_found() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
        let std::net::SocketAddr::V4(addr) = l.local_addr().expect("its address") else {
            panic!("an IPv4 address");
        };
        let me = i32::try_from(std::process::id()).expect("a pid");
        assert_eq!(listener(addr), Some(me));
        drop(l);
        assert_eq!(listener(addr), None, "nothing listens any more");
    }

    #[test]
    fn rows_of_the_kernel_table() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 01024D7F:094C 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0\n\
   1: 0100007F:B1B8 02024D7F:094C 01 00000000:00000000 00:00000000 00000000     0        0 4243 1 0000000000000000 20 4 30 10 -1\n\
   garbage line\n";
        let rows = parse_tcp(table);
        assert_eq!(rows.len(), 2);
        if cfg!(target_endian = "little") {
            assert_eq!(rows[0].0.local, "127.77.2.1:2380".parse().expect("addr"));
            assert_eq!(rows[1].0.local, "127.0.0.1:45496".parse().expect("addr"));
            assert_eq!(rows[1].0.remote, "127.77.2.2:2380".parse().expect("addr"));
        }
        assert_eq!((rows[0].1.as_str(), rows[0].2), ("0A", 4242));
        assert_eq!((rows[1].1.as_str(), rows[1].2), ("01", 4243));
    }

    #[test]
    fn this_process_has_its_own_connection() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
        let addr = listener.local_addr().expect("addr");
        let _client = std::net::TcpStream::connect(addr).expect("connect");
        let pid = i32::try_from(std::process::id()).expect("pid");
        let conns = connections_to(pid, &[Ipv4Addr::LOCALHOST]).expect("read /proc");
        assert!(
            conns.iter().any(|c| c.remote.port() == addr.port()),
            "{conns:?}"
        );
        assert!(
            connections_to(pid, &[Ipv4Addr::new(127, 9, 9, 9)])
                .expect("read /proc")
                .is_empty()
        );
    }
}
