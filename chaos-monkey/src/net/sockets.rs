//! The TCP connections a process has open, read from `/proc/PID/fd` (its
//! socket inodes) and `/proc/PID/net/tcp` (the connections of its network
//! namespace): a partition must also cut the connections the members
//! opened before it began, which no cgroup rule can match (a socket keeps
//! the cgroup it was created in).

use std::collections::HashSet;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4};

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

/// The sockets in state LISTEN on the port of an address, by where they
/// listen (inodes, from the kernel's tables).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listening {
    /// Listening on exactly that address (also as `::ffff:A.B.C.D`).
    pub exact: Vec<u64>,
    /// Listening on every address of the machine (`0.0.0.0:PORT` or
    /// `[::]:PORT`, as written here): they answer at that address too
    /// when no exact listener does, whatever they are.
    pub wildcard: Vec<(String, u64)>,
}

/// The sockets listening at `addr`, from the text of `/proc/net/tcp` and
/// `/proc/net/tcp6`.
pub fn listening(tcp: &str, tcp6: &str, addr: SocketAddrV4) -> Listening {
    let mut out = Listening::default();
    for (conn, state, inode) in parse_tcp(tcp) {
        if state != LISTEN || conn.local.port() != addr.port() {
            continue;
        }
        if conn.local.ip() == addr.ip() {
            out.exact.push(inode);
        } else if conn.local.ip().is_unspecified() {
            out.wildcard
                .push((format!("0.0.0.0:{}", addr.port()), inode));
        }
    }
    for (ip, port, state, inode) in parse_tcp6(tcp6) {
        if state != LISTEN || port != addr.port() {
            continue;
        }
        if ip.to_ipv4_mapped().as_ref() == Some(addr.ip()) {
            out.exact.push(inode);
        } else if ip.is_unspecified() {
            out.wildcard.push((format!("[::]:{port}"), inode));
        }
    }
    out
}

/// The sockets listening at `addr` on this machine (its network
/// namespace).
pub fn listening_now(addr: SocketAddrV4) -> io::Result<Listening> {
    let read = |f: &str| match std::fs::read_to_string(f) {
        Ok(t) => Ok(t),
        // No IPv6 on this machine: no table.
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(e),
    };
    Ok(listening(
        &read("/proc/net/tcp")?,
        &read("/proc/net/tcp6")?,
        addr,
    ))
}

/// The processes (pids) holding any of the sockets `inodes` open, in
/// ascending order; several when a socket is shared (a server that forks
/// its workers after listening).
pub fn holders(inodes: &[u64]) -> Vec<i32> {
    if inodes.is_empty() {
        return Vec::new();
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<i32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| socket_inodes(pid).is_ok_and(|i| inodes.iter().any(|n| i.contains(n))))
        .collect();
    pids.sort_unstable();
    pids
}

/// The rows of a `/proc/net/tcp6` table: local address and port, state
/// (hex), inode. Rows that do not parse are skipped.
fn parse_tcp6(table: &str) -> Vec<(Ipv6Addr, u16, String, u64)> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (addr, port) = f.get(1)?.split_once(':')?;
            if addr.len() != 32 {
                return None;
            }
            // Four 32-bit words, each printed as a host integer.
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_mut(4).enumerate() {
                let word = u32::from_str_radix(addr.get(i * 8..i * 8 + 8)?, 16).ok()?;
                chunk.copy_from_slice(&word.to_ne_bytes());
            }
            let port = u16::from_str_radix(port, 16).ok()?;
            let state = (*f.get(3)?).to_string();
            let inode = f.get(9)?.parse().ok()?;
            Some((Ipv6Addr::from(bytes), port, state, inode))
        })
        .collect()
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
        let found = listening_now(addr).expect("the tables");
        assert_eq!(found.wildcard, Vec::new());
        assert_eq!(holders(&found.exact), vec![me]);
        let elsewhere = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 2), addr.port());
        assert_eq!(
            listening_now(elsewhere).expect("tables"),
            Listening::default()
        );
        drop(l);
        assert_eq!(
            listening_now(addr).expect("tables"),
            Listening::default(),
            "nothing listens any more"
        );
    }

    /// Written as the kernel writes them on a little-endian machine.
    #[test]
    fn exact_and_wildcard_listeners_are_told_apart() {
        if !cfg!(target_endian = "little") {
            return;
        }
        let head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
        let row = |local: &str, st: &str, inode: u64| {
            format!(
                "   0: {local} 00000000:0000 {st} 00000000:00000000 00:00000000 00000000     0        0 {inode} 1 0\n"
            )
        };
        // 127.0.0.1:9000 (0x2328) exact, 0.0.0.0:9000, 127.0.0.2:9000,
        // 127.0.0.1:9001, and a connection (not LISTEN) from 9000.
        let tcp = [
            row("0100007F:2328", "0A", 1),
            row("00000000:2328", "0A", 2),
            row("0200007F:2328", "0A", 3),
            row("0100007F:2329", "0A", 4),
            row("0100007F:2328", "01", 5),
        ]
        .concat();
        let tcp6 = [
            row("00000000000000000000000000000000:2328", "0A", 6),
            row("0000000000000000FFFF00000100007F:2328", "0A", 7),
            row("00000000000000000000000001000000:2328", "0A", 8),
        ]
        .concat();
        let addr: SocketAddrV4 = "127.0.0.1:9000".parse().expect("addr");
        let found = listening(&format!("{head}{tcp}"), &format!("{head}{tcp6}"), addr);
        assert_eq!(found.exact, vec![1, 7]);
        assert_eq!(
            found.wildcard,
            vec![
                ("0.0.0.0:9000".to_string(), 2),
                ("[::]:9000".to_string(), 6)
            ]
        );
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
