//! etcd's member list, read again only when it may have changed.
//!
//! Every change of membership (add, remove, promote, a member publishing
//! its name and client URLs on its first start, a peer URL update) is a
//! raft entry, so while the member asked reports the same raft term and
//! index, its list is the one it gave before. One catch: the Status index
//! is the committed index, and a member lists what it has applied, which
//! may trail it by a moment. So a list is reused only once it was read
//! [`LIST_SETTLE`] or more after its index was first seen: a converged,
//! idle cluster then costs one Status per member per pass, not also a
//! member list.

use std::time::{Duration, Instant};

use crate::etcd::ListedMember;

/// How long after a raft index was first seen a list read at that index
/// is trusted to include every entry up to it (applying trails
/// committing by far less).
pub const LIST_SETTLE: Duration = Duration::from_secs(1);

/// Where a member's log stood when it was asked (from its Status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListedAt {
    /// The member's id.
    pub id: u64,
    /// Its raft term.
    pub term: u64,
    /// Its raft (committed) index.
    pub index: u64,
}

/// The member list last read, and where the log stood.
#[derive(Clone, Debug, Default)]
pub struct ListCache {
    entry: Option<Entry>,
}

#[derive(Clone, Debug)]
struct Entry {
    url: String,
    at: ListedAt,
    /// When a list at `at` was first read.
    first: Instant,
    /// A list was read at `at` [`LIST_SETTLE`] or more after `first`.
    settled: bool,
    list: Vec<ListedMember>,
}

impl ListCache {
    /// The list to use for the member at `url` whose log stands at `at`
    /// without asking it, when one read before is sure to be the same.
    pub fn reuse(&self, url: &str, at: ListedAt) -> Option<Vec<ListedMember>> {
        let e = self.entry.as_ref()?;
        (e.settled && e.url == url && e.at == at).then(|| e.list.clone())
    }

    /// Keeps `list`, used at `now` for the member at `url` whose log
    /// stood at `at`.
    pub fn keep(&mut self, url: &str, at: ListedAt, now: Instant, list: &[ListedMember]) {
        let first = match &self.entry {
            Some(e) if e.url == url && e.at == at => {
                if e.settled {
                    return;
                }
                e.first
            }
            _ => now,
        };
        self.entry = Some(Entry {
            url: url.to_string(),
            at,
            first,
            settled: now.duration_since(first) >= LIST_SETTLE,
            list: list.to_vec(),
        });
    }

    /// Forgets the list (after the operator changed membership itself).
    pub fn forget(&mut self) {
        self.entry = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: u64) -> ListedMember {
        ListedMember {
            id,
            name: format!("m{id}"),
            peer_urls: vec![format!("http://127.0.0.{id}:2380")],
            client_urls: vec![format!("http://127.0.0.{id}:2379")],
            is_learner: false,
        }
    }

    const URL: &str = "http://127.0.0.1:2379";

    fn at(term: u64, index: u64) -> ListedAt {
        ListedAt { id: 1, term, index }
    }

    #[test]
    fn a_list_is_reused_only_once_read_again_after_it_settled() {
        let t0 = Instant::now();
        let mut c = ListCache::default();
        assert_eq!(c.reuse(URL, at(2, 10)), None, "nothing read yet");
        c.keep(URL, at(2, 10), t0, &[member(1)]);
        assert_eq!(
            c.reuse(URL, at(2, 10)),
            None,
            "read right when the index was first seen: it may trail it"
        );
        // Read again soon: still not settled.
        c.keep(URL, at(2, 10), t0 + LIST_SETTLE / 2, &[member(1)]);
        assert_eq!(c.reuse(URL, at(2, 10)), None);
        // Read again a settle time after the index was first seen: the
        // list read then (with the entry applied since) is reused.
        c.keep(URL, at(2, 10), t0 + LIST_SETTLE, &[member(1), member(2)]);
        assert_eq!(c.reuse(URL, at(2, 10)), Some(vec![member(1), member(2)]));
        // Keeping what was reused changes nothing.
        c.keep(
            URL,
            at(2, 10),
            t0 + LIST_SETTLE * 9,
            &[member(1), member(2)],
        );
        assert_eq!(c.reuse(URL, at(2, 10)), Some(vec![member(1), member(2)]));
    }

    #[test]
    fn a_moved_log_another_term_or_member_reads_again() {
        let t0 = Instant::now();
        let mut c = ListCache::default();
        c.keep(URL, at(2, 10), t0, &[member(1)]);
        c.keep(URL, at(2, 10), t0 + LIST_SETTLE, &[member(1)]);
        assert!(c.reuse(URL, at(2, 10)).is_some());
        assert_eq!(c.reuse(URL, at(2, 11)), None, "an entry was committed");
        assert_eq!(c.reuse(URL, at(3, 10)), None, "a new term");
        assert_eq!(
            c.reuse(URL, ListedAt { id: 7, ..at(2, 10) }),
            None,
            "another member behind the URL"
        );
        assert_eq!(c.reuse("http://127.0.0.2:2379", at(2, 10)), None);
        // A new index starts its own settle time.
        c.keep(URL, at(2, 11), t0 + LIST_SETTLE * 2, &[member(1)]);
        assert_eq!(c.reuse(URL, at(2, 10)), None);
        assert_eq!(c.reuse(URL, at(2, 11)), None);
        c.forget();
        assert_eq!(c.reuse(URL, at(2, 11)), None);
    }
}
