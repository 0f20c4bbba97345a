//! The primary's loss and the standby's promotion
//! (`standby.losePrimaryAt`, local platform): the primary's monkey is
//! stopped, its place destroyed ([`Platform::destroy`]: every member
//! SIGKILLed, then the operator, its manifest and data removed, the
//! operator started again for the standby), the standby's manifest rewritten with
//! `spec.standby.promote: true`, and, timed from the kill: the standby
//! seen `Promoted` (its `appliedRevision` is R), then the first write it
//! accepts (the runner's own put). The load's keys are read there at R
//! (what [`crate::invariants::promotion`] holds the primary's writes
//! against); once every operation sent to the primary has had its answer
//! or timed out, the load's ledger starts a new epoch at R and the probes
//! are pointed at the promoted cluster, so the load and the watchers move
//! with them. After the run, [`account`] reads the history for what the
//! promotion kept and lost.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use etcd_client::GetOptions;
use tokio::sync::watch;

use super::super::monkeys::Monkeys;
use super::super::platform::Platform;
use super::super::steps::wait;
use super::super::{Error, Options};
use super::Running;
use crate::client::Pool;
use crate::data::RunData;
use crate::history::{Ms, now_ms};
use crate::invariants::promotion::{self, AckedWrite, AtR, Promotion};
use crate::load::{self, ledger::WriteId};
use crate::ops::Us;
use crate::probe::Prober;
use crate::progress::Progress;
use crate::watch::check::FinalState;

/// Longest wait for the standby to say it is promoted.
const PROMOTE_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest wait for the promoted cluster to accept a write.
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest one call to the promoted cluster may take.
const CALL: Duration = Duration::from_secs(2);
/// The key the runner's first write goes to (outside the load's keys).
const FIRST_WRITE_KEY: &str = "soak/promoted";
/// Keys per page when reading the load's keys at R.
const PAGE: i64 = 1000;

/// What the loss touches of the running run.
pub(in crate::runner) struct Live<'a> {
    /// Clients.
    pub pool: &'a Pool,
    /// The probes, pointed at the promoted cluster once it took over.
    pub prober: &'a Prober,
    /// The load's ledger.
    pub load: &'a load::Shared,
}

/// Destroys the primary and promotes `standby`; see the module doc. What
/// happened goes into `data.promotion`, problems included (a standby that
/// never says it is promoted leaves the load where it was).
pub(in crate::runner) async fn lose_primary(
    o: &Options,
    platform: &mut Platform,
    (standby, monkeys): (&Running, &mut Monkeys),
    live: &Live<'_>,
    data: &mut RunData,
    (interrupted, progress): (&mut watch::Receiver<bool>, &mut Progress),
) -> Result<(), Error> {
    let s = &o.scenario;
    monkeys.stop_primary(data).await;
    progress.say(&format!(
        "losing the primary: every member of {} SIGKILLed, its data removed",
        s.cluster.name
    ));
    let (members_killed, lost_at) = platform.destroy(&s.cluster.name)?;
    let mut p = Promotion {
        cluster: standby.name().to_string(),
        lost_at,
        members_killed,
        ..Promotion::default()
    };
    let mut spec = standby.spec.clone();
    if let Some(sb) = spec.spec.standby.as_mut() {
        sb.promote = true;
    }
    platform.create_other(&spec)?;
    let status = standby.status.clone();
    let promoted = |c: &etcd_operator::crd::EtcdCluster| {
        c.status
            .as_ref()
            .and_then(|st| st.standby.as_ref())
            .is_some_and(|sb| sb.state == "Promoted")
    };
    wait(platform, interrupted, PROMOTE_TIMEOUT, || {
        status().is_some_and(|c| promoted(&c))
    })
    .await?;
    if *interrupted.borrow() {
        data.promotion = Some(p);
        return Ok(());
    }
    if !status().is_some_and(|c| promoted(&c)) {
        p.problems.push(format!(
            "{} was not seen Promoted within {PROMOTE_TIMEOUT:?}{}",
            p.cluster,
            platform.log_tail()
        ));
        data.promotion = Some(p);
        return Ok(());
    }
    p.promoted_at = Some(now_ms());
    let st = status().and_then(|c| c.status);
    let sb = st.as_ref().and_then(|st| st.standby.as_ref());
    p.revision = sb.map_or(0, |sb| sb.applied_revision);
    p.message = sb.and_then(|sb| sb.message.clone());
    let members: Vec<String> = st
        .map(|st| st.members.into_iter().map(|m| m.client_url).collect())
        .unwrap_or_default();
    p.first_write_at = first_write(live.pool, &members).await;
    if p.first_write_at.is_none() {
        p.problems.push(format!(
            "the promoted cluster accepted no write within {WRITE_TIMEOUT:?} ({})",
            members.join(",")
        ));
    }
    match read_at(live.pool, &members, p.revision).await {
        Ok(keys) => p.at_r = Some(keys),
        Err(e) => p.problems.push(format!(
            "the load's keys could not be read at revision {} on the promoted cluster: {e}",
            p.revision
        )),
    }
    progress.say(&format!(
        "{} promoted at revision {} {} after the loss, first write {} after",
        p.cluster,
        p.revision,
        fmt(p.to_promoted_ms()),
        fmt(p.to_first_write_ms())
    ));
    // Every operation sent to the primary has had its answer or timed out:
    // what is acknowledged from now on is the promoted cluster's.
    let quiet = lost_at + millis(s.load.timeout.get()) + 500;
    while now_ms() < quiet {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    load::lock(live.load).ledger.rollback(p.revision);
    let size = s.standby.as_ref().map_or(1, |sb| sb.members());
    live.prober.retarget(status, size);
    p.moved_at = Some(now_ms());
    data.notes.push((
        lost_at,
        format!(
            "the primary was destroyed ({members_killed} members killed); {} promoted at \
             revision {}",
            p.cluster, p.revision
        ),
    ));
    data.promotion = Some(p);
    Ok(())
}

fn millis(d: Duration) -> Ms {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn fmt(ms: Option<u64>) -> String {
    ms.map_or_else(
        || "never".into(),
        |ms| format!("{:.3} s", ms as f64 / 1000.0),
    )
}

/// The runner's own put on the promoted cluster, tried on each member in
/// turn until one acknowledges it: when (unix ms), or `None` within
/// [`WRITE_TIMEOUT`].
async fn first_write(pool: &Pool, members: &[String]) -> Option<Ms> {
    let deadline = Instant::now() + WRITE_TIMEOUT;
    while Instant::now() < deadline {
        for url in members {
            let r = pool
                .call(url, CALL, |mut c| async move {
                    c.put(FIRST_WRITE_KEY, "promoted", None).await
                })
                .await;
            if r.is_ok() {
                return Some(now_ms());
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// Every key of the load at `rev` on the first member that answers: key
/// -> the write that wrote it and its mod revision.
async fn read_at(pool: &Pool, members: &[String], rev: i64) -> Result<AtR, String> {
    let mut last = "no members".to_string();
    for url in members {
        match scan(pool, url, rev).await {
            Ok(keys) => return Ok(keys),
            Err(e) => last = format!("{url}: {e}"),
        }
    }
    Err(last)
}

async fn scan(pool: &Pool, url: &str, rev: i64) -> Result<AtR, String> {
    let mut out = AtR::new();
    let mut from = "soak/k".to_string();
    loop {
        let start = from.clone();
        let r = pool
            .call(url, Duration::from_secs(5), |mut c| async move {
                let opts = GetOptions::new()
                    .with_range("soak/l")
                    .with_revision(rev)
                    .with_limit(PAGE);
                c.get(start, Some(opts)).await
            })
            .await
            .map_err(|e| e.short())?;
        for kv in r.kvs() {
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            let v = kv.value();
            let name = WriteId::parse(v).map_or_else(
                || format!("raw:{}", String::from_utf8_lossy(&v[..v.len().min(32)])),
                |id| id.to_string(),
            );
            out.insert(key, (name, kv.mod_revision()));
        }
        match (r.more(), r.kvs().last()) {
            (true, Some(kv)) => from = format!("{}\0", String::from_utf8_lossy(kv.key())),
            _ => return Ok(out),
        }
    }
}

/// When the primary was lost (unix µs, the history's clock), if it was.
pub(in crate::runner) fn loss_us(data: &RunData) -> Option<Us> {
    data.promotion
        .as_ref()
        .map(|p| p.lost_at.saturating_mul(1000))
}

/// After the run: what the promotion kept and lost, from the history at
/// `history` (the writes sent to the primary before the loss), with the
/// primary's segment interval `segment`; and the history from the move on
/// checked against the promoted cluster ([`super::after`]), with the final
/// read-back `finals` and the picture's end `end` (µs).
pub(in crate::runner) fn account(
    history: &Path,
    data: &mut RunData,
    segment: Option<Duration>,
    (finals, end): (Option<&FinalState>, Us),
) {
    let Some(p) = data.promotion.as_mut() else {
        return;
    };
    match super::after::check(history, p, finals, end) {
        Ok(r) => p.linearizability = Some(r),
        Err(e) => p.problems.push(format!(
            "the history after the promotion cannot be checked: {e}"
        )),
    }
    let Some(at_r) = p.at_r.as_ref() else {
        return;
    };
    let loss = p.lost_at.saturating_mul(1000);
    let mut writes = Vec::new();
    let mut uncertain = BTreeSet::new();
    let read = crate::ops::file::read(history, |r| {
        if r.call >= loss {
            return;
        }
        if let Some(w) = AckedWrite::of(&r) {
            writes.push(w);
        } else if r.op == crate::ops::Kind::Delete && r.status == crate::ops::Status::Unknown {
            uncertain.insert(r.key);
        }
    });
    if let Err(e) = read {
        p.problems.push(format!(
            "the history could not be read for the promotion: {e}"
        ));
        return;
    }
    let segment = segment.map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    p.accounting = Some(promotion::account(
        &writes,
        p.revision,
        at_r,
        &uncertain,
        (loss, segment),
    ));
}
