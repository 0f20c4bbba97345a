//! `soak bench`: the load generator's write throughput and latency on a
//! fresh 3-member local cluster, beside `etcdctl check perf` on the same
//! cluster in the same run, with the same number of clients and value size
//! (check perf: 256-byte keys, 1024-byte values, clients 50/200/500/1000 for
//! loads s/m/l/xl, rate-capped at 150/1000/8000/15000 writes/s, 60 s).
//! Then the same load generator on a second cluster with peer and client
//! TLS (`mode: Auto`, mutual TLS, the client certificate the status names),
//! for the cost of TLS: the ratio TLS / plain (target: at least 0.85).
//! Prints numbers and the ratios, never pass/fail.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::client::Pool;
use crate::load;
use crate::runner::local::Local;
use crate::scenario::{ClusterSpec, Dur};
use etcd_operator::crd::{EtcdClusterSpec, TlsEndpoint, TlsMode, TlsSpec};

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input or a missing program.
    #[error("{0}")]
    Setup(String),
    /// The cluster or etcdctl failed.
    #[error("{0}")]
    Run(String),
}

impl From<crate::runner::Error> for Error {
    fn from(e: crate::runner::Error) -> Self {
        match e {
            crate::runner::Error::Setup(m) => Error::Setup(m),
            other => Error::Run(other.to_string()),
        }
    }
}

/// Flags of `soak bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The `etcdctl check perf` workload (s, m, l, xl); it sets the number of
    /// clients of both sides (50, 200, 500, 1000).
    #[arg(long, default_value = "l", env = "SOAK_BENCH_LOAD")]
    pub load: String,
    /// How long the soak load generator runs (check perf always runs 60s).
    #[arg(long, default_value = "60s", env = "SOAK_BENCH_DURATION")]
    pub duration: Dur,
    /// etcd version of the cluster.
    #[arg(long, default_value = "3.4.23", env = "SOAK_BENCH_VERSION")]
    pub version: String,
    /// Bytes per value of the soak load (check perf writes 1024).
    #[arg(long, default_value_t = 1024, env = "SOAK_BENCH_VALUE_SIZE")]
    pub value_size: u32,
    /// The etcd-operator binary. Default: beside this program.
    #[arg(long, env = "SOAK_OPERATOR_BIN")]
    pub operator_bin: Option<PathBuf>,
    /// Folder of etcd binaries as VERSION/etcd. Default: ./.etcd, else the
    /// workspace's .etcd.
    #[arg(long, env = "SOAK_ETCD_BINARIES")]
    pub etcd_binaries: Option<PathBuf>,
    /// The etcdctl to run check perf with. Default: the 3.4.23 one of the
    /// etcd binaries folder (3.4 has check perf).
    #[arg(long, env = "SOAK_ETCDCTL")]
    pub etcdctl: Option<PathBuf>,
}

/// One side's numbers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Side {
    /// Writes per second.
    pub throughput: f64,
    /// Median latency, ms (not reported by check perf).
    pub p50_ms: Option<f64>,
    /// 99th percentile, ms (not reported by check perf).
    pub p99_ms: Option<f64>,
    /// Slowest request, ms.
    pub slowest_ms: Option<f64>,
    /// Standard deviation, ms.
    pub stddev_ms: Option<f64>,
    /// Failed writes.
    pub errors: u64,
}

fn clients(load: &str) -> Option<(u32, u32)> {
    match load {
        "s" => Some((50, 150)),
        "m" => Some((200, 1000)),
        "l" => Some((500, 8000)),
        "xl" => Some((1000, 15000)),
        _ => None,
    }
}

/// Reads `check perf`'s verdict lines.
pub fn parse_check_perf(out: &str) -> Option<Side> {
    let num = |line: &str, after: &str| -> Option<f64> {
        let rest = &line[line.find(after)? + after.len()..];
        let n: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        n.parse().ok()
    };
    let mut side = Side::default();
    let mut seen = false;
    for line in out.lines() {
        if line.contains("Throughput") {
            side.throughput = num(line, "is").or_else(|| num(line, "low:"))?;
            seen = true;
        } else if line.contains("Slowest request took") {
            side.slowest_ms = num(line, "took")
                .or_else(|| num(line, "long:"))
                .map(|s| s * 1000.0);
        } else if line.contains("Stddev") {
            side.stddev_ms = num(line, "is")
                .or_else(|| num(line, "high:"))
                .map(|s| s * 1000.0);
        } else if line.contains("ERROR(") {
            side.errors += line
                .rsplit("-> ")
                .next()
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(1);
        }
    }
    seen.then_some(side)
}

/// Runs the benchmark; returns the printed report.
pub async fn run(a: Args) -> Result<String, Error> {
    let (n, cap) = clients(&a.load)
        .ok_or_else(|| Error::Setup(format!("--load: must be s, m, l or xl, got {:?}", a.load)))?;
    if a.value_size < 16 {
        return Err(Error::Setup("--value-size: must be at least 16".into()));
    }
    let operator = a
        .operator_bin
        .unwrap_or_else(|| crate::paths::beside("etcd-operator"));
    if !operator.is_file() {
        return Err(Error::Setup(format!(
            "the etcd-operator binary is not at {}: run `cargo build --workspace --release`, or pass --operator-bin",
            operator.display()
        )));
    }
    let bins = a.etcd_binaries.unwrap_or_else(crate::paths::etcd_binaries);
    let etcdctl = a.etcdctl.unwrap_or_else(|| bins.join("3.4.23/etcdctl"));
    if !etcdctl.is_file() {
        return Err(Error::Setup(format!(
            "no etcdctl at {}: run `bash ci/setup`, or pass --etcdctl",
            etcdctl.display()
        )));
    }
    let cluster = |name: &str, tls: Option<TlsSpec>| ClusterSpec {
        name: name.into(),
        spec: EtcdClusterSpec {
            tls,
            ..EtcdClusterSpec::minimal(3, &a.version)
        },
    };
    let logs = tempfile::tempdir().map_err(|e| Error::Run(format!("temporary folder: {e}")))?;
    let (mut local, urls) = start(&cluster("bench", None), &operator, &bins, logs.path()).await?;
    eprintln!(
        "bench: cluster up ({}); etcdctl check perf --load={} (60s)...",
        urls.join(","),
        a.load
    );

    let endpoints = urls.join(",");
    let ctl = etcdctl.clone();
    let load_name = a.load.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(ctl)
            .env("ETCDCTL_API", "3")
            .arg("--endpoints")
            .arg(endpoints)
            .arg("check")
            .arg("perf")
            .arg(format!("--load={load_name}"))
            .arg("--auto-compact")
            .arg("--auto-defrag")
            .stdin(Stdio::null())
            .output()
    })
    .await
    .map_err(|e| Error::Run(e.to_string()))?
    .map_err(|e| Error::Run(format!("cannot run etcdctl: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let ctl_side = parse_check_perf(&text).ok_or_else(|| {
        Error::Run(format!(
            "could not read etcdctl check perf's output:\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        ))
    })?;

    eprintln!(
        "bench: soak load generator, {n} writers, unthrottled, {}...",
        a.duration
    );
    let value_size = usize::try_from(a.value_size).unwrap_or(1024);
    let ours = drive(Arc::new(Pool::new()), urls, n, value_size, a.duration.get()).await;
    tokio::task::block_in_place(|| local.teardown());

    // The same load on a cluster with peer and client TLS.
    let auto = || {
        Some(TlsEndpoint {
            mode: TlsMode::Auto,
            path: None,
            secret_name: None,
        })
    };
    let tls_spec = TlsSpec {
        peer: auto(),
        client: auto(),
        ..TlsSpec::default()
    };
    let tls_logs = tempfile::tempdir().map_err(|e| Error::Run(format!("temporary folder: {e}")))?;
    let (mut tls_local, tls_urls) = start(
        &cluster("benchtls", Some(tls_spec)),
        &operator,
        &bins,
        tls_logs.path(),
    )
    .await?;
    eprintln!(
        "bench: TLS cluster up ({}); soak load generator over mutual TLS, {}...",
        tls_urls.join(","),
        a.duration
    );
    let pool = Arc::new(Pool::new());
    pool.set_tls(tls_local.tls_for());
    let tls = drive(pool, tls_urls, n, value_size, a.duration.get()).await;
    tokio::task::block_in_place(|| tls_local.teardown());
    Ok(render(
        &a.load,
        cap,
        n,
        &a.version,
        a.value_size,
        &ctl_side,
        &ours,
        Some(&tls),
    ))
}

/// Starts the operator with `cluster` and waits (at most 120 s) until it
/// runs with 3 ready members; returns its client URLs.
async fn start(
    cluster: &ClusterSpec,
    operator: &std::path::Path,
    bins: &std::path::Path,
    logs: &std::path::Path,
) -> Result<(Local, Vec<String>), Error> {
    let mut local = Local::prepare(cluster, operator, bins, None, logs)?;
    local.write_manifest(false)?;
    local.start_operator()?;
    let status = local.status_source();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let c = status();
        if let Some(st) = c.as_ref().and_then(|c| c.status.as_ref())
            && st.phase.as_str() == "Running"
            && st.members.iter().filter(|m| m.ready).count() == 3
            && (cluster.spec.tls.is_none() || st.tls.as_ref().is_some_and(|t| t.ca_file.is_some()))
        {
            let urls = st.members.iter().map(|m| m.client_url.clone()).collect();
            return Ok((local, urls));
        }
        if Instant::now() > deadline {
            return Err(Error::Run(format!(
                "the bench cluster {} was not Running within 120s:\n{}",
                cluster.name,
                local.operator_log_tail(20)
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs the load generator (`n` writers, puts only, unthrottled) against
/// `urls` for `duration`; returns its numbers.
async fn drive(
    pool: Arc<Pool>,
    urls: Vec<String>,
    n: u32,
    value_size: usize,
    duration: Duration,
) -> Side {
    let (_eps_tx, eps_rx) = watch::channel(urls);
    let stop = tokio_util::sync::CancellationToken::new();
    let state = load::shared();
    let cfg = load::Config {
        writers: n,
        readers: 0,
        rate: 0,
        keys: 100_000,
        value_size,
        timeout: Duration::from_secs(5),
        seed: 1,
        allow_rollback: false,
        // Puts only, like check perf; nothing recorded.
        txn_share: 0.0,
        history: None,
        clock: crate::ops::Clock::new(),
        sabotage: None,
    };
    let started = Instant::now();
    let task = tokio::spawn(load::run(cfg, pool, eps_rx, state.clone(), stop.clone()));
    tokio::time::sleep(duration).await;
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
    let elapsed = started.elapsed().as_secs_f64();
    let st = load::lock(&state);
    let h = &st.stats.write_us;
    Side {
        throughput: st.stats.writes_ok as f64 / elapsed.max(1e-9),
        p50_ms: Some(h.value_at_quantile(0.5) as f64 / 1000.0),
        p99_ms: Some(h.value_at_quantile(0.99) as f64 / 1000.0),
        slowest_ms: Some(h.max() as f64 / 1000.0),
        stddev_ms: Some(h.stdev() / 1000.0),
        errors: st.stats.writes_failed,
    }
}

/// The printed comparison; `tls` is the load generator on the TLS cluster.
#[allow(clippy::too_many_arguments)] // one printed table, its facts
pub fn render(
    load: &str,
    cap: u32,
    n: u32,
    version: &str,
    value_size: u32,
    ctl: &Side,
    ours: &Side,
    tls: Option<&Side>,
) -> String {
    let f = |v: Option<f64>| v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into());
    let mut o = String::new();
    let _ = writeln!(
        o,
        "bench: 3-member local cluster, etcd {version}, {n} clients, writes only\n"
    );
    let _ = writeln!(
        o,
        "| writer | writes/s | p50 ms | p99 ms | slowest ms | stddev ms | errors |\n|---|---|---|---|---|---|---|"
    );
    let mut rows = vec![
        (
            format!("etcdctl check perf --load={load} (cap {cap}/s, 1024 B values)"),
            ctl,
        ),
        (
            format!("soak load generator (unthrottled, {value_size} B values)"),
            ours,
        ),
    ];
    if let Some(t) = tls {
        rows.push((
            format!(
                "soak load generator, peer and client TLS (unthrottled, {value_size} B values)"
            ),
            t,
        ));
    }
    for (name, s) in rows {
        let _ = writeln!(
            o,
            "| {name} | {:.0} | {} | {} | {} | {} | {} |",
            s.throughput,
            f(s.p50_ms),
            f(s.p99_ms),
            f(s.slowest_ms),
            f(s.stddev_ms),
            s.errors
        );
    }
    let ratio = if ctl.throughput > 0.0 {
        ours.throughput / ctl.throughput
    } else {
        f64::NAN
    };
    let _ = writeln!(
        o,
        "\nthroughput ratio soak/etcdctl: {ratio:.2}x (target: at least 1.0x)"
    );
    if let Some(t) = tls {
        let ratio = if ours.throughput > 0.0 {
            t.throughput / ours.throughput
        } else {
            f64::NAN
        };
        let _ = writeln!(
            o,
            "throughput ratio TLS/plain: {ratio:.2}x, TLS costs {:.0}% (target: at most 15%, a ratio of at least 0.85x)",
            (1.0 - ratio) * 100.0
        );
    }
    if ctl.throughput >= f64::from(cap) * 0.9 {
        let _ = writeln!(
            o,
            "note: check perf ran at its rate cap ({cap}/s); a larger --load measures the cluster's limit"
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_check_perf_pass_and_fail_output() {
        let pass = " 60 / 60 Boooom! 100.00% 1m0s\nPASS: Throughput is 151 writes/s\n\
                    PASS: Slowest request took 0.034599s\nPASS: Stddev is 0.001730s\nPASS\n";
        let s = parse_check_perf(pass).expect("parsed");
        assert_eq!(s.throughput, 151.0);
        assert!((s.slowest_ms.unwrap_or_default() - 34.599).abs() < 1e-6);
        assert!((s.stddev_ms.unwrap_or_default() - 1.73).abs() < 1e-6);
        let fail = "FAIL: too many errors\nFAIL: ERROR(context deadline exceeded) -> 12\n\
                    FAIL: Throughput too low: 4210 writes/s\nSlowest request took too long: 1.500000s\n\
                    Stddev too high: 0.200000s\nFAIL\n";
        let s = parse_check_perf(fail).expect("parsed");
        assert_eq!(s.throughput, 4210.0);
        assert_eq!(s.errors, 12);
        assert_eq!(s.slowest_ms, Some(1500.0));
        assert_eq!(s.stddev_ms, Some(200.0));
        assert!(parse_check_perf("nothing").is_none());
    }

    #[test]
    fn renders_the_ratio() {
        let ctl = Side {
            throughput: 1000.0,
            ..Side::default()
        };
        let ours = Side {
            throughput: 1500.0,
            p50_ms: Some(2.0),
            ..Side::default()
        };
        let t = render("m", 1000, 200, "3.4.23", 1024, &ctl, &ours, None);
        assert!(t.contains("ratio soak/etcdctl: 1.50x"), "{t}");
        assert!(t.contains("rate cap"), "{t}");
        assert!(!t.contains("TLS"), "{t}");
        let tls = Side {
            throughput: 1200.0,
            ..Side::default()
        };
        let t = render("m", 1000, 200, "3.4.23", 1024, &ctl, &ours, Some(&tls));
        assert!(t.contains("ratio TLS/plain: 0.80x, TLS costs 20%"), "{t}");
    }
}
