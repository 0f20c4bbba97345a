//! The end of a run: settling, the final KV hash and reading back every
//! key the load wrote.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use etcd_client::GetOptions;

use std::path::Path;

use tokio::sync::watch;

use super::platform::Platform;
use super::steps::{cfg_value_size, wait};
use super::{Error, Options};
use crate::client::Pool;
use crate::data::RunData;
use crate::history::now_ms;
use crate::history::{Checkpoint, MemberView};
use crate::load;
use crate::probe::{self, Prober, SharedRecorder};
use crate::progress::Progress;

/// Every key of the load: number -> (value, mod revision).
pub type Finals = HashMap<u32, (Vec<u8>, i64)>;

/// The read-back: every key, and the revision it was read at.
pub type ReadBack = (Finals, i64);

/// Keys per page of the read-back, for values of `value_size` bytes (pages
/// stay well under gRPC's 4 MiB message limit).
fn page(value_size: usize) -> i64 {
    i64::try_from((2 << 20) / value_size.max(1))
        .unwrap_or(1000)
        .clamp(1, 5000)
}

/// Reads every `soak/k*` key at one revision, trying each endpoint in
/// turn, within `within`.
pub async fn read_back(
    pool: &Pool,
    endpoints: &[String],
    value_size: usize,
    within: Duration,
) -> Result<ReadBack, String> {
    let deadline = Instant::now() + within;
    let mut last_error = "no endpoints".to_string();
    for round in 0.. {
        for url in endpoints {
            if Instant::now() > deadline {
                return Err(format!(
                    "could not read the keys back within {within:?}: {last_error}"
                ));
            }
            match scan(pool, url, value_size).await {
                Ok(f) => return Ok(f),
                Err(e) => {
                    tracing::debug!("read-back via {url}: {e}");
                    last_error = format!("{url}: {e}");
                }
            }
        }
        if endpoints.is_empty() || round > 1000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(last_error)
}

async fn scan(pool: &Pool, url: &str, value_size: usize) -> Result<ReadBack, String> {
    let end = "soak/l".to_string(); // the prefix end of "soak/k"
    let mut from = "soak/k".to_string();
    let mut out = Finals::new();
    let mut revision = 0;
    loop {
        let (start, end, rev) = (from.clone(), end.clone(), revision);
        let r = pool
            .call(url, Duration::from_secs(5), |mut c| async move {
                let mut opts = GetOptions::new()
                    .with_range(end)
                    .with_limit(page(value_size));
                if rev > 0 {
                    opts = opts.with_revision(rev);
                }
                c.get(start, Some(opts)).await
            })
            .await
            .map_err(|e| e.short())?;
        if revision == 0 {
            revision = r.header().map(|h| h.revision()).unwrap_or_default();
        }
        let mut last = None;
        for kv in r.kvs() {
            let key = kv.key_str().unwrap_or_default();
            if let Some(n) = key
                .strip_prefix("soak/k")
                .and_then(|n| n.parse::<u32>().ok())
            {
                out.insert(n, (kv.value().to_vec(), kv.mod_revision()));
            }
            last = Some(key.to_string());
        }
        match (r.more(), last) {
            (true, Some(k)) => from = format!("{k}\0"),
            _ => return Ok((out, revision)),
        }
    }
}

/// The final KV hash checkpoint: retried until the cluster is healthy and
/// every member answers (and, with `agree`, the hashes agree: a member
/// corrupted just before the end gets its time to be replaced), or `within`
/// has passed (then the last attempt counts, over every member of the
/// newest probe: one that does not answer is a failure of the final check).
pub async fn final_hash(
    prober: &Prober,
    rec: &SharedRecorder,
    within: Duration,
    agree: bool,
) -> Option<Checkpoint> {
    let deadline = Instant::now() + within;
    let mut last = None;
    loop {
        let (latest, healthy) = {
            let r = probe::lock(rec);
            (r.samples.last().cloned(), r.healthy_now())
        };
        let out_of_time = Instant::now() >= deadline;
        if healthy || out_of_time {
            let mut latest = latest;
            if !healthy && let Some(l) = latest.as_mut() {
                let min = l.views.iter().map(|v| v.revision).filter(|r| *r > 0).min();
                for (url, _) in &l.failures {
                    l.views.push(MemberView {
                        url: url.clone(),
                        revision: min.unwrap_or(1),
                        ..MemberView::default()
                    });
                }
            }
            if let Some(latest) = latest
                && let Some(cp) = prober.checkpoint(&latest, true).await
            {
                let complete = cp.hashes.iter().all(|(_, h)| h.is_ok())
                    && (!agree || crate::invariants::hash::compare(&cp).is_none());
                last = Some(cp);
                if complete {
                    break;
                }
            }
        }
        if out_of_time {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    last
}

/// What the final checks use of the running run.
pub(super) struct Live<'a> {
    /// Clients.
    pub pool: &'a Pool,
    /// The prober.
    pub prober: &'a Prober,
    /// The probes' record.
    pub rec: &'a SharedRecorder,
    /// The members' URLs.
    pub endpoints: &'a watch::Receiver<Vec<String>>,
    /// The load's ledger and counters.
    pub load: &'a load::Shared,
}

/// Waits (at most `settle`) until a probe after the last fault finds the
/// cluster healthy, then takes the final KV hash and reads every key back
/// against the ledger; returns the read-back (for the watch checks).
pub(super) async fn settle_and_check(
    o: &Options,
    platform: &mut Platform,
    live: &Live<'_>,
    data: &mut RunData,
    interrupted: &mut watch::Receiver<bool>,
    progress: &mut Progress,
    fault_log: &Path,
) -> Result<Option<ReadBack>, Error> {
    let s = &o.scenario;
    progress.say(&format!("run over; settling (at most {})", s.settle));
    let last_fault = crate::invariants::recovery::group(
        &etcd_operator::faults::read(fault_log).unwrap_or_default(),
    )
    .last()
    .map(|e| e.at)
    .unwrap_or(0);
    let settle_start = Instant::now();
    let settled = wait(platform, interrupted, s.settle.get(), || {
        probe::lock(live.rec)
            .healthy_since(last_fault.max(data.run_end))
            .is_some()
    })
    .await?;
    if !settled {
        data.notes.push((
            now_ms(),
            format!("the cluster did not settle within {}", s.settle),
        ));
    }
    data.interrupted = *interrupted.borrow();
    let mut back = None;
    if !data.interrupted {
        let left = s
            .settle
            .get()
            .saturating_sub(settle_start.elapsed())
            .max(Duration::from_secs(10));
        let agree = s.bounds.hash_divergence_max.is_some();
        if let Some(cp) = final_hash(
            live.prober,
            live.rec,
            left.min(Duration::from_secs(30)),
            agree,
        )
        .await
        {
            let mut r = probe::lock(live.rec);
            if let Some(v) = crate::invariants::hash::compare(&cp) {
                r.violations.push(v);
            }
            r.checkpoints.push(cp);
        }
        // Members that answered the newest probe first.
        let mut eps = live.endpoints.borrow().clone();
        let answering: Vec<String> = probe::lock(live.rec)
            .samples
            .last()
            .map(|l| {
                l.views
                    .iter()
                    .map(|v| live.prober.map_url(&v.url))
                    .collect()
            })
            .unwrap_or_default();
        eps.sort_by_key(|u| !answering.contains(u));
        match read_back(live.pool, &eps, cfg_value_size(s), Duration::from_secs(30)).await {
            Ok((f, rev)) => {
                let mut restores = crate::history::restores(&probe::lock(live.rec).samples);
                let mut accept = s.bounds.data_loss == crate::scenario::DataLoss::SinceBackup;
                // A promotion after the primary's loss is, to the ledger, a
                // rebuild at R: writes acknowledged before it past R are
                // the promotion's to count (invariants::promotion), older
                // ones must be there.
                let promoted = data.promotion.as_ref().map(|p| (p.lost_at, p.revision));
                if let Some((at, backup_revision)) = promoted {
                    accept = true;
                    restores = vec![crate::history::Restore {
                        at,
                        backup_revision,
                    }];
                }
                // Where each loss began (the loss window ends there): the
                // injections of the fault log, resumes and heals left out.
                let faults: Vec<_> = crate::invariants::recovery::group(
                    &etcd_operator::faults::read(fault_log).unwrap_or_default(),
                )
                .iter()
                .filter(|e| e.injected())
                .map(|e| e.at)
                .chain(promoted.map(|(at, _)| at))
                .collect();
                let st = load::lock(live.load);
                data.lost = Some(crate::invariants::lost::check(
                    &st.ledger,
                    |k| f.get(&k).map(|(v, r)| (v.as_slice(), *r)),
                    accept.then_some(restores.as_slice()),
                    &faults,
                    now_ms(),
                ));
                back = Some((f, rev));
            }
            Err(e) => data
                .errors
                .push(format!("final read-back of the ledger failed: {e}")),
        }
    }
    Ok(back)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_fit_in_a_grpc_message() {
        assert_eq!(page(64), 5000);
        assert_eq!(page(1 << 20), 2);
        assert_eq!(page(0), 5000);
    }
}
