//! What the standby tests share: the primary's and the standby's
//! manifests, the standby's status, and the proof that a standby holds the
//! primary's revision with its `HashKV`. A standby runs with etcd's auth
//! on: it is read as its root (HashKV needs root) or its reader.

use etcd_operator::crd::{EtcdCluster, StandbyStatus};
use etcd_operator::etcd::Credentials;
use etcd_operator::testing::{Env, client_urls, manifest};

use crate::store::rt;

/// The primary: backups (to `location`, a manifest block at 6 spaces, or
/// the default folder) with 1 s delta segments.
pub fn primary(name: &str, location: Option<String>) -> String {
    let mut m = manifest(name, 3, "3.4.23");
    m.push_str("  backup:\n    interval: 1h\n    maxBackups: 2\n");
    m.push_str("    continuous:\n      segmentInterval: 1s\n");
    if let Some(l) = location {
        m.push_str("    location:\n");
        m.push_str(&l);
    }
    m
}

/// A standby of `source` (its backups at `location`, a block at 6 spaces).
pub fn standby(
    name: &str,
    size: u32,
    source: &str,
    location: Option<String>,
    promote: bool,
) -> String {
    live_standby(name, size, source, (location, &[]), promote)
}

/// A standby of `source` following its members at `endpoints` live (none:
/// from the store only).
pub fn live_standby(
    name: &str,
    size: u32,
    source: &str,
    (location, endpoints): (Option<String>, &[String]),
    promote: bool,
) -> String {
    let mut m = manifest(name, size, "3.4.23");
    m.push_str(&format!("  standby:\n    cluster: {source}\n"));
    if !endpoints.is_empty() {
        m.push_str("    stream:\n      endpoints:\n");
        for e in endpoints {
            m.push_str(&format!("        - {e}\n"));
        }
    }
    if let Some(l) = location {
        m.push_str("    location:\n");
        m.push_str(&l);
    }
    if promote {
        m.push_str("    promote: true\n");
    }
    m
}

/// etcdctl's flags to ask as `c`.
fn user(c: &Credentials) -> [String; 2] {
    [
        format!("--user={}", c.user()),
        format!("--password={}", c.password()),
    ]
}

/// etcdctl against `urls` as `who` (none: without credentials).
pub fn etcdctl_as(env: &Env, urls: &[String], who: Option<&Credentials>, args: &[&str]) -> String {
    let flags = who.map(user).unwrap_or_default();
    let mut all: Vec<&str> = flags
        .iter()
        .map(String::as_str)
        .filter(|f| !f.is_empty())
        .collect();
    all.extend_from_slice(args);
    let out = env.etcdctl(urls, &all);
    if out.status.success() {
        format!("ok: {}", String::from_utf8_lossy(&out.stdout))
    } else {
        // etcdctl's last line says why ("Error: etcdserver: ...").
        let err = String::from_utf8_lossy(&out.stderr);
        format!("refused: {}", err.trim().lines().last().unwrap_or_default())
    }
}

/// The standby status of `cluster`.
pub fn standby_status(env: &Env, cluster: &str) -> Option<StandbyStatus> {
    env.status(cluster)?.status?.standby
}

/// Connect options as `auth`.
fn as_user(auth: Option<&Credentials>) -> Option<etcd_client::ConnectOptions> {
    let opts = etcd_client::ConnectOptions::new();
    Some(etcd_operator::etcd::reach(opts, "", None, auth))
}

/// The revision and `HashKV` at `revision` of the member at `url`, asked
/// as `auth`.
pub fn hash_at(url: &str, revision: i64, auth: Option<&Credentials>) -> (i64, u32, i64) {
    rt().block_on(async {
        let mut c = etcd_client::Client::connect([url], as_user(auth))
            .await
            .expect("connect");
        let h = c.hash_kv(revision).await.expect("hash_kv");
        let head = h.header().map_or(0, |h| h.revision());
        (head, h.hash(), h.compact_version())
    })
}

/// The revision the cluster at `urls` is at.
pub fn revision(urls: &[String]) -> i64 {
    revision_as(urls, None)
}

/// The revision the cluster at `urls` is at, asked as `auth`.
pub fn revision_as(urls: &[String], auth: Option<&Credentials>) -> i64 {
    rt().block_on(async {
        let mut c = etcd_client::Client::connect(urls, as_user(auth))
            .await
            .expect("connect");
        let r = c.get("x", None).await.expect("get");
        r.header().map_or(0, |h| h.revision())
    })
}

/// Waits until the standby `name` applied revision `target`, and checks
/// that its revision and `HashKV` at `target` are the primary's.
pub fn assert_same_as_primary(
    env: &Env,
    name: &str,
    primary: &EtcdCluster,
    target: i64,
) -> EtcdCluster {
    let s = env.wait_for(&format!("the standby at revision {target}"), || {
        let s = standby_status(env, name)?;
        (s.applied_revision == target).then_some(s)
    });
    assert_eq!(s.lag_revisions, 0, "{s:?}");
    let c = env.wait_running(name, env.status(name).map_or(1, |c| c.spec.size as usize));
    let here = client_urls(&c);
    let root = env.standby_credentials(name, "root");
    assert_eq!(
        revision_as(&here, Some(&root)),
        target,
        "the standby's revision is the source's"
    );
    let (_, theirs, their_compact) = hash_at(&client_urls(primary)[0], target, None);
    for url in &here {
        let (_, ours, our_compact) = hash_at(url, target, Some(&root));
        assert_eq!(our_compact, their_compact, "no compaction on either side");
        assert_eq!(ours, theirs, "HashKV at {target} of {url} is the primary's");
    }
    println!("MEASURED: standby {name} at revision {target}, HashKV {theirs:#x} as the primary's");
    c
}

/// How many of the writes in `acked` up to revision `up_to` are not in
/// `found` (a later acknowledged write of the same key up to `up_to`
/// stands for an earlier one).
pub fn missing_up_to(
    acked: &[etcd_operator::testing::acked::Acked],
    found: &std::collections::HashMap<String, String>,
    up_to: i64,
) -> usize {
    acked
        .iter()
        .filter(|a| a.revision <= up_to)
        .filter(|a| {
            found.get(&a.key).is_none_or(|v| {
                v != &a.value
                    && !acked
                        .iter()
                        .any(|b| b.key == a.key && b.revision > a.revision && b.revision <= up_to)
            })
        })
        .count()
}
