//! The standby against the primary at the end: once the primary stopped
//! changing (load, chaos and probes stopped), its revision R; wait
//! (bounded) until the standby says it applied R; then `HashKV` at R on a
//! primary member and on every standby member. When the two sides report
//! different compact revisions (their hashes cover different histories),
//! every key is read back at R on both sides and compared instead. The
//! standby's members are asked as its root (etcd's auth is on there).

use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions, GetOptions};
use etcd_operator::etcd::Credentials;

use crate::client::Pool;
use crate::invariants::standby::{Final, MemberCompare, Method};
use crate::probe::StatusSource;

/// Longest one call may take.
const CALL: Duration = Duration::from_secs(5);
/// Least time each standby member gets to answer the comparison.
const MEMBER_FLOOR: Duration = Duration::from_secs(10);
/// Keys per page of a read-back.
const PAGE: i64 = 1000;

/// A key as read back: key, value, create revision, mod revision, version.
type Kv = (Vec<u8>, Vec<u8>, i64, i64, i64);

/// The primary's side of a comparison: a member's URL, its `HashKV` and
/// compact revision (when it answered), and its keys once read back.
type Primary<'a> = (&'a str, Option<(u32, i64)>, &'a mut Option<Vec<Kv>>);

/// How one side is asked: the shared pool (the primary, a standby without
/// auth), or a client of a standby's member as its root.
enum Side<'a> {
    Pool(&'a Pool),
    Root(Box<Client>),
}

impl Side<'_> {
    /// The standby's member at `url`, as `root` when its auth is on.
    async fn standby<'a>(pool: &'a Pool, url: &str, root: Option<&Credentials>) -> Side<'a> {
        let Some(root) = root else {
            return Side::Pool(pool);
        };
        let opts = ConnectOptions::new().with_timeout(CALL);
        let opts = etcd_operator::etcd::reach(opts, url, None, Some(root));
        match tokio::time::timeout(CALL, Client::connect([url], Some(opts))).await {
            Ok(Ok(c)) => Side::Root(Box::new(c)),
            // Auth already off (promoted), or the member down: as before.
            _ => Side::Pool(pool),
        }
    }

    async fn call<T, F, Fut>(&self, url: &str, f: F) -> Result<T, String>
    where
        F: FnOnce(Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
    {
        match self {
            Side::Pool(p) => p.call(url, CALL, f).await.map_err(|e| e.short()),
            Side::Root(c) => match tokio::time::timeout(CALL, f((**c).clone())).await {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(_) => Err(format!("no answer within {CALL:?}")),
            },
        }
    }
}

/// Compares; see the module doc. `within` bounds the wait for R; `root`:
/// the standby's root credentials.
pub(super) async fn run(
    pool: &Pool,
    primary: &[String],
    (status, within, root): (&StatusSource, Duration, Option<Credentials>),
) -> Final {
    let mut f = Final::default();
    let Some((url, revision)) = first_answer(pool, primary).await else {
        f.problem = Some(format!(
            "no primary member answered for its final revision ({})",
            primary.join(",")
        ));
        return f;
    };
    f.revision = revision;
    let start = Instant::now();
    let deadline = start + within;
    loop {
        let st = status().and_then(|c| c.status);
        f.applied = st
            .as_ref()
            .and_then(|s| s.standby.as_ref())
            .map_or(0, |s| s.applied_revision);
        if f.applied >= revision || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    f.waited_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    if f.applied < revision {
        f.problem = Some(format!(
            "the standby applied only revision {} of the primary's {revision} within \
             standby.catchUp ({})",
            f.applied,
            humantime::format_duration(within)
        ));
        return f;
    }
    let ours = match hash(&Side::Pool(pool), &url, revision).await {
        Ok(h) => Some(h),
        Err(e) => {
            tracing::warn!("HashKV at {revision} of primary member {url}: {e}");
            None
        }
    };
    f.primary_hash = ours.map(|(h, _)| h);
    let members: Vec<String> = status()
        .and_then(|c| c.status)
        .map(|st| st.members.into_iter().map(|m| m.client_url).collect())
        .unwrap_or_default();
    let floor = deadline.max(Instant::now() + MEMBER_FLOOR);
    let mut theirs: Option<Vec<Kv>> = None;
    for m in members {
        let mut last;
        loop {
            let here = Side::standby(pool, &m, root.as_ref()).await;
            last = member((pool, &here), (&url, ours, &mut theirs), &m, revision).await;
            if last.equal || Instant::now() >= floor {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        f.members.push(last);
    }
    tracing::info!(
        "standby at the end: revision {revision}, applied {}, {} members equal of {}",
        f.applied,
        f.members.iter().filter(|m| m.equal).count(),
        f.members.len()
    );
    f
}

/// The first primary member to answer, and its revision.
async fn first_answer(pool: &Pool, urls: &[String]) -> Option<(String, i64)> {
    for url in urls {
        let r = pool
            .call(
                url,
                CALL,
                |mut c| async move { c.get("soak/probe", None).await },
            )
            .await;
        match r {
            Ok(r) => {
                if let Some(h) = r.header() {
                    return Some((url.clone(), h.revision()));
                }
            }
            Err(e) => tracing::debug!("final revision via {url}: {}", e.short()),
        }
    }
    None
}

/// `HashKV` at `rev`: the hash and the compact revision it covers from.
async fn hash(side: &Side<'_>, url: &str, rev: i64) -> Result<(u32, i64), String> {
    side.call(url, |mut c| async move { c.hash_kv(rev).await })
        .await
        .map(|h| (h.hash(), h.compact_version()))
}

/// One standby member against the primary: `HashKV` when both sides
/// compacted alike, else every key read back (the primary's read once,
/// kept in `theirs`); the primary asked through `pool`, the standby's
/// member as `here`.
async fn member(
    (pool, here_side): (&Pool, &Side<'_>),
    (primary, ours, theirs): Primary<'_>,
    url: &str,
    rev: i64,
) -> MemberCompare {
    let mut out = MemberCompare {
        url: url.to_string(),
        method: None,
        value: None,
        equal: false,
        detail: String::new(),
    };
    let here = match hash(here_side, url, rev).await {
        Ok(h) => h,
        Err(e) => {
            out.detail = format!("HashKV at {rev}: {e}");
            return out;
        }
    };
    if let Some((h, compact)) = ours
        && compact == here.1
    {
        out.method = Some(Method::HashKv);
        out.value = Some(u64::from(here.0));
        out.equal = here.0 == h;
        out.detail = if out.equal {
            format!("HashKV {h:#x} at {rev}")
        } else {
            format!("HashKV {:#x}, the primary's {h:#x}", here.0)
        };
        return out;
    }
    out.method = Some(Method::ReadBack);
    if theirs.is_none() {
        match read_all(&Side::Pool(pool), primary, rev).await {
            Ok(kvs) => *theirs = Some(kvs),
            Err(e) => {
                out.detail = format!("compact revisions differ and the primary's keys: {e}");
                return out;
            }
        }
    }
    let mine = match read_all(here_side, url, rev).await {
        Ok(kvs) => kvs,
        Err(e) => {
            out.detail = format!("compact revisions differ and its keys: {e}");
            return out;
        }
    };
    let theirs = theirs.as_deref().unwrap_or_default();
    out.value = u64::try_from(mine.len()).ok();
    out.equal = mine == theirs;
    out.detail = match difference(&mine, theirs) {
        None => format!(
            "{} keys equal at {rev} (compact revisions differ)",
            mine.len()
        ),
        Some(d) => d,
    };
    out
}

/// The first difference between two read-backs, in words.
pub(super) fn difference(mine: &[Kv], theirs: &[Kv]) -> Option<String> {
    let show = |k: &[u8]| String::from_utf8_lossy(k).into_owned();
    for (a, b) in mine.iter().zip(theirs) {
        if a != b {
            return Some(if a.0 == b.0 {
                format!(
                    "key {} differs: (create {}, mod {}, version {}, {} bytes) here, (create {}, \
                     mod {}, version {}, {} bytes) on the primary",
                    show(&a.0),
                    a.2,
                    a.3,
                    a.4,
                    a.1.len(),
                    b.2,
                    b.3,
                    b.4,
                    b.1.len()
                )
            } else {
                format!(
                    "key {} here where the primary has {}",
                    show(&a.0),
                    show(&b.0)
                )
            });
        }
    }
    (mine.len() != theirs.len())
        .then(|| format!("{} keys here, {} on the primary", mine.len(), theirs.len()))
}

/// Every key at `rev`, in key order.
async fn read_all(side: &Side<'_>, url: &str, rev: i64) -> Result<Vec<Kv>, String> {
    let mut out = Vec::new();
    let mut from = vec![0u8];
    loop {
        let start = from.clone();
        let r = side
            .call(url, |mut c| async move {
                let opts = GetOptions::new()
                    .with_from_key()
                    .with_revision(rev)
                    .with_limit(PAGE);
                c.get(start, Some(opts)).await
            })
            .await?;
        for kv in r.kvs() {
            out.push((
                kv.key().to_vec(),
                kv.value().to_vec(),
                kv.create_revision(),
                kv.mod_revision(),
                kv.version(),
            ));
        }
        match (r.more(), r.kvs().last()) {
            (true, Some(kv)) => {
                from = kv.key().to_vec();
                from.push(0);
            }
            _ => return Ok(out),
        }
    }
}
