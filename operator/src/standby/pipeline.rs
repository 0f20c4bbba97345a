//! Applying a run of consecutive source revisions with many transactions
//! in flight, in order. One source revision is still one transaction that
//! must land at the source's revision, but waiting for each before sending
//! the next bounds the standby to one raft round and one WAL fsync per
//! revision (about 500 a second on the 2-core machine of the benchmarks).
//! Sent ahead, etcd batches them into its raft rounds; what keeps them in
//! order is a guard on each: a compare that holds only once its
//! predecessor is applied (a key the predecessor put has the predecessor's
//! revision as its `mod_revision`; a revision that only deletes has no
//! such key: the one after it is not sent ahead). etcd may
//! take concurrent requests in any order: one taken too early fails its
//! compare, writes nothing (a transaction whose compare fails and that has
//! no other branch changes no revision), and is sent again once everything
//! before it is confirmed. The first of a window needs no such guard: its
//! predecessor is already confirmed. Every one also carries a guard that
//! holds only until it is applied ([`not_yet`]): nothing lands twice.

use etcd_client::{Client, Compare, CompareOp, Txn};
use futures::StreamExt;
use futures::stream::FuturesOrdered;

use crate::backup::delta::{Event, Revision};
use crate::backup::replay;

/// Most transactions in flight at once.
pub const WINDOW: usize = 64;

/// How a run of revisions went.
#[derive(Debug, PartialEq, Eq)]
pub enum Applied {
    /// Every revision landed at its own revision.
    All,
    /// The one at this index landed elsewhere: something else wrote here
    /// (the reason said).
    Diverged(usize, String),
}

/// The compare that holds once `prev` is applied here (and until a later
/// revision changes the key it looks at: none can be applied before the
/// guarded one): a key `prev` put has `prev`'s revision as its
/// `mod_revision`. A revision that only deletes has none: "the key is
/// absent" also holds before the key was created, so the revision after
/// it is never sent ahead ([`apply`] ends the window there).
pub fn after(prev: &Revision) -> Option<Compare> {
    first_put(prev).map(|key| Compare::mod_revision(key.clone(), CompareOp::Equal, prev.revision))
}

/// The first key `rev` puts, if it puts one.
fn first_put(rev: &Revision) -> Option<&Vec<u8>> {
    rev.events.iter().find_map(|e| match e {
        Event::Put { key, .. } => Some(key),
        Event::Delete { .. } => None,
    })
}

/// The compares that hold until `rev` is applied here: a key it puts has
/// an older `mod_revision` (or none); for a revision that only deletes, a
/// key it deletes still exists with an older `mod_revision` (absent once
/// the delete is applied, and newer once a later revision put it again).
/// With them no revision is ever applied twice, not even by a transaction
/// an earlier pass sent and gave up on while etcd still held it.
pub fn not_yet(rev: &Revision) -> Vec<Compare> {
    let older = |key: &Vec<u8>| Compare::mod_revision(key.clone(), CompareOp::Less, rev.revision);
    if let Some(key) = first_put(rev) {
        return vec![older(key)];
    }
    let deleted = rev.events.iter().find_map(|e| match e {
        Event::Delete { key } => Some(key),
        Event::Put { .. } => None,
    });
    deleted
        .map(|key| {
            vec![
                Compare::version(key.clone(), CompareOp::Greater, 0),
                older(key),
            ]
        })
        .unwrap_or_default()
}

/// Applies `revs` (consecutive, each one past the revision before it)
/// through `client`, [`WINDOW`] at a time; `on_applied` hears each index
/// confirmed, in order. A failure of the member is an error after the
/// confirmed ones were heard (those in flight may have landed too: the
/// next pass reads the standby's revision again).
pub async fn apply(
    client: &Client,
    revs: &[&Revision],
    mut on_applied: impl FnMut(usize),
) -> Result<Applied, String> {
    let mut next = 0;
    while next < revs.len() {
        // The window: up to WINDOW, each after the first guarded by its
        // predecessor; one whose predecessor only deletes waits for the
        // next window.
        let mut end = next + 1;
        while end < revs.len() && end - next < WINDOW && after(revs[end - 1]).is_some() {
            end += 1;
        }
        let mut inflight = FuturesOrdered::new();
        for i in next..end {
            let guards: Vec<Compare> = not_yet(revs[i])
                .into_iter()
                .chain((i > next).then(|| after(revs[i - 1])).flatten())
                .collect();
            let mut txn = Txn::new();
            if !guards.is_empty() {
                txn = txn.when(guards);
            }
            let txn = txn.and_then(replay::ops(revs[i]));
            let mut c = client.clone();
            inflight.push_back(async move { c.txn(txn).await });
        }
        let mut confirmed = next;
        let mut retry = false;
        while let Some(answer) = inflight.next().await {
            if retry {
                // Taken too early behind one taken too early: nothing
                // written either (its guard needs its predecessor).
                continue;
            }
            let i = confirmed;
            let rev = revs[i];
            let resp = answer.map_err(|e| format!("applying revision {}: {e}", rev.revision))?;
            if !resp.succeeded() {
                if i == next {
                    // Its predecessor is confirmed: it is here already.
                    return Err(format!(
                        "revision {} is on the standby already (a transaction an earlier pass \
                         gave up on): the standby's revision is read again",
                        rev.revision
                    ));
                }
                retry = true;
                continue;
            }
            let landed = resp.header().map(|h| h.revision()).ok_or_else(|| {
                format!(
                    "applying revision {}: no revision in the answer",
                    rev.revision
                )
            })?;
            if landed != rev.revision {
                return Ok(Applied::Diverged(i, landed_elsewhere(rev, landed)));
            }
            on_applied(i);
            confirmed += 1;
        }
        next = confirmed;
    }
    Ok(Applied::All)
}

/// Why a revision that landed at `landed` here means the standby diverged.
pub fn landed_elsewhere(rev: &Revision, landed: i64) -> String {
    format!(
        "source revision {} landed at revision {landed} here: something other than the \
         standby's applier wrote to it; nothing more is applied (promote it, or create the \
         standby again)",
        rev.revision
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(revision: i64, events: Vec<Event>) -> Revision {
        Revision { revision, events }
    }

    #[test]
    fn the_order_guard_looks_at_a_key_put_and_the_once_guard_at_any_key() {
        let put = |k: &str| Event::Put {
            key: k.into(),
            value: b"v".to_vec(),
        };
        let del = |k: &str| Event::Delete { key: k.into() };
        // Compare has no PartialEq: its Debug shows every field.
        let same = |a: Option<Compare>, b: Compare| format!("{a:?}") == format!("{:?}", Some(b));
        let g = after(&rev(7, vec![del("a"), put("b")]));
        assert!(
            same(g, Compare::mod_revision(b"b".to_vec(), CompareOp::Equal, 7)),
            "a put key holds the revision"
        );
        // A deleted key is absent before it was created too: no guard (the
        // next revision waits for it).
        assert!(after(&rev(8, vec![del("c")])).is_none());
        assert!(after(&rev(9, vec![])).is_none());
        // Until it is applied: a key put has an older revision, a key
        // deleted still exists with an older one.
        let all = |g: Vec<Compare>, want: Vec<Compare>| format!("{g:?}") == format!("{want:?}");
        assert!(all(
            not_yet(&rev(7, vec![del("a"), put("b")])),
            vec![Compare::mod_revision(b"b".to_vec(), CompareOp::Less, 7)]
        ));
        assert!(all(
            not_yet(&rev(8, vec![del("c")])),
            vec![
                Compare::version(b"c".to_vec(), CompareOp::Greater, 0),
                Compare::mod_revision(b"c".to_vec(), CompareOp::Less, 8)
            ]
        ));
        assert!(not_yet(&rev(9, vec![])).is_empty());
    }
}
