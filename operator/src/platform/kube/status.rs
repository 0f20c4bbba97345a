//! Writing a cluster's status to its resource's status subresource, and
//! when.
//!
//! The controller hands over the status it builds every few seconds
//! ([`crate::controller`] rewrites it at least every 5 s for its
//! `observedAt`). On Kubernetes each write is a request to the API server
//! and a change every watcher of the resource hears (the operator's own
//! included), so a status that says what the last one said, apart from
//! `observedAt`, is written again only after [`STATUS_REWRITE`]: an idle
//! cluster costs the API server a few writes a minute. A status that says
//! anything new (phase, a condition, a member, the generation it
//! observed) is written at once. `observedAt` stays fresh enough for its
//! readers: at most [`STATUS_REWRITE`] plus a pass (5 s) old, within the
//! 30 s `kubectl etcd status` and the chaos monkey allow.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::api::Patch;

use super::{Error, KubePlatform};
use crate::crd::{EtcdCluster, EtcdClusterStatus};

/// A status that only moved its `observedAt` is written again this often.
pub const STATUS_REWRITE: Duration = Duration::from_secs(15);

/// The status last written per resource (cluster name and uid), with when.
#[derive(Debug, Default)]
pub struct Written(Mutex<HashMap<(String, String), (EtcdClusterStatus, Instant)>>);

impl Written {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(String, String), (EtcdClusterStatus, Instant)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets what was written for `cluster` (any uid).
    pub fn forget(&self, cluster: &str) {
        self.lock().retain(|(name, _), _| name != cluster);
    }
}

/// Whether `new` must be written when `written` was (and when), at `now`.
pub fn due(
    written: Option<&(EtcdClusterStatus, Instant)>,
    new: &EtcdClusterStatus,
    now: Instant,
) -> bool {
    let Some((old, at)) = written else {
        return true;
    };
    let strip = |s: &EtcdClusterStatus| EtcdClusterStatus {
        observed_at: None,
        ..s.clone()
    };
    now.duration_since(*at) >= STATUS_REWRITE || strip(old) != strip(new)
}

impl KubePlatform {
    /// Applies `resource`'s status to the resource named `name`, when it
    /// is due ([`due`]).
    pub(super) async fn status(&self, name: &str, resource: &EtcdCluster) -> Result<(), Error> {
        let mut status = resource.status.clone().unwrap_or_default();
        // The resource's own generation, as kubectl users expect (the
        // record counts spec changes its own way).
        if let Some(g) = resource.metadata.generation {
            status.observed_generation = Some(g);
        }
        let key = (
            name.to_string(),
            resource.metadata.uid.clone().unwrap_or_default(),
        );
        let now = Instant::now();
        if !due(self.written.lock().get(&key), &status, now) {
            return Ok(());
        }
        let patch = serde_json::json!({
            "apiVersion": crate::crd::API_VERSION,
            "kind": crate::crd::KIND,
            "status": status,
        });
        crate::fence::check()?;
        let done = self
            .api::<EtcdCluster>()
            .patch_status(name, &Self::apply_params(), &Patch::Apply(&patch))
            .await;
        let mut written = self.written.lock();
        match done {
            Ok(_) => {
                written.insert(key, (status, now));
                Ok(())
            }
            Err(e) => {
                // Whatever the resource holds now, the next one is written.
                written.remove(&key);
                Err(Error::api(format!("cannot apply the status of {name}"))(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::Phase;

    fn status(phase: Phase, observed_at: &str) -> EtcdClusterStatus {
        EtcdClusterStatus {
            phase,
            observed_at: Some(observed_at.into()),
            observed_generation: Some(1),
            ..EtcdClusterStatus::default()
        }
    }

    #[test]
    fn the_same_status_is_written_again_only_after_the_rewrite_interval() {
        let t0 = Instant::now();
        let first = status(Phase::Running, "2026-12-06T05:00:00.000Z");
        assert!(due(None, &first, t0), "never written");
        let written = (first, t0);
        let later = status(Phase::Running, "2026-12-06T05:00:05.000Z");
        let soon = t0 + Duration::from_secs(5);
        assert!(!due(Some(&written), &later, soon), "only observedAt moved");
        assert!(due(Some(&written), &later, t0 + STATUS_REWRITE));
    }

    #[test]
    fn a_new_phase_or_generation_is_written_at_once() {
        let t0 = Instant::now();
        let written = (status(Phase::Running, "2026-12-06T05:00:00.000Z"), t0);
        let soon = t0 + Duration::from_millis(10);
        let degraded = status(Phase::Degraded, "2026-12-06T05:00:00.000Z");
        assert!(due(Some(&written), &degraded, soon));
        let mut newer = status(Phase::Running, "2026-12-06T05:00:00.000Z");
        newer.observed_generation = Some(2);
        assert!(due(Some(&written), &newer, soon));
    }
}
