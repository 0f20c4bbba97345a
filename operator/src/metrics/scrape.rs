//! Reading the operator's endpoints from outside (the soak runner, tests,
//! benchmarks): a plain HTTP/1.1 GET, and a parser of the Prometheus text
//! format as the operator writes it (label values with `\\`, `\"` and
//! `\n` escapes; a line it cannot read is skipped, never a panic).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One sample: a metric name, its labels, its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The series' name (with `_total`, `_bucket`... suffixes).
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

/// GETs `path` from `addr`: the status code and the body.
pub fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Ok((code, if chunked { dechunk(body) } else { body.into() }))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// The samples of a text exposition (comments skipped).
pub fn parse(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (series, value) = match line.rsplit_once(' ') {
            Some(p) => p,
            None => continue,
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => (n, labels(rest.trim_end_matches('}'))),
            None => (series, BTreeMap::new()),
        };
        out.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    out
}

fn labels(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, n)) => value.push(n),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        out.insert(key.trim_start_matches(',').trim().to_string(), value);
        rest = &after[end..];
    }
    out
}

/// The value of the series `name` whose labels include `with`.
pub fn value(samples: &[Sample], name: &str, with: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && with
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::metrics::Metrics;

    #[test]
    fn parses_names_labels_and_values() {
        let text = "# HELP x_total X.\n# TYPE x counter\n\
                    x_total{namespace=\"\",cluster=\"a\\\"b\",outcome=\"acted\"} 3\n\
                    y 1.5\n# EOF\n";
        let s = parse(text);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].labels["cluster"], "a\"b");
        assert_eq!(s[0].labels["namespace"], "");
        assert_eq!(value(&s, "x_total", &[("outcome", "acted")]), Some(3.0));
        assert_eq!(value(&s, "y", &[]), Some(1.5));
        assert_eq!(value(&s, "x_total", &[("outcome", "failed")]), None);
    }

    proptest! {
        /// Whatever a cluster is called, what the operator writes parses
        /// back to the same labels and values; and no input panics.
        #[test]
        fn what_the_operator_writes_parses_back(
            namespace in "\\PC{0,12}",
            cluster in "\\PC{0,12}",
            ready in 0usize..10,
            junk in "\\PC{0,80}",
        ) {
            let m = Arc::new(Metrics::new());
            let c = m.cluster(&namespace, &cluster);
            c.members(ready, 3, 0);
            c.step("move_leader");
            let s = parse(&m.encode());
            let at = |name: &str| value(&s, name, &[("namespace", &namespace), ("cluster", &cluster)]);
            prop_assert_eq!(at("etcd_operator_members_ready"), Some(ready as f64));
            prop_assert_eq!(at("etcd_operator_steps_total"), Some(1.0));
            let _ = parse(&junk);
            let _ = parse(&format!("x{{{junk} 1\n{junk}"));
        }
    }
}
