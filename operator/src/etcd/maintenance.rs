//! etcd's maintenance calls the operator makes for a member's database:
//! the alarm list and disarm, compaction, defragmentation and KV hashes,
//! and the alarms a member's Status reports ([`alarms_in_status`]).
//!
//! Compaction, defragmentation and hashing can take long on a large
//! database, longer than the pooled clients' timeouts; they go through a
//! client of their own with a timeout fit for them, dropped after the call.

use std::time::Duration;

use etcd_client::{AlarmAction, AlarmOptions, AlarmType, Client, CompactionOptions};

use super::{Clients, Error, ErrorKind, Result};
use crate::plan::{Alarm, AlarmKind, KvHash};

/// The alarms a member's Status call reports in its `errors`, one
/// `memberID:ID alarm:NAME` each (etcd 3.4 and later). Unlike `alarm list`,
/// which etcd answers through raft (a log entry and a WAL fsync on every
/// member each time it is asked), Status is answered from the member's own
/// state: the cheap way to watch for alarms. Other errors (`etcdserver: no
/// leader`) and alarms the operator does not act on are left out.
pub fn alarms_in_status(errors: &[String]) -> Vec<Alarm> {
    errors
        .iter()
        .filter_map(|e| {
            let mut member = None;
            let mut kind = None;
            for part in e.split_whitespace() {
                if let Some(id) = part.strip_prefix("memberID:") {
                    member = id.parse::<u64>().ok();
                } else if let Some(name) = part.strip_prefix("alarm:") {
                    kind = match name {
                        "NOSPACE" => Some(AlarmKind::NoSpace),
                        "CORRUPT" => Some(AlarmKind::Corrupt),
                        _ => None,
                    };
                }
            }
            Some(Alarm {
                member: member?,
                kind: kind?,
            })
        })
        .collect()
}

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
        self.fenced("disarm", url)?;
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
    /// free inside the database of the member at `url` (only that one:
    /// the others compact in their own time). A revision compacted already
    /// counts as done, once that member's compaction of it has finished:
    /// etcd answers it after the compactions queued before it.
    pub async fn compact(&self, url: &str, revision: i64) -> Result<()> {
        self.fenced("compact", url)?;
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
        self.fenced("defragment", url)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn errors(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn reads_the_alarms_etcd_puts_in_status_errors() {
        // As etcd 3.4.23 and 3.5.1 write them (note the trailing space).
        let seen = errors(&[
            "memberID:13668033151171901709 alarm:NOSPACE ",
            "etcdserver: no leader",
            "memberID:2 alarm:CORRUPT ",
        ]);
        assert_eq!(
            alarms_in_status(&seen),
            vec![
                Alarm {
                    member: 13668033151171901709,
                    kind: AlarmKind::NoSpace
                },
                Alarm {
                    member: 2,
                    kind: AlarmKind::Corrupt
                },
            ]
        );
    }

    #[test]
    fn ignores_other_errors_and_alarms_it_does_not_act_on() {
        let seen = errors(&[
            "",
            "etcdserver: no leader",
            "memberID:1 alarm:NONE ",
            "memberID:x alarm:NOSPACE",
            "alarm:NOSPACE",
            "memberID:1",
        ]);
        assert_eq!(alarms_in_status(&seen), Vec::new());
    }

    proptest! {
        /// What etcd writes for an alarm reads back as that alarm.
        #[test]
        fn an_alarm_reads_back(member in any::<u64>(), corrupt in any::<bool>(), pad in "[ ]{0,3}") {
            let (name, kind) = if corrupt {
                ("CORRUPT", AlarmKind::Corrupt)
            } else {
                ("NOSPACE", AlarmKind::NoSpace)
            };
            let line = format!("{pad}memberID:{member} alarm:{name}{pad} ");
            prop_assert_eq!(alarms_in_status(&[line]), vec![Alarm { member, kind }]);
        }

        /// Any text at all: no panic, and an alarm only where the text
        /// names one of the two it acts on.
        #[test]
        fn any_text_is_safe(lines in proptest::collection::vec(".{0,60}", 0..5)) {
            for a in alarms_in_status(&lines) {
                let name = match a.kind {
                    AlarmKind::NoSpace => "alarm:NOSPACE",
                    AlarmKind::Corrupt => "alarm:CORRUPT",
                };
                prop_assert!(lines.iter().any(|l| l.contains(name)));
            }
        }
    }
}
