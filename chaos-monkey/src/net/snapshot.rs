//! When a follower cut off by `blackhole-until-snapshot` can be let back:
//! once the leader has compacted its raft log past the follower's last
//! entry, so that etcd must send it a whole snapshot (the failure etcd's
//! robustness tests inject).
//!
//! etcd keeps `SnapshotCatchUpEntries` (5000 in 3.4 and 3.5) entries behind
//! each snapshot it saves, and saves one every `--snapshot-count` entries
//! (default 100000). So the log is compacted past index `V` once the leader
//! saves a snapshot at an index above `V + 5000`: the watch arms when the
//! leader's raft index passes that, and fires when the leader's count of
//! saved snapshots (`etcd_debugging_snap_save_total_duration_seconds_count`
//! on its /metrics) grows after that.

use std::time::Duration;

use etcd_operator::etcd::Clients;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Entries etcd keeps behind a snapshot for slow followers.
pub const CATCH_UP_ENTRIES: u64 = 5000;
const SNAP_SAVES: &str = "etcd_debugging_snap_save_total_duration_seconds_count";
const METRICS_TIMEOUT: Duration = Duration::from_secs(2);

/// The value of metric `name` (no labels) at `client_url`/metrics.
pub async fn metric(client_url: &str, name: &str) -> Option<f64> {
    parse_metric(&metrics(client_url).await?, name)
}

/// The text of `client_url`/metrics.
async fn metrics(client_url: &str) -> Option<String> {
    let hostport = client_url.strip_prefix("http://")?.trim_end_matches('/');
    let fetch = async {
        let mut s = tokio::net::TcpStream::connect(hostport).await.ok()?;
        let req = format!("GET /metrics HTTP/1.0\r\nHost: {hostport}\r\n\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut body = String::new();
        s.read_to_string(&mut body).await.ok()?;
        Some(body)
    };
    tokio::time::timeout(METRICS_TIMEOUT, fetch).await.ok()?
}

/// The sum of metric `name` over all its labels at `client_url`/metrics.
pub async fn metric_labelled(client_url: &str, name: &str) -> Option<f64> {
    let body = metrics(client_url).await?;
    let values: Vec<f64> = body
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// The value of an unlabelled metric in Prometheus text.
pub fn parse_metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?;
        let value = rest.strip_prefix(' ')?;
        value.trim().parse().ok()
    })
}

/// A member the watch may ask.
#[derive(Clone, Debug)]
pub struct Peer {
    /// Its name.
    pub name: String,
    /// Its client URL.
    pub client_url: String,
}

/// Waits for the leader to compact past the victim.
#[derive(Debug)]
pub struct Watch {
    /// The victim's last raft index when it was cut off.
    pub victim_index: u64,
    /// The members still connected (one of them leads).
    pub peers: Vec<Peer>,
    /// Armed: (leader id, its snapshot count then, its index then).
    armed: Option<(u64, f64, u64)>,
}

impl Watch {
    /// A watch for a victim cut off at `victim_index`.
    pub fn new(victim_index: u64, peers: Vec<Peer>) -> Self {
        Watch {
            victim_index,
            peers,
            armed: None,
        }
    }

    /// One look: `Some(why)` once the leader compacted past the victim.
    pub async fn poll(&mut self, clients: &Clients) -> Option<String> {
        let mut leader = None;
        for p in &self.peers {
            if let Ok(s) = clients.status(&p.client_url).await
                && s.leader != 0
                && s.leader == s.id
            {
                leader = Some((p.clone(), s.id, s.raft_index));
                break;
            }
        }
        let (peer, id, index) = leader?;
        let saves = metric(&peer.client_url, SNAP_SAVES).await?;
        let needed = self.victim_index + CATCH_UP_ENTRIES;
        match self.armed {
            Some((armed_id, armed_saves, armed_index)) if armed_id == id => {
                (saves > armed_saves).then(|| {
                    format!(
                        "leader {} saved a snapshot past index {armed_index} (the victim stopped at {}): \
                         its log is compacted past the victim, etcd must send it a snapshot",
                        peer.name, self.victim_index
                    )
                })
            }
            _ => {
                self.armed = (index > needed).then_some((id, saves, index));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_text() {
        let text = "# HELP x\n\
            etcd_debugging_snap_save_total_duration_seconds_bucket{le=\"0.001\"} 0\n\
            etcd_debugging_snap_save_total_duration_seconds_count 3\n\
            etcd_debugging_snap_save_total_duration_seconds_count_other 9\n";
        assert_eq!(parse_metric(text, SNAP_SAVES), Some(3.0));
        assert_eq!(parse_metric(text, "nope"), None);
    }
}
