//! A standby's lag (issue 36), beside `etcdctl make-mirror` on the same
//! load in the same run. One operator runs a 3-member primary with
//! continuous backups (`segmentInterval: 1s`) into an S3 bucket (moto's
//! server, started here) and a 1-member standby of it through that bucket;
//! `make-mirror` copies the primary into a plain 1-member cluster of its own
//! (the floor: a live copy over the network, with none of the standby's
//! guarantees), and a second standby follows the primary's members live
//! (`spec.standby.stream`). `BENCH_STANDBY_WRITERS` (default 3) sequential
//! writers write to the primary for `BENCH_STANDBY_SECS` (default 30),
//! while a probe key is written and looked up on each copy until it is
//! there: its lag is from its acknowledgement to then. When the writers
//! stop, the time each copy takes to reach the primary's last revision says
//! whether it kept up (one source revision is one transaction on a
//! standby: its apply rate is that of sequential transactions). Then the
//! standby is promoted: the time from `promote: true` to the first write it
//! accepts.
//!
//! Prints numbers and ratios; never passes or fails on time. Needs
//! `.venv/bin/moto_server` and etcd 3.5's `etcdctl` (ci/setup).

#![allow(clippy::unwrap_used)]

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use etcd_client::ConnectOptions;
use etcd_operator::etcd::Credentials;
use etcd_operator::testing::acked::Writer;
use etcd_operator::testing::s3::S3Server;
use etcd_operator::testing::{Env, binaries, client_urls, manifest};

const BUCKET: &str = "bench";

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Probes while the load runs: a probe key written to the primary, then
/// looked up on each copy every 10 ms until there (at most `within`); its
/// lag on each copy is from the probe's acknowledgement to then. Probes
/// follow each other for `for_`. Each copy is read as its credentials say
/// (a standby's reader: etcd's auth is on there).
fn probe_lags(
    primary: &[String],
    copies: &[(Vec<String>, Option<Credentials>)],
    for_: Duration,
    within: Duration,
) -> Vec<Vec<Duration>> {
    rt().block_on(async {
        let mut p = etcd_client::Client::connect(primary, None).await.unwrap();
        let mut cs = Vec::new();
        for (urls, auth) in copies {
            let opts = etcd_operator::etcd::reach(ConnectOptions::new(), "", None, auth.as_ref());
            cs.push(
                etcd_client::Client::connect(urls.as_slice(), Some(opts))
                    .await
                    .unwrap(),
            );
        }
        let mut out = vec![Vec::new(); copies.len()];
        let end = Instant::now() + for_;
        let mut i = 0u64;
        while Instant::now() < end {
            let (key, value) = (format!("probe/{i}"), format!("{i}"));
            p.put(key.as_str(), value.as_str(), None).await.unwrap();
            let at = Instant::now();
            // Each copy is looked at in turn every 10 ms until each has it.
            let mut found: Vec<Option<Duration>> = vec![None; cs.len()];
            while found.iter().any(Option::is_none) {
                for (c, f) in cs.iter_mut().zip(found.iter_mut()) {
                    if f.is_some() {
                        continue;
                    }
                    let got = c.get(key.as_str(), None).await.ok();
                    let there = got
                        .as_ref()
                        .and_then(|g| g.kvs().first())
                        .is_some_and(|kv| kv.value() == value.as_bytes());
                    if there || at.elapsed() > within {
                        *f = Some(at.elapsed());
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            for (lags, f) in out.iter_mut().zip(found) {
                lags.extend(f);
            }
            i += 1;
        }
        out
    })
}

/// The revision of the cluster at `urls`.
fn head(urls: &[String]) -> i64 {
    rt().block_on(async {
        let mut c = etcd_client::Client::connect(urls, None).await.unwrap();
        let got = c.get("probe/", None).await.unwrap();
        got.header()
            .map_or(0, etcd_client::ResponseHeader::revision)
    })
}

fn main() {
    etcd_operator::tls::install_crypto_provider();
    let secs: u64 = std::env::var("BENCH_STANDBY_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let s3 = S3Server::start();
    s3.create_bucket(BUCKET);
    for (k, v) in s3.credentials() {
        // SAFETY: set before any thread of this process starts.
        #[allow(unsafe_code)]
        unsafe {
            std::env::set_var(k, v)
        };
    }
    let mut env = Env::new();
    env.operator_env.extend(s3.credentials());
    let store = format!(
        "      objectStore:\n        url: s3://{BUCKET}/b\n        endpoint: {}\n",
        s3.endpoint()
    );
    let mut p = manifest("p", 3, "3.4.23");
    p.push_str("  backup:\n    interval: 1h\n    maxBackups: 2\n");
    p.push_str("    continuous:\n      segmentInterval: 1s\n    location:\n");
    p.push_str(&store);
    let standby = |promote: bool| {
        let mut s = manifest("s", 1, "3.4.23");
        s.push_str("  standby:\n    cluster: p\n    location:\n");
        s.push_str(&store.replace("      ", "        "));
        if promote {
            s.push_str("    promote: true\n");
        }
        s
    };
    env.write_manifest("p.yaml", &p);
    env.write_manifest("m.yaml", &manifest("m", 1, "3.4.23"));
    env.start_operator();
    let primary = env.wait_running("p", 3);
    let mirror = env.wait_running("m", 1);
    env.wait_for("a full backup of the primary", || {
        env.status("p")?.status?.backup?.last_backup
    });
    env.write_manifest("s.yaml", &standby(false));
    let mut l = manifest("l", 1, "3.4.23");
    l.push_str("  standby:\n    cluster: p\n    location:\n");
    l.push_str(&store.replace("      ", "        "));
    l.push_str("    stream:\n      endpoints:\n");
    for u in client_urls(&primary) {
        l.push_str(&format!("        - {u}\n"));
    }
    env.write_manifest("l.yaml", &l);
    let copy = env.wait_running("s", 1);
    let live = env.wait_running("l", 1);
    env.wait_for("the standbys following", || {
        let s = env.status("s")?.status?.standby?;
        let l = env.status("l")?.status?.standby?;
        let read_only = s.read_only == Some(true) && l.read_only == Some(true);
        (s.state == "Following" && l.via.as_deref() == Some("stream") && read_only).then_some(())
    });
    // The floor: make-mirror from the primary into the plain cluster.
    let mut mm = Command::new(binaries().join("3.5.1/etcdctl"))
        .env("ETCDCTL_API", "3")
        .args([
            "make-mirror",
            "--endpoints",
            &client_urls(&primary).join(","),
        ])
        .arg(&client_urls(&mirror)[0])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let writers: usize = std::env::var("BENCH_STANDBY_WRITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let writers: Vec<Writer> = (0..writers.max(1))
        .map(|i| Writer::start(client_urls(&primary), &format!("w{i}/")))
        .collect();
    let lags = probe_lags(
        &client_urls(&primary),
        &[
            (
                client_urls(&copy),
                Some(env.standby_credentials("s", "reader")),
            ),
            (
                client_urls(&live),
                Some(env.standby_credentials("l", "reader")),
            ),
            (client_urls(&mirror), None),
        ],
        Duration::from_secs(secs),
        Duration::from_secs(30),
    );
    let n = writers.len();
    let acked: usize = writers.into_iter().map(|w| w.stop().len()).sum();
    // How long after the load each standby holds the primary's last
    // revision (its members asked, as its reader).
    let last = head(&client_urls(&primary));
    let caught_up = rt().block_on(async {
        let mut cs = Vec::new();
        for (urls, who) in [(client_urls(&copy), "s"), (client_urls(&live), "l")] {
            let auth = env.standby_credentials(who, "reader");
            let opts = etcd_operator::etcd::reach(ConnectOptions::new(), "", None, Some(&auth));
            cs.push(
                etcd_client::Client::connect(urls, Some(opts))
                    .await
                    .unwrap(),
            );
        }
        let t0 = Instant::now();
        let mut caught_up: Vec<Option<Duration>> = vec![None; cs.len()];
        while caught_up.iter().any(Option::is_none) && t0.elapsed() < Duration::from_secs(120) {
            for (c, done) in cs.iter_mut().zip(caught_up.iter_mut()) {
                let at = c.get("probe/", None).await.ok();
                let rev = at.and_then(|g| g.header().map(etcd_client::ResponseHeader::revision));
                if done.is_none() && rev.is_some_and(|r| r >= last) {
                    *done = Some(t0.elapsed());
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        caught_up
    });
    let _ = mm.kill();
    let _ = mm.wait();
    let rate = acked as f64 / secs as f64;
    println!(
        "standby lag beside {n} writers at {rate:.0} writes/s together ({} probes), \
         segmentInterval 1s through S3 (moto):",
        lags[0].len()
    );
    let drained = |d: Option<Duration>| {
        d.map_or("not within 120 s".to_string(), |d| {
            format!("{:.3}s", d.as_secs_f64())
        })
    };
    println!(
        "  after the load, the primary's last revision {last} on the store standby after {}, \
         on the live one after {}",
        drained(caught_up[0]),
        drained(caught_up[1])
    );
    let late = |l: &[Duration]| {
        let (m, p) = support::stats(l);
        let max = l.iter().max().copied().unwrap_or_default();
        format!("median {m:.3}s p99 {p:.3}s max {:.3}s", max.as_secs_f64())
    };
    println!(
        "  the standby through the store:          {}",
        late(&lags[0])
    );
    println!(
        "  the standby following live (stream):    {}",
        late(&lags[1])
    );
    println!(
        "  etcdctl make-mirror (floor, live copy): {}",
        late(&lags[2])
    );
    let (live_p50, live_p99) = support::stats(&lags[1]);
    let (mm_p50, mm_p99) = support::stats(&lags[2]);
    println!(
        "  live standby / make-mirror: p50 {:.2}x, p99 {:.2}x",
        live_p50 / mm_p50.max(1e-9),
        live_p99 / mm_p99.max(1e-9)
    );
    let s = env.status("s").and_then(|c| c.status?.standby).unwrap();
    println!(
        "  the standby at revision {}, the primary's newest in the store {}",
        s.applied_revision, s.source_revision
    );
    // Promote: from the spec change to the first write it accepts.
    let t0 = Instant::now();
    env.write_manifest("s.yaml", &standby(true));
    env.wait_for("the standby promoted", || {
        (env.status("s")?.status?.standby?.state == "Promoted").then_some(())
    });
    let promoted = t0.elapsed();
    let out = env.etcdctl(&client_urls(&copy), &["put", "own", "1"]);
    assert!(out.status.success(), "{out:?}");
    println!(
        "  promote -> promoted in status {:.3}s, first write accepted {:.3}s",
        promoted.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
}
