//! `disk-full`: a write burst through one member until etcd raises its
//! NOSPACE alarm (the backend reached its quota, `--quota-backend-bytes`,
//! 2 GiB by default). The monkey stops there; clearing the alarm (compact,
//! defragment, disarm) is the operator's job. The burst rewrites the same
//! few keys under `chaos-monkey/fill/` (what was written can be told
//! apart): the database grows with their history, as it does under a hot
//! key that nobody compacts, so a compaction can give the space back.

use std::path::Path;
use std::time::Duration;

use etcd_client::{AlarmAction, AlarmOptions, AlarmType, Client, ConnectOptions};

/// Bytes per value (etcd accepts requests up to 1.5 MiB by default).
const VALUE: usize = 512 * 1024;
/// Writers at once.
const WRITERS: usize = 4;
/// The burst stops when the disk under the member has less than this free.
const FREE_FLOOR: u64 = 512 << 20;
/// Prefix of the keys written.
pub const PREFIX: &str = "chaos-monkey/fill/";
const TIMEOUT: Duration = Duration::from_secs(10);

/// Why the burst ended without NOSPACE.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// etcd refused something else, or could not be reached.
    #[error("{0}")]
    Etcd(String),
    /// `--fill-max` reached.
    #[error("wrote {0} MiB (--fill-max) and etcd raised no NOSPACE alarm")]
    Max(u64),
    /// The machine's disk is nearly full.
    #[error(
        "stopped after {0} MiB: the disk under {1} has less than 512 MiB free, and etcd raised \
         no NOSPACE alarm (its quota is larger than the space left)"
    )]
    Floor(u64, String),
}

fn free_bytes(dir: &Path) -> Option<u64> {
    let s = rustix::fs::statvfs(dir).ok()?;
    Some(s.f_bavail.saturating_mul(s.f_frsize))
}

fn nospace(e: &etcd_client::Error) -> bool {
    e.to_string().contains("database space exceeded")
}

/// Writes through `client_url` until NOSPACE (or `max` bytes, or the disk
/// under `data_dir` nearly full). Returns what was written and the alarms.
pub async fn fill(client_url: &str, data_dir: &Path, max: u64) -> Result<String, Error> {
    let etcd = |e: etcd_client::Error| Error::Etcd(format!("{client_url}: {e}"));
    let opts = ConnectOptions::new()
        .with_connect_timeout(TIMEOUT)
        .with_timeout(TIMEOUT);
    let client = Client::connect([client_url], Some(opts))
        .await
        .map_err(etcd)?;
    let value = vec![b'x'; VALUE];
    let mut written: u64 = 0;
    let mut hit = false;
    while !hit {
        if written >= max {
            return Err(Error::Max(written >> 20));
        }
        if free_bytes(data_dir).is_some_and(|f| f < FREE_FLOOR) {
            return Err(Error::Floor(written >> 20, data_dir.display().to_string()));
        }
        let puts = (0..WRITERS).map(|i| {
            let mut c = client.kv_client();
            let key = format!("{PREFIX}{i:08}");
            let v = value.clone();
            async move { c.put(key, v, None).await }
        });
        for r in futures::future::join_all(puts).await {
            match r {
                Ok(_) => written += VALUE as u64,
                Err(e) if nospace(&e) => hit = true,
                Err(e) => return Err(etcd(e)),
            }
        }
    }
    let mut m = client.maintenance_client();
    let alarms = m
        .alarm(AlarmAction::Get, AlarmType::None, None::<AlarmOptions>)
        .await
        .map_err(etcd)?;
    let list: Vec<String> = alarms
        .alarms()
        .iter()
        .map(|a| format!("{:x}:{:?}", a.member_id(), a.alarm()))
        .collect();
    Ok(format!(
        "etcd answered NOSPACE after {} MiB under {PREFIX}; alarms: {}",
        written >> 20,
        list.join(" ")
    ))
}
