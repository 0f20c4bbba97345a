//! How far a member's log goes, read from its plain metrics listener
//! (`--listen-metrics-urls`) when it does not answer on its client port.
//! An etcd member restarted without quorum never serves clients (it
//! waits to publish itself through raft first), but it does serve
//! `/metrics`; a paused (SIGSTOP) member answers neither. So a survivor
//! restarted after a quorum loss can still be compared with the others,
//! and one that is paused or cut off stays silent (see
//! [`crate::plan::lost`]).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::plan::Position;

/// How long one read may take in all.
const TIMEOUT: Duration = Duration::from_secs(1);
/// The most read of an answer (etcd's metrics page is ~100 KiB).
const MAX_ANSWER: u64 = 4 << 20;

/// The gauge of the raft index the member knows committed.
const COMMITTED: &str = "etcd_server_proposals_committed_total";
/// The gauge of its store revision.
const REVISION: &str = "etcd_debugging_mvcc_current_revision";

/// `http://HOST:PORT/metrics` of a member's metrics listener, for a
/// member whose client URL has host `host`.
pub fn url(host: &str, port: u16) -> String {
    format!("http://{host}:{port}/metrics")
}

/// Reads a member's position from `url` (`http://HOST:PORT/metrics`);
/// `None` when it does not answer in time or the page lacks the gauges.
pub async fn position(url: &str) -> Option<Position> {
    let authority = url.strip_prefix("http://")?.split('/').next()?;
    let fetch = async {
        let mut stream = TcpStream::connect(authority).await.ok()?;
        let request =
            format!("GET /metrics HTTP/1.0\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut answer = Vec::new();
        stream
            .take(MAX_ANSWER)
            .read_to_end(&mut answer)
            .await
            .ok()?;
        Some(answer)
    };
    let answer = tokio::time::timeout(TIMEOUT, fetch).await.ok()??;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.")
        .then_some(())
        .filter(|()| head.lines().next().is_some_and(|l| l.contains(" 200")))?;
    parse(body)
}

/// The position in a Prometheus text page: both gauges, as whole
/// non-negative numbers (etcd prints them as integers or in exponent
/// form, `1.234e+06`).
pub fn parse(page: &str) -> Option<Position> {
    let gauge = |name: &str| -> Option<f64> {
        page.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?;
            // The name must end here: `_total` is not `_total_x`.
            let value = rest.strip_prefix(' ')?;
            let v: f64 = value.split_whitespace().next()?.parse().ok()?;
            (v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 9.0e18).then_some(v)
        })
    };
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Some(Position {
        raft_index: gauge(COMMITTED)? as u64,
        revision: gauge(REVISION)? as i64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_both_gauges_in_either_notation() {
        let page = "# HELP etcd_server_proposals_committed_total The total number\n\
                    # TYPE etcd_server_proposals_committed_total gauge\n\
                    etcd_server_proposals_committed_total_x 5\n\
                    etcd_server_proposals_committed_total 1.234567e+06\n\
                    etcd_debugging_mvcc_current_revision 3\n";
        assert_eq!(
            parse(page),
            Some(Position {
                raft_index: 1_234_567,
                revision: 3
            })
        );
        assert_eq!(parse("etcd_debugging_mvcc_current_revision 3\n"), None);
        assert_eq!(
            parse(&page.replace(" 3\n", " -3\n")),
            None,
            "negative revision"
        );
        assert_eq!(parse(&page.replace(" 3\n", " NaN\n")), None);
        assert_eq!(parse(&page.replace(" 3\n", " 2.5\n")), None);
    }

    #[tokio::test]
    async fn nothing_listening_is_silence() {
        // A port on loopback nothing listens on (reserved by binding, then
        // released).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        assert_eq!(position(&url("127.0.0.1", port)).await, None);
        assert_eq!(position("https://127.0.0.1/metrics").await, None);
    }

    proptest! {
        #[test]
        fn any_page_parses_without_panic_and_gauges_are_read_back(
            noise in ".{0,200}",
            index in 0u64..1 << 52,
            revision in 0i64..1 << 52,
        ) {
            let _ = parse(&noise);
            let page = format!(
                "{noise}\n{COMMITTED} {index}\n{REVISION} {revision}\n"
            );
            // Noise may carry its own gauge line first; a clean page reads back.
            let clean = format!("{COMMITTED} {index}\n{REVISION} {revision}\n");
            prop_assert_eq!(parse(&clean), Some(Position { raft_index: index, revision }));
            let _ = parse(&page);
        }
    }
}
