//! Where the standby's next revision is: the chain, among the source's
//! backups in the store, that holds revision R + 1. The follower of
//! continuous backups keeps a chain going until it holds the next full
//! backup's revision, so chains overlap and every revision is in one; a
//! revision in none (a chain cut, a follower that lost the history, the
//! standby's chain deleted by the source's retention) stops the standby
//! there, said with the revisions it cannot apply.

use std::time::Duration;

use crate::backup::chain::Chain;
use crate::backup::{BackupMeta, BackupStore, Location, Result};

/// How long a newer full backup may go without a chain reaching it before
/// the revisions between are taken as lost (a chain only reaches it after
/// its next segment, a few seconds later).
pub const GAP_GRACE: Duration = Duration::from_secs(60);

/// What the store holds past revision `after`.
#[derive(Clone, Debug, Default)]
pub struct Found {
    /// The chain holding `after + 1`, when one does.
    pub chain: Option<Chain>,
    /// The newest source revision known.
    pub newest_revision: i64,
    /// When the source wrote it (ms since the epoch).
    pub newest_ms: Option<u64>,
    /// Why the standby cannot go on, when it cannot.
    pub stop: Option<String>,
}

/// The source's backups that `pinned` (the uid the standby follows) owns,
/// newest first, and a word about a source re-created under the name.
fn ours(metas: Vec<BackupMeta>, pinned: Option<&str>) -> (Vec<BackupMeta>, Option<String>) {
    let other = metas
        .first()
        .filter(|m| m.uid.as_deref() != pinned)
        .map(|m| {
            format!(
                "the source cluster {} was re-created (its newest backup {} carries uid {}, this \
                 standby follows uid {}): another cluster, not followed",
                m.cluster,
                m.name,
                m.uid.as_deref().unwrap_or("none"),
                pinned.unwrap_or("none")
            )
        });
    let ours = metas
        .into_iter()
        .filter(|m| m.uid.as_deref() == pinned)
        .collect();
    (ours, other)
}

/// The chain of the source (`source`, whose backups `pinned` owns) that
/// holds revision `after + 1`, at `now_ms`.
pub async fn find<S: BackupStore>(
    store: &S,
    source: &Location,
    pinned: Option<&str>,
    after: i64,
    now_ms: u64,
) -> Result<Found> {
    let (ours, other) = ours(store.list(source).await?, pinned);
    let mut found = Found::default();
    let mut newer: Option<&BackupMeta> = None;
    for meta in &ours {
        if meta.revision > after {
            newer = Some(meta);
            found.newest_revision = found.newest_revision.max(meta.revision);
            found.newest_ms = found.newest_ms.max(Some(meta.unix_ms));
            continue;
        }
        let chain = store.chain(source, meta).await?;
        if chain.last_revision() > found.newest_revision {
            found.newest_revision = chain.last_revision();
            found.newest_ms = chain.last_unix_ms().or(Some(meta.unix_ms));
        }
        if chain.last_revision() > after {
            found.chain = Some(chain);
        } else if let Some(n) = newer {
            let waited = Duration::from_millis(now_ms.saturating_sub(n.unix_ms));
            if waited >= GAP_GRACE {
                let why = chain
                    .cut
                    .clone()
                    .unwrap_or_else(|| "it ends there".to_string());
                found.stop = Some(format!(
                    "revisions {} to {} of {} are in no chain in the store (the chain of {} \
                     holds up to {}: {why}; the next full backup, {}, holds {}): the standby \
                     stops at revision {after}; promote it, or create it again from the newest \
                     backup",
                    after + 1,
                    n.revision,
                    meta.cluster,
                    meta.name,
                    chain.last_revision(),
                    n.name,
                    n.revision
                ));
            }
        }
        break;
    }
    if found.chain.is_none() && found.stop.is_none() {
        if let Some(why) = other {
            found.stop = Some(why);
        } else if ours.iter().all(|m| m.revision > after) && !ours.is_empty() {
            found.stop = Some(format!(
                "the source's backups no longer reach back to revision {after} (the oldest \
                 kept, {}, holds {}): the standby stops there",
                ours.last().map_or("", |m| m.name.as_str()),
                ours.last().map_or(0, |m| m.revision)
            ));
        }
    }
    if found.newest_revision < after {
        found.newest_revision = after;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str, uid: Option<&str>) -> BackupMeta {
        BackupMeta {
            cluster: "src".into(),
            uid: uid.map(str::to_string),
            ..crate::backup::tests::meta(name, 1, String::new())
        }
    }

    #[test]
    fn only_the_pinned_identity_is_followed_and_a_new_one_is_said() {
        let metas = vec![
            meta("b3", Some("new")),
            meta("b2", Some("old")),
            meta("b1", Some("old")),
        ];
        let (mine, other) = ours(metas.clone(), Some("old"));
        assert_eq!(
            mine.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            ["b2", "b1"]
        );
        let said = other.expect("the new identity is said");
        assert!(
            said.contains("re-created") && said.contains("uid new"),
            "{said}"
        );
        let (mine, other) = ours(metas, Some("new"));
        assert_eq!(mine.len(), 1);
        assert!(other.is_none());
    }
}
