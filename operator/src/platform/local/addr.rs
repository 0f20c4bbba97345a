//! Loopback addresses for members: each member gets its own 127.x.y.z with
//! etcd's standard ports (2379 for clients, 2380 for peers), so a cluster
//! looks like it would on real hosts and several operators (or test runs)
//! on one machine do not collide.

use std::collections::HashSet;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};

use crate::member::{CLIENT_PORT, PEER_PORT};

/// Picks a free loopback address for `seed` (stable for the same seed while
/// the address is free), skipping `taken` and 127.0.0.0/16.
pub fn allocate(seed: &str, taken: &HashSet<Ipv4Addr>) -> io::Result<Ipv4Addr> {
    for attempt in 0..4096u32 {
        let ip = candidate(seed, attempt);
        if !taken.contains(&ip) && free(ip, CLIENT_PORT) && free(ip, PEER_PORT) {
            return Ok(ip);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!(
            "no loopback address has ports {CLIENT_PORT} and {PEER_PORT} free; \
             is a program listening on 0.0.0.0:{CLIENT_PORT}?"
        ),
    ))
}

fn candidate(seed: &str, attempt: u32) -> Ipv4Addr {
    // FNV-1a: stable across runs and Rust versions.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.bytes().chain(attempt.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let [a, b, c, ..] = h.to_le_bytes();
    Ipv4Addr::new(127, 1 + a % 254, b, 1 + c % 254)
}

fn free(ip: Ipv4Addr, port: u16) -> bool {
    TcpListener::bind(SocketAddrV4::new(ip, port)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_loopback_and_avoids_taken() {
        let a = allocate("state/demo/demo-0", &HashSet::new()).expect("free address");
        assert!(a.is_loopback() && a.octets()[1] != 0, "{a}");
        let b = allocate("state/demo/demo-0", &HashSet::new()).expect("free address");
        assert_eq!(a, b);
        let c = allocate("state/demo/demo-0", &HashSet::from([a])).expect("free address");
        assert_ne!(a, c);
    }

    #[test]
    fn skips_an_address_in_use() {
        let a = allocate("in-use", &HashSet::new()).expect("free address");
        let _held = TcpListener::bind(SocketAddrV4::new(a, CLIENT_PORT)).expect("bind");
        let b = allocate("in-use", &HashSet::new()).expect("free address");
        assert_ne!(a, b);
    }
}
