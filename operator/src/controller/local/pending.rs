//! Deletions waiting out `--delete-grace`. A cluster no manifest names any
//! more (the folder guard letting it go, [`super::folder`]) keeps running
//! as its last manifest said until the grace is over: an editor that saves
//! by deleting and writing again, or a config-management tool that
//! rewrites the folder, brings the manifest back before then, which
//! cancels the deletion (the cluster was never stopped, its data never
//! moved). A deletion asked for by name (`etcd-operator delete NAME`)
//! waits for no grace.
//!
//! While a deletion is pending the running operator's answer to `status`
//! carries the condition [`CONDITION`] on the cluster, saying since when
//! and when the deletion takes effect.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::crd::{Condition, EtcdCluster};

/// The condition a cluster whose deletion is pending carries.
pub const CONDITION: &str = "DeletionPending";
/// `--delete-grace` when not set.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// The pending deletions' conditions by cluster, for the live answer
/// ([`crate::controller::live`]).
pub type Shown = Arc<Mutex<BTreeMap<String, Condition>>>;

/// Since when a cluster's manifest is gone.
#[derive(Clone, Copy, Debug)]
struct Since {
    at: Instant,
    wall: SystemTime,
}

/// What one scan changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// Clusters to delete now: their grace is over, or a user asked.
    pub due: Vec<String>,
    /// Clusters whose grace began, with when it ends.
    pub started: Vec<(String, SystemTime)>,
    /// Clusters whose deletion no longer stands (a manifest names them
    /// again, or the folder guard holds them).
    pub cancelled: Vec<String>,
}

/// The deletions waiting out their grace.
#[derive(Debug)]
pub struct Deletions {
    grace: Duration,
    pending: BTreeMap<String, Since>,
    shown: Shown,
}

impl Deletions {
    /// No deletion pending; each will wait `grace`.
    pub fn new(grace: Duration) -> Self {
        Deletions {
            grace,
            pending: BTreeMap::new(),
            shown: Shown::default(),
        }
    }

    /// The conditions of the pending deletions, kept up to date.
    pub fn shown(&self) -> Shown {
        self.shown.clone()
    }

    /// One scan at `now` (`wall` on the clock): `missing` are the clusters
    /// the folder guard lets go (no manifest names them), `requested` those
    /// a user asked to delete by name. Starts the grace of newly missing
    /// ones, cancels those no longer missing, and returns which are due.
    pub fn step(
        &mut self,
        missing: &[String],
        requested: &HashSet<String>,
        now: Instant,
        wall: SystemTime,
    ) -> Step {
        let mut step = Step::default();
        let gone: Vec<String> = self
            .pending
            .keys()
            .filter(|n| !missing.contains(n))
            .cloned()
            .collect();
        for name in gone {
            self.pending.remove(&name);
            step.cancelled.push(name);
        }
        for name in missing {
            let since = *self.pending.entry(name.clone()).or_insert_with(|| {
                step.started.push((name.clone(), wall + self.grace));
                Since { at: now, wall }
            });
            if requested.contains(name) || now.saturating_duration_since(since.at) >= self.grace {
                step.due.push(name.clone());
            }
        }
        for name in &step.due {
            self.pending.remove(name);
        }
        // Due at once (a zero grace, a request): never pending.
        step.started.retain(|(n, _)| !step.due.contains(n));
        self.publish();
        step
    }

    /// When the next grace is over, if any runs.
    pub fn next(&self) -> Option<Instant> {
        self.pending.values().map(|s| s.at + self.grace).min()
    }

    fn publish(&self) {
        let conditions = self
            .pending
            .iter()
            .map(|(name, since)| (name.clone(), condition(name, since.wall, self.grace)))
            .collect();
        *self.shown.lock().unwrap_or_else(|e| e.into_inner()) = conditions;
    }
}

/// The condition of cluster `name`, whose manifest is gone since `since`.
pub fn condition(name: &str, since: SystemTime, grace: Duration) -> Condition {
    let time = |t: SystemTime| humantime::format_rfc3339_seconds(t).to_string();
    Condition {
        type_: CONDITION.into(),
        status: "True".into(),
        reason: "ManifestGone".into(),
        message: format!(
            "no manifest names {name} since {}: it is deleted at {} (run --delete-grace {}), its \
             members stopped and its folder kept aside, unless a manifest names it again before \
             then; it keeps running meanwhile",
            time(since),
            time(since + grace),
            humantime::format_duration(grace)
        ),
        last_transition_time: Some(time(since)),
    }
}

/// `resource` with the condition of its pending deletion, if it has one
/// (replacing an older one).
pub fn decorate(resource: &mut EtcdCluster, shown: &BTreeMap<String, Condition>) {
    let Some(c) = resource.metadata.name.as_ref().and_then(|n| shown.get(n)) else {
        return;
    };
    if let Some(status) = resource.status.as_mut() {
        status.conditions.retain(|old| old.type_ != CONDITION);
        status.conditions.push(c.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_manifest_back_within_the_grace_cancels_the_deletion() {
        let grace = Duration::from_secs(10);
        let mut d = Deletions::new(grace);
        let (t0, w0) = (Instant::now(), SystemTime::UNIX_EPOCH);
        let none = HashSet::new();
        let s = d.step(&names(&["a"]), &none, t0, w0);
        assert!(s.due.is_empty(), "{s:?}");
        assert_eq!(s.started, vec![("a".to_string(), w0 + grace)]);
        assert_eq!(d.next(), Some(t0 + grace));
        let shown = d.shown();
        let c = shown
            .lock()
            .expect("lock")
            .get("a")
            .cloned()
            .expect("shown");
        assert!(
            c.message.contains("deleted at 1970-01-01T00:00:10Z")
                && c.message.contains("--delete-grace 10s"),
            "{c:?}"
        );
        // Still gone just before the end: still pending.
        let s = d.step(
            &names(&["a"]),
            &none,
            t0 + grace - Duration::from_millis(1),
            w0,
        );
        assert_eq!(s, Step::default());
        // Back: cancelled, nothing shown, nothing due.
        let s = d.step(&[], &none, t0 + grace, w0);
        assert_eq!(s.cancelled, names(&["a"]));
        assert!(s.due.is_empty());
        assert!(shown.lock().expect("lock").is_empty());
        assert_eq!(d.next(), None);
        // Gone again: a new grace, from then.
        let later = t0 + 3 * grace;
        d.step(&names(&["a"]), &none, later, w0);
        assert_eq!(d.next(), Some(later + grace));
    }

    #[test]
    fn a_deletion_is_due_after_the_grace_or_when_asked() {
        let grace = Duration::from_secs(10);
        let mut d = Deletions::new(grace);
        let (t0, w0) = (Instant::now(), SystemTime::now());
        let none = HashSet::new();
        d.step(&names(&["a", "b"]), &none, t0, w0);
        let asked: HashSet<String> = names(&["b"]).into_iter().collect();
        let s = d.step(&names(&["a", "b"]), &asked, t0 + Duration::from_secs(1), w0);
        assert_eq!(s.due, names(&["b"]), "asked by name: no grace");
        let s = d.step(&names(&["a"]), &none, t0 + grace, w0);
        assert_eq!(s.due, names(&["a"]));
        assert_eq!(d.next(), None);
        // No grace at all: due at the first scan, never shown as pending.
        let mut d = Deletions::new(Duration::ZERO);
        let s = d.step(&names(&["c"]), &none, t0, w0);
        assert_eq!((s.due, s.started), (names(&["c"]), Vec::new()));
        assert!(d.shown().lock().expect("lock").is_empty());
    }

    #[test]
    fn the_condition_goes_on_the_named_cluster_only() {
        let grace = Duration::from_secs(10);
        let mut shown = BTreeMap::new();
        shown.insert(
            "a".to_string(),
            condition("a", SystemTime::UNIX_EPOCH, grace),
        );
        let mut a = EtcdCluster::new("a", crate::crd::EtcdClusterSpec::minimal(1, "3.4.23"));
        a.status = Some(Default::default());
        let mut b = a.clone();
        b.metadata.name = Some("b".into());
        decorate(&mut a, &shown);
        decorate(&mut a, &shown);
        decorate(&mut b, &shown);
        let of = |c: &EtcdCluster| c.status.as_ref().map_or(0, |s| s.conditions.len());
        assert_eq!((of(&a), of(&b)), (1, 0));
    }
}
