//! A hand-driven floor cluster: members run directly with the etcd binary
//! (no operator), each told the whole initial cluster.

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::path::Path;

use crate::support::{Hand, hand};

/// `n` members in `dir`, the `m`th at an address seeded by `{seed}-{m}`
/// and named `{name}{m}`, each told the whole initial cluster; not
/// started.
pub fn members(
    dir: &Path,
    n: usize,
    seed: &str,
    name: &str,
    taken: &mut HashSet<Ipv4Addr>,
) -> Vec<Hand> {
    let mut hands: Vec<Hand> = (0..n)
        .map(|m| hand(dir, &format!("{seed}-{m}"), &format!("{name}{m}"), taken))
        .collect();
    tell_initial_cluster(&mut hands);
    hands
}

/// Tells each of `hands` the whole initial cluster (`name=peerURL` of every
/// one).
pub fn tell_initial_cluster(hands: &mut [Hand]) {
    let ic: Vec<String> = hands
        .iter()
        .map(|h| format!("{}={}", h.record.addr.name, h.record.addr.peer_url))
        .collect();
    for h in hands {
        h.record.initial_cluster = ic.join(",");
    }
}

/// The client URLs of `hands`.
pub fn client_urls(hands: &[Hand]) -> Vec<String> {
    hands
        .iter()
        .map(|h| h.record.addr.client_url.clone())
        .collect()
}
