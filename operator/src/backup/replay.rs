//! Replaying a chain of delta segments into a cluster restored from its
//! base backup: each original revision becomes one transaction (split only
//! when it holds more operations than etcd takes in one), so the restored
//! cluster reaches the same revisions with the same data. The local
//! platform replays into a private scratch member restored from the base
//! backup and snapshots it ([`crate::platform::local::merge`]), so no
//! client sees or writes the cluster between the restore and the replay.

use std::time::Duration;

use etcd_client::{Client, ConnectOptions, GetOptions, Txn, TxnOp};

use super::chain::Chain;
use super::delta::Event;
use super::{Error, Result, Source};
use crate::etcd::Credentials;

/// Most operations in one replayed transaction: the members a chain is
/// replayed into (scratch members, standbys) run with it as
/// `--max-txn-ops` ([`member_flags`]), so one original revision stays one
/// transaction however many keys it changed (a delete of a prefix is one
/// revision of many deletes; etcd's default of 128 would split it).
pub const MAX_TXN_OPS: usize = 1 << 20;
/// The largest replayed transaction, as `--max-request-bytes`: a
/// revision's events may weigh more replayed than they did as written (a
/// prefix delete names every key).
pub const MAX_REQUEST_BYTES: usize = 32 << 20;

/// The etcd flags of a member a chain is replayed into.
pub fn member_flags() -> [String; 4] {
    [
        "--max-txn-ops".into(),
        MAX_TXN_OPS.to_string(),
        "--max-request-bytes".into(),
        MAX_REQUEST_BYTES.to_string(),
    ]
}
/// Longest wait for one answer.
const TIMEOUT: Duration = Duration::from_secs(10);

/// What a replay did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Replayed {
    /// Segments whose revisions are all in the cluster now.
    pub segments: usize,
    /// Revisions applied by this replay (not those already there).
    pub applied: usize,
    /// The cluster's revision after the replay.
    pub revision: i64,
    /// When the last replayed segment was written (ms since the epoch).
    pub last_unix_ms: Option<u64>,
}

/// A client of the member `source` for applying revisions (each call
/// bounded by [`TIMEOUT`]), as `auth` while etcd's auth is on there (a
/// standby's root).
pub async fn connect(
    source: Source<'_>,
    auth: Option<&Credentials>,
) -> std::result::Result<Client, String> {
    let opts = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(5))
        .with_timeout(TIMEOUT);
    let opts = crate::etcd::reach(opts, source.url, source.tls, auth);
    tokio::time::timeout(TIMEOUT, Client::connect([source.url], Some(opts)))
        .await
        .map_err(|_| "no connection".to_string())?
        .map_err(|e| e.to_string())
}

/// The revision the member behind `client` is at and its cluster's id
/// (within [`TIMEOUT`]).
pub async fn head(client: &mut Client) -> std::result::Result<(i64, u64), String> {
    let head = tokio::time::timeout(
        TIMEOUT,
        client.get(vec![0u8], Some(GetOptions::new().with_count_only())),
    )
    .await
    .map_err(|_| "no answer".to_string())?
    .map_err(|e| e.to_string())?;
    Ok(head
        .header()
        .map_or((0, 0), |h| (h.revision(), h.cluster_id())))
}

/// The operations of revision `rev`, in its order: one transaction.
pub fn ops(rev: &super::delta::Revision) -> Vec<TxnOp> {
    rev.events
        .iter()
        .map(|e| match e {
            Event::Put { key, value } => TxnOp::put(key.clone(), value.clone(), None),
            Event::Delete { key } => TxnOp::delete(key.clone(), None),
        })
        .collect()
}

/// Applies the segments of `chain` through `source`.
pub async fn apply(source: Source<'_>, chain: &Chain) -> Result<Replayed> {
    let fail = |message: String| Error::Snapshot {
        member: source.member.into(),
        url: source.url.into(),
        message: format!("replaying delta segments: {message}"),
    };
    let mut client = connect(source, None).await.map_err(fail)?;
    let mut at = head(&mut client).await.map_err(fail)?.0;
    let mut out = Replayed::default();
    for segment in &chain.segments {
        for rev in &segment.revisions {
            let ops = ops(rev);
            for part in ops.chunks(MAX_TXN_OPS) {
                let resp = client
                    .txn(Txn::new().and_then(part.to_vec()))
                    .await
                    .map_err(|e| fail(format!("revision {}: {e}", rev.revision)))?;
                at = resp.header().map_or(at, |h| h.revision());
            }
            if at != rev.revision {
                tracing::warn!(
                    "replayed revision {} became revision {at} (the base backup's revision \
                     and the chain's first do not meet)",
                    rev.revision
                );
            }
            out.applied += 1;
        }
        out.segments += 1;
        out.last_unix_ms = Some(segment.unix_ms);
    }
    out.revision = at;
    Ok(out)
}
