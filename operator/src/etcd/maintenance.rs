//! etcd's maintenance calls the operator makes for a member's database:
//! the alarm list and disarm, compaction, defragmentation and KV hashes.
//!
//! Compaction, defragmentation and hashing can take long on a large
//! database, longer than the pooled clients' timeouts; they go through a
//! client of their own with a timeout fit for them, dropped after the call.

use std::time::Duration;

use etcd_client::{AlarmAction, AlarmOptions, AlarmType, Client, CompactionOptions};

use super::{Clients, Error, ErrorKind, Result};
use crate::plan::{Alarm, AlarmKind, KvHash};

/// The longest a defragmentation may take before the operator gives up
/// waiting (etcd goes on; the member counts as busy until it answers).
pub const DEFRAG_TIMEOUT: Duration = Duration::from_secs(600);
/// The longest a physical compaction or a KV hash may take.
pub const LONG_TIMEOUT: Duration = Duration::from_secs(60);

impl Clients {
    /// A client for one long call to `url`.
    async fn long_client(&self, op: &'static str, url: &str, timeout: Duration) -> Result<Client> {
        let opts = self.options(url, op, self.timeout * 4, timeout)?;
        match tokio::time::timeout(self.timeout * 4, Client::connect([url], Some(opts))).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(e)) => Err(self.error(op, url, e)),
            Err(_) => Err(self.timed_out(op, url, self.timeout * 4)),
        }
    }

    /// Runs one long call on a client of its own.
    async fn long_call<T, F, Fut>(
        &self,
        op: &'static str,
        url: &str,
        timeout: Duration,
        f: F,
    ) -> Result<T>
    where
        F: FnOnce(Client) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        let client = self.long_client(op, url, timeout).await?;
        match tokio::time::timeout(timeout, f(client)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.error(op, url, e)),
            Err(_) => Err(self.timed_out(op, url, timeout)),
        }
    }

    /// The alarms the cluster has raised, as `url` sees them (alarms it
    /// does not act on are left out).
    pub async fn alarms(&self, url: &str) -> Result<Vec<Alarm>> {
        let r = self
            .call("alarm list", url, |mut c| async move {
                c.alarm(AlarmAction::Get, AlarmType::None, None).await
            })
            .await?;
        Ok(r.alarms()
            .iter()
            .filter_map(|a| {
                let kind = match a.alarm() {
                    AlarmType::Nospace => AlarmKind::NoSpace,
                    AlarmType::Corrupt => AlarmKind::Corrupt,
                    AlarmType::None => return None,
                };
                Some(Alarm {
                    member: a.member_id(),
                    kind,
                })
            })
            .collect())
    }

    /// Disarms one alarm.
    pub async fn disarm(&self, url: &str, alarm: Alarm) -> Result<()> {
        let kind = match alarm.kind {
            AlarmKind::NoSpace => AlarmType::Nospace,
            AlarmKind::Corrupt => AlarmType::Corrupt,
        };
        self.call("alarm disarm", url, |mut c| async move {
            let mut opts = AlarmOptions::new();
            opts.with_member(alarm.member);
            c.alarm(AlarmAction::Deactivate, kind, Some(opts)).await
        })
        .await
        .map(|_| ())
    }

    /// Compacts the history up to `revision` and waits until the space is
    /// free inside every member's database. A revision compacted already
    /// counts as done.
    pub async fn compact(&self, url: &str, revision: i64) -> Result<()> {
        let r = self
            .long_call("compact", url, LONG_TIMEOUT, |mut c| async move {
                c.compact(revision, Some(CompactionOptions::new().with_physical()))
                    .await
            })
            .await;
        match r {
            Err(Error {
                kind: ErrorKind::Refused(m),
                ..
            }) if m.contains("has been compacted") => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// Defragments the member at `url` (it serves nothing meanwhile).
    pub async fn defragment(&self, url: &str) -> Result<()> {
        self.long_call("defragment", url, DEFRAG_TIMEOUT, |mut c| async move {
            c.defragment().await
        })
        .await
        .map(|_| ())
    }

    /// The member's KV hash up to `revision`.
    pub async fn hash_kv(&self, url: &str, revision: i64) -> Result<KvHash> {
        let r = self
            .long_call("hash kv", url, LONG_TIMEOUT, |mut c| async move {
                c.hash_kv(revision).await
            })
            .await?;
        Ok(KvHash {
            revision,
            compact_revision: r.compact_version(),
            hash: r.hash(),
        })
    }
}
