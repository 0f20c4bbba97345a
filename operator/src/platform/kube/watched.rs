//! A cluster's pods and claims, listed again only when they may have
//! changed.
//!
//! Every pass observes the members, and on Kubernetes that was two lists
//! (pods, claims) per pass: most of what an idle cluster cost the API
//! server. The controller already watches every pod and claim the operator
//! manages, to be woken by their changes; it tells [`Watched`] of each
//! event before it wakes anyone, so the lists a pass read last are still
//! good when, since they were asked for:
//! * both watches have listed in full and not failed since (a watch that
//!   restarts or fails puts every list in doubt until it has listed
//!   again, or, after a failure it resumes from (kube's watcher watches
//!   again from the last version it got, losing nothing), until it
//!   delivers a change: an idle namespace's passes list meanwhile),
//! * no pod or claim of the namespace changed (a change of any is
//!   counted for all the namespace's clusters: simpler than telling
//!   whose a relabelled object was, and an idle namespace costs nothing
//!   either way),
//! * this platform wrote no member pod or claim (its own writes come
//!   back as events too, but later, and the pass after a write must see
//!   it: counted once the write returned),
//! * and they are younger than [`LIST_BACKSTOP`] (should a watch stall
//!   without an error).
//!
//! A change whose event is still on its way when a pass reuses a list is
//! seen by the pass that event wakes. Without a [`Watched`] (tests that
//! drive the platform alone, tools) every pass lists.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::Resource;
use kube::api::ListParams;
use kube::runtime::watcher;

use super::Error;
use super::members::owned_by;
use super::objects::cluster_selector;

/// Lists older than this are read again, whatever the watches said.
pub const LIST_BACKSTOP: Duration = Duration::from_secs(300);

/// One of the controller's watches the lists depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watch {
    /// Pods with the operator's `managed-by` label.
    Pods,
    /// Volume claims with it.
    Claims,
}

/// What the controller's watches have said, shared by the controller and
/// every namespace's platform.
#[derive(Debug, Default)]
pub struct Watched {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Per watch: listed in full since it last (re)started, no error since.
    synced: [bool; 2],
    /// Bumped when a watch restarts, fails or has listed again.
    epoch: u64,
    /// Changes seen per namespace.
    changes: HashMap<String, u64>,
}

impl Watched {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes in one item of `watch`'s stream (before it wakes anyone).
    pub fn saw<K: Resource>(&self, watch: Watch, item: &Result<watcher::Event<K>, watcher::Error>) {
        let i = watch as usize;
        let mut s = self.state();
        match item {
            Ok(watcher::Event::Init) | Err(_) => {
                s.synced[i] = false;
                s.epoch += 1;
            }
            Ok(watcher::Event::InitDone) => {
                s.synced[i] = true;
                s.epoch += 1;
            }
            Ok(watcher::Event::InitApply(o)) => {
                let ns = o.meta().namespace.clone().unwrap_or_default();
                *s.changes.entry(ns).or_default() += 1;
            }
            Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o)) => {
                // Delivered by a watch that runs: past its list, or
                // resumed after a failure from the last version it had.
                if !s.synced[i] {
                    s.synced[i] = true;
                    s.epoch += 1;
                }
                let ns = o.meta().namespace.clone().unwrap_or_default();
                *s.changes.entry(ns).or_default() += 1;
            }
        }
    }

    /// Where things stand for `namespace`; `None` while a watch is not
    /// synced (nothing can be reused then).
    fn stamp(&self, namespace: &str) -> Option<(u64, u64)> {
        let s = self.state();
        let changes = s.changes.get(namespace).copied().unwrap_or(0);
        s.synced.iter().all(|&b| b).then_some((s.epoch, changes))
    }
}

/// The lists last read, per cluster (all of the cluster's labelled pods
/// and claims, whoever owns them).
#[derive(Debug, Default)]
pub struct Lists {
    watched: Option<std::sync::Arc<Watched>>,
    writes: AtomicU64,
    kept: Mutex<HashMap<String, Kept>>,
}

#[derive(Debug)]
struct Kept {
    stamp: Stamp,
    at: Instant,
    pods: Vec<Pod>,
    claims: Vec<PersistentVolumeClaim>,
}

/// Where the watches and this platform's writes stood when a list was
/// asked for: equal stamps, nothing changed in between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    epoch: u64,
    changes: u64,
    writes: u64,
}

impl Lists {
    /// Lists that follow `watched`.
    pub fn watched(watched: std::sync::Arc<Watched>) -> Self {
        Lists {
            watched: Some(watched),
            ..Lists::default()
        }
    }

    /// This platform wrote an object of kind `K` (pods and claims count).
    pub fn wrote<K: Resource<DynamicType = ()>>(&self) {
        if matches!(&*K::kind(&()), "Pod" | "PersistentVolumeClaim") {
            self.writes.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Where things stand now for `namespace` (take it before listing).
    pub fn stamp(&self, namespace: &str) -> Option<Stamp> {
        let (epoch, changes) = self.watched.as_ref()?.stamp(namespace)?;
        Some(Stamp {
            epoch,
            changes,
            writes: self.writes.load(Ordering::SeqCst),
        })
    }

    /// The lists kept for `cluster`, if nothing changed since `stamp`
    /// was taken for them.
    pub fn reuse(
        &self,
        cluster: &str,
        stamp: Option<Stamp>,
    ) -> Option<(Vec<Pod>, Vec<PersistentVolumeClaim>)> {
        let stamp = stamp?;
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let k = kept.get(cluster)?;
        (k.stamp == stamp && k.at.elapsed() < LIST_BACKSTOP)
            .then(|| (k.pods.clone(), k.claims.clone()))
    }

    /// Keeps the lists read for `cluster` with the stamp taken before
    /// they were asked for (none: nothing kept).
    pub fn keep(
        &self,
        cluster: &str,
        stamp: Option<Stamp>,
        pods: &[Pod],
        claims: &[PersistentVolumeClaim],
    ) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        match stamp {
            Some(stamp) => {
                let k = Kept {
                    stamp,
                    at: Instant::now(),
                    pods: pods.to_vec(),
                    claims: claims.to_vec(),
                };
                kept.insert(cluster.to_string(), k);
            }
            None => {
                kept.remove(cluster);
            }
        }
    }

    /// Forgets what was kept for `cluster`.
    pub fn forget(&self, cluster: &str) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.remove(cluster);
    }
}

impl super::KubePlatform {
    /// The pods and claims of `cluster` that its resource owns, as listed
    /// last while nothing changed since (see above).
    pub(super) async fn owned_now(
        &self,
        cluster: &str,
        uid: &str,
    ) -> Result<(Vec<Pod>, Vec<PersistentVolumeClaim>), Error> {
        let stamp = self.lists.stamp(&self.namespace);
        let (pods, claims) = match self.lists.reuse(cluster, stamp) {
            Some(kept) => kept,
            None => {
                let listed = self.listed(cluster).await?;
                self.lists.keep(cluster, stamp, &listed.0, &listed.1);
                listed
            }
        };
        let pods = pods.into_iter().filter(|p| owned_by(&p.metadata, uid));
        let claims = claims.into_iter().filter(|c| owned_by(&c.metadata, uid));
        Ok((pods.collect(), claims.collect()))
    }

    /// The pods and claims of `cluster` that its resource owns, listed.
    pub(super) async fn owned(
        &self,
        cluster: &str,
        uid: &str,
    ) -> Result<(Vec<Pod>, Vec<PersistentVolumeClaim>), Error> {
        let (pods, claims) = self.listed(cluster).await?;
        let pods = pods.into_iter().filter(|p| owned_by(&p.metadata, uid));
        let claims = claims.into_iter().filter(|c| owned_by(&c.metadata, uid));
        Ok((pods.collect(), claims.collect()))
    }

    /// Every pod and claim with `cluster`'s labels.
    async fn listed(&self, cluster: &str) -> Result<(Vec<Pod>, Vec<PersistentVolumeClaim>), Error> {
        let lp = ListParams::default().labels(&cluster_selector(cluster));
        let ns = &self.namespace;
        let pods = self
            .api::<Pod>()
            .list(&lp)
            .await
            .map_err(Error::api(format!(
                "cannot list the pods of {cluster} in {ns}"
            )))?;
        let claims = self
            .api::<PersistentVolumeClaim>()
            .list(&lp)
            .await
            .map_err(Error::api(format!(
                "cannot list the volume claims of {cluster} in {ns}"
            )))?;
        Ok((pods.items, claims.items))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
    use kube::api::ObjectMeta;
    use kube::runtime::watcher::{self, Event};

    use super::{Lists, Watch, Watched};

    fn pod(ns: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("demo-0".into()),
                namespace: Some(ns.into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    fn saw(w: &Watched, watch: Watch, e: Event<Pod>) {
        w.saw(watch, &Ok(e));
    }

    /// Both watches listed in full.
    fn synced() -> Arc<Watched> {
        let w = Arc::new(Watched::default());
        for watch in [Watch::Pods, Watch::Claims] {
            saw(&w, watch, Event::Init);
            saw(&w, watch, Event::InitApply(pod("default")));
            saw(&w, watch, Event::InitDone);
        }
        w
    }

    /// Whether a list kept now for `demo` in `default` is reused after `then`.
    fn reused_after(w: &Arc<Watched>, then: impl FnOnce(&Watched, &Lists)) -> bool {
        let lists = Lists::watched(w.clone());
        let stamp = lists.stamp("default");
        assert!(stamp.is_some(), "synced");
        lists.keep("demo", stamp, &[pod("default")], &[]);
        then(w, &lists);
        lists.reuse("demo", lists.stamp("default")).is_some()
    }

    #[test]
    fn a_list_is_reused_only_while_nothing_changed() {
        let w = synced();
        assert!(reused_after(&w, |_, _| {}), "nothing changed");
        assert!(!reused_after(&w, |w, _| saw(
            w,
            Watch::Pods,
            Event::Apply(pod("default"))
        )));
        assert!(!reused_after(&w, |w, _| saw(
            w,
            Watch::Claims,
            Event::Delete(pod("default"))
        )));
        assert!(!reused_after(&w, |_, l| l.wrote::<Pod>()), "its own write");
        assert!(!reused_after(&w, |_, l| l.wrote::<PersistentVolumeClaim>()));
        assert!(!reused_after(&w, |_, l| l.forget("demo")));
        // Another namespace's change, or a write of another kind, is not one.
        assert!(reused_after(&w, |w, _| saw(
            w,
            Watch::Pods,
            Event::Apply(pod("other"))
        )));
        assert!(reused_after(&w, |_, l| l.wrote::<k8s_openapi::api::core::v1::Secret>()));
    }

    #[test]
    fn nothing_is_reused_without_watches_or_while_one_is_not_synced() {
        let lists = Lists::default();
        assert_eq!(lists.stamp("default"), None, "no watches: every pass lists");
        let w = Arc::new(Watched::default());
        saw(&w, Watch::Pods, Event::Init);
        saw(&w, Watch::Pods, Event::InitDone);
        assert_eq!(
            Lists::watched(w.clone()).stamp("default"),
            None,
            "claims not listed"
        );
        let w = synced();
        assert!(
            !reused_after(&w, |w, _| saw(w, Watch::Pods, Event::Init)),
            "re-listing"
        );
        assert_eq!(Lists::watched(w.clone()).stamp("default"), None);
        saw(&w, Watch::Pods, Event::InitDone);
        assert!(Lists::watched(w).stamp("default").is_some());
    }

    #[test]
    fn a_failed_watch_counts_again_once_it_delivers() {
        let w = synced();
        let failed = |w: &Watched| {
            let e = watcher::Error::NoResourceVersion;
            w.saw::<Pod>(Watch::Claims, &Err(e));
        };
        assert!(!reused_after(&w, |w, _| failed(w)));
        assert_eq!(Lists::watched(w.clone()).stamp("default"), None, "failed");
        // Resumed from the last version it had: its next change shows it runs.
        saw(&w, Watch::Claims, Event::Apply(pod("default")));
        assert!(Lists::watched(w.clone()).stamp("default").is_some());
        assert!(reused_after(&w, |_, _| {}));
    }
}
