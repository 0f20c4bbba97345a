//! Checks serde cannot express. Every problem names its field and says what
//! is allowed; all problems are reported at once.

use std::time::Duration;

use etcd_operator::validate::{self as spec_check, Versions};
use etcd_operator::version::Version;

use super::{DataLoss, Dur, FaultKind, Scenario, Target};

mod reach;
mod standby;

use reach::{fault_ceiling, restore_checks};

/// Accepts every version that parses; whether a binary exists is the
/// runner's check (it knows the platform).
struct AnyVersion;

impl Versions for AnyVersion {
    fn check(&self, _: Version) -> Result<(), String> {
        Ok(())
    }
}

/// Shortest and longest probe interval: the spec probes every 100-250 ms,
/// which is also the resolution of every recovery time.
const PROBE_MIN: Duration = Duration::from_millis(100);
const PROBE_MAX: Duration = Duration::from_millis(250);

/// All problems of a scenario, each as `field: message`.
pub fn validate(s: &Scenario) -> Result<(), Vec<String>> {
    let mut p = Vec::new();
    let mut err = |field: &str, msg: String| p.push(format!("{field}: {msg}"));
    let zero = Duration::ZERO;

    if s.name.is_empty()
        || !s
            .name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        err(
            "name",
            format!(
                "{:?} is not a valid name: use lowercase letters, digits and '-'",
                s.name
            ),
        );
    }
    if s.duration.get() == zero {
        err("duration", "must be more than 0s".into());
    }
    if s.store.is_some() {
        match s.cluster.spec.backup.as_ref() {
            None => err(
                "store",
                "keeps the cluster's backups: set cluster.backup (interval, maxBackups)".into(),
            ),
            Some(b) if b.location.is_some() => err(
                "store",
                "the runner points cluster.backup.location at the store it starts: drop \
                 cluster.backup.location"
                    .into(),
            ),
            Some(_) => {}
        }
    }
    // A soak is bounded: a week at most (2562048h was accepted).
    let week = std::time::Duration::from_secs(7 * 86_400);
    if s.duration.get() > week {
        err(
            "duration",
            format!("must be at most 168h (a week), got {}", s.duration),
        );
    }
    if let Some(after) = s.chaos.as_ref().map(|c| Dur(c.start_after))
        && after.get() > zero
        && after.get() >= s.duration.get()
        && s.duration.get() > zero
    {
        err(
            "chaos.startAfter",
            format!(
                "must be shorter than duration ({}), got {after}: the chaos would never start",
                s.duration
            ),
        );
    }
    if s.settle.get() == zero {
        err("settle", "must be more than 0s".into());
    }

    // The cluster: the operator's own checks, with the scenario's field names.
    if let Err(invalid) = spec_check::validate(&s.cluster.name, &s.cluster.spec, &AnyVersion) {
        for e in invalid.0 {
            let field = e
                .field
                .replacen("metadata.name", "cluster.name", 1)
                .replacen("spec.", "cluster.", 1);
            err(&field, e.message);
        }
    }
    if s.cluster.spec.paused {
        err(
            "cluster.paused",
            "must be false: a paused cluster is never created; for a cluster the \
             operator does not heal use operatorHealing: false"
                .into(),
        );
    }
    let size = s.cluster.members();

    let mut cluster = s.cluster.clone();
    let mut last = Duration::ZERO;
    for (i, c) in s.changes.iter().enumerate() {
        let field = format!("changes[{i}]");
        if c.after.get() == zero || c.after >= s.duration {
            err(
                &format!("{field}.after"),
                format!(
                    "must be after 0s and before duration ({}), got {}",
                    s.duration, c.after
                ),
            );
        }
        if c.after.get() < last {
            err(
                &format!("{field}.after"),
                "changes must be in time order".into(),
            );
        }
        last = c.after.get();
        if c.size.is_none() && c.version.is_none() {
            err(&field, "needs size or version (or both)".into());
        }
        cluster = cluster.changed(c);
        if let Err(invalid) = spec_check::validate(&cluster.name, &cluster.spec, &AnyVersion) {
            for e in invalid.0 {
                err(
                    &e.field.replacen("spec.", &format!("{field}."), 1),
                    e.message,
                );
            }
        }
    }

    let l = &s.load;
    for (field, n) in [("load.writers", l.writers), ("load.readers", l.readers)] {
        if n > MAX_CLIENTS {
            err(field, format!("must be at most {MAX_CLIENTS}, got {n}"));
        }
    }
    if l.writers + l.readers > 0 && l.keys == 0 {
        err("load.keys", "must be at least 1".into());
    }
    if !(16..=1 << 20).contains(&l.value_size) {
        err(
            "load.valueSize",
            format!("must be between 16 and 1048576 bytes, got {}", l.value_size),
        );
    }
    if l.timeout.get() == zero {
        err("load.timeout", "must be more than 0s".into());
    }

    if let Some(c) = &s.chaos {
        // Each value went through the monkey's own parser as the file was
        // read (ranges, zero durations); what is left are the checks
        // across fields, and the cluster's size.
        if let Some(n) = c.max_kill
            && n > size.max(1)
        {
            err(
                "chaos.maxKill",
                format!("must be between 1 and cluster.size ({size}), got {n}"),
            );
        }
        if c.target == Target::Majority && !c.allow_quorum_loss {
            err(
                "chaos.target",
                "majority takes quorum down: set chaos.allowQuorumLoss: true".into(),
            );
        }
        if c.target == Target::Operator && c.fault != FaultKind::Kill {
            err("chaos.fault", "only kill applies to target operator".into());
        }
        if c.target == Target::Store {
            if s.store.is_none() {
                err(
                    "chaos.target",
                    "store hits the object store the runner starts: set store: s3".into(),
                );
            }
            if c.fault != FaultKind::Pause {
                err(
                    "chaos.fault",
                    "target store takes fault: pause (a store that stops answering)".into(),
                );
            }
        }
        // The monkey's own table of which option goes with which fault.
        for (flag, wants) in c.options_for_other_faults() {
            err(
                &chaos_field(flag),
                format!("applies only with fault: {wants}"),
            );
        }
        if c.split.is_some()
            && !matches!(c.target, Target::Random | Target::Leader | Target::Follower)
        {
            err(
                "chaos.split",
                "takes target random, leader or follower".into(),
            );
        }
        if c.dry_run && s.bounds.min_faults > 0 {
            err(
                "bounds.minFaults",
                "must be 0 with chaos.dryRun: a dry run injects nothing".into(),
            );
        } else if s.duration.get() > zero {
            // (A zero duration has its own message above.)
            let most = fault_ceiling(s, c);
            if s.bounds.min_faults > most {
                let start = (!c.start_after.is_zero()).then_some(Dur(c.start_after));
                err(
                    "bounds.minFaults",
                    format!(
                        "must be at most {most}, the most faults this run can inject (the \
                         monkey starts with the load and hits once per chaos.killInterval \
                         ({}), the first time one interval after {}, until duration ({}) \
                         ends{}{}), got {}",
                        Dur(c.kill_interval),
                        start.map_or("it starts".to_string(), |d| format!(
                            "chaos.startAfter ({d})"
                        )),
                        s.duration,
                        c.max_faults
                            .map(|m| format!("; at most chaos.maxFaults ({m})"))
                            .unwrap_or_default(),
                        if c.probability == 0.0 {
                            "; chaos.probability is 0"
                        } else {
                            ""
                        },
                        s.bounds.min_faults
                    ),
                );
            }
        }
    } else if s.bounds.min_faults > 0 {
        err(
            "bounds.minFaults",
            "must be 0 without a chaos section: nothing injects faults".into(),
        );
    }

    let pr = &s.probe;
    if !(PROBE_MIN..=PROBE_MAX).contains(&pr.interval.get()) {
        err(
            "probe.interval",
            format!(
                "must be between 100ms and 250ms (recovery times are measured to one probe \
                 interval), got {}",
                pr.interval
            ),
        );
    }
    if pr.timeout.get() == zero || pr.timeout.get() > Duration::from_secs(10) {
        err(
            "probe.timeout",
            format!("must be more than 0s and at most 10s, got {}", pr.timeout),
        );
    }
    if pr.checkpoint_interval.get() < Duration::from_secs(1) {
        err(
            "probe.checkpointInterval",
            format!("must be at least 1s, got {}", pr.checkpoint_interval),
        );
    }

    let b = &s.bounds;
    if b.recovery_p99.get() == zero {
        err("bounds.recoveryP99", "must be more than 0s".into());
    }
    if b.recovery_max.get() == zero {
        err("bounds.recoveryMax", "must be more than 0s".into());
    }
    if b.recovery_p99 > b.recovery_max {
        err(
            "bounds.recoveryP99",
            format!(
                "must not exceed bounds.recoveryMax ({}), got {}",
                b.recovery_max, b.recovery_p99
            ),
        );
    }
    if !(b.availability > 0.0 && b.availability <= 1.0) {
        err(
            "bounds.availability",
            format!(
                "must be a fraction above 0 and at most 1 (0.99 = 99%), got {}",
                b.availability
            ),
        );
    }
    let interval = s
        .cluster
        .spec
        .backup
        .as_ref()
        .and_then(|bk| spec_check::parse_duration(&bk.interval).ok());
    if let Some(age) = b.max_backup_age {
        match interval {
            None if s.cluster.spec.backup.is_none() => err(
                "bounds.maxBackupAge",
                "needs cluster.backup: without backups there is no backup age".into(),
            ),
            Some(i) if age.get() <= i => err(
                "bounds.maxBackupAge",
                format!(
                    "must be more than cluster.backup.interval ({}): the newest backup \
                     is up to one interval old before the next is taken, got {age}",
                    humantime::format_duration(i)
                ),
            ),
            _ => {}
        }
    }
    if let Some(age) = b.max_chain_age {
        let segments = s
            .cluster
            .spec
            .backup
            .as_ref()
            .and_then(|bk| bk.continuous.as_ref())
            .and_then(|c| spec_check::parse_duration(&c.segment_interval).ok());
        match segments {
            None => err(
                "bounds.maxChainAge",
                "needs cluster.backup.continuous: without continuous backups there is no chain"
                    .into(),
            ),
            Some(i) if age.get() <= i => err(
                "bounds.maxChainAge",
                format!(
                    "must be more than cluster.backup.continuous.segmentInterval ({}): the \
                     store is up to one interval behind before the next segment, got {age}",
                    humantime::format_duration(i)
                ),
            ),
            _ => {}
        }
    }
    if let Some(rc) = b.restore_checks {
        restore_checks(s, rc.min, &mut err);
    }
    if let Some(window) = b.hash_divergence_max {
        let corrupt = s
            .chaos
            .as_ref()
            .is_some_and(|c| c.fault == FaultKind::Corrupt);
        if !corrupt {
            err(
                "bounds.hashDivergenceMax",
                "applies only with chaos.fault: corrupt (only a corrupted member may hold \
                 a differing KV hash); remove it"
                    .into(),
            );
        } else if window.get() == Duration::ZERO {
            err(
                "bounds.hashDivergenceMax",
                "must be more than 0s (remove it to require equal hashes at every checkpoint)"
                    .into(),
            );
        }
    }
    if let Some(sb) = &s.standby {
        standby::check(s, sb, &mut err);
    }
    standby::check_loss(s, &mut err);
    if b.max_loss_window.is_some() && b.data_loss != DataLoss::SinceBackup {
        err(
            "bounds.maxLossWindow",
            "needs bounds.dataLoss: sinceBackup (with no data loss accepted there is no window: \
             every acknowledged write must survive)"
                .into(),
        );
    }
    if b.data_loss == DataLoss::SinceBackup && s.cluster.spec.backup.is_none() {
        err(
            "bounds.dataLoss",
            "sinceBackup needs cluster.backup: without backups there is nothing to restore".into(),
        );
    }
    // Every other duration is bounded as the run is (`settle: 2562048h`
    // would keep a run waiting for ever).
    let chaos = s.chaos.as_ref();
    let durations = [
        ("settle", Some(s.settle)),
        ("load.timeout", Some(l.timeout)),
        ("chaos.killInterval", chaos.map(|c| Dur(c.kill_interval))),
        ("chaos.pauseFor", chaos.and_then(|c| c.pause_for.map(Dur))),
        ("chaos.minAge", chaos.map(|c| Dur(c.min_age))),
        ("chaos.jitter", chaos.map(|c| Dur(c.jitter))),
        ("chaos.faultFor", chaos.and_then(|c| c.fault_for.map(Dur))),
        ("chaos.latency", chaos.and_then(|c| c.latency.map(Dur))),
        (
            "chaos.latencyJitter",
            chaos.and_then(|c| c.latency_jitter.map(Dur)),
        ),
        ("probe.checkpointInterval", Some(pr.checkpoint_interval)),
        ("bounds.recoveryP99", Some(b.recovery_p99)),
        ("bounds.recoveryMax", Some(b.recovery_max)),
        ("bounds.maxBackupAge", b.max_backup_age),
        ("bounds.maxChainAge", b.max_chain_age),
        ("bounds.maxLossWindow", b.max_loss_window),
        ("bounds.hashDivergenceMax", b.hash_divergence_max),
        (
            "standby.losePrimaryAt",
            s.standby.as_ref().and_then(|sb| sb.lose_primary_at),
        ),
    ];
    for (field, d) in durations {
        if let Some(d) = d.filter(|d| d.get() > week) {
            err(field, format!("must be at most 168h (a week), got {d}"));
        }
    }
    if p.is_empty() { Ok(()) } else { Err(p) }
}

/// The scenario's name of a chaos-monkey flag: `--fault-for` is
/// `chaos.faultFor`.
fn chaos_field(flag: &str) -> String {
    let mut out = String::from("chaos.");
    let mut upper = false;
    for ch in flag.trim_start_matches('-').chars() {
        if ch == '-' {
            upper = true;
        } else if upper {
            out.extend(ch.to_uppercase());
            upper = false;
        } else {
            out.push(ch);
        }
    }
    out
}

/// The most writers (or readers) a scenario may run: each is a task with
/// its own connection (100000000 was accepted).
pub const MAX_CLIENTS: u32 = 10_000;
