//! Every setting etcd takes only at start is applied: for each such spec
//! field changed on its own, members restart one at a time until every
//! member runs it, and the plan never says converged while one does not.
//! A new field of [`crate::member::Settings`] is covered by the one
//! comparison the plan makes; this enumerates the ones there are.

use proptest::prelude::*;

use super::rules::{converge, desired};
use super::*;
use crate::crd::CompactionMode;
use crate::member::backend::Compaction;
use crate::member::{Backend, Tuning};

/// Each restart-requiring field, changed alone.
fn changed() -> impl Strategy<Value = (&'static str, Desired)> {
    let base = || desired(3, V34, StoragePolicy::Persistent);
    prop_oneof![
        Just((
            "spec.tuning",
            Desired {
                tuning: Tuning::new(Some(25), Some(250)),
                ..base()
            }
        )),
        Just(("spec.quotaBackendBytes", {
            let mut d = base();
            d.backend.quota_backend_bytes = Some(2 * QUOTA);
            d.db.quota = 2 * QUOTA;
            d
        })),
        Just(("spec.compaction", {
            let mut d = base();
            d.backend.compaction = Some(Compaction {
                mode: CompactionMode::Revision,
                retention: "1000".into(),
            });
            d
        })),
        Just(("spec.image.repository", {
            let mut d = base();
            d.pod.repository = Some("mirror.local/etcd".into());
            d
        })),
        Just(("spec.pod", {
            let mut d = base();
            d.pod.template = Some(Box::new(crate::crd::MemberPodSpec {
                priority_class_name: Some("etcd-critical".into()),
                ..Default::default()
            }));
            d
        })),
        Just((
            "spec.version",
            Desired {
                version: V35,
                ..base()
            }
        )),
    ]
}

proptest! {
    #[test]
    fn every_restart_requiring_field_is_applied_to_every_member(
        (field, d) in changed(),
        size in 3usize..=5,
    ) {
        let mut base = desired(size, V34, StoragePolicy::Persistent);
        let mut model = Model::new(StoragePolicy::Persistent);
        prop_assert_eq!(converge(&mut model, &base).map_err(TestCaseError::fail)?, Step::Converged);
        base = Desired { size, ..d };
        let wanted = base.settings();
        for _ in 0..100 {
            model.pods_ready();
            let obs = model.observe();
            let step = plan(&base, &obs);
            let outdated = obs
                .members
                .iter()
                .filter_map(|m| m.platform.as_ref())
                .any(|p| p.settings() != wanted);
            prop_assert!(
                !(outdated && step == Step::Converged),
                "converged while a member runs an outdated {}", field
            );
            if let Step::Restart { why: RestartWhy::Settings { changed }, .. } = &step {
                prop_assert_eq!(changed, &vec![field], "the restart names the changed field");
            }
            if matches!(step, Step::Converged | Step::Wait(_)) {
                break;
            }
            model.apply(&base, &step);
        }
        prop_assert_eq!(plan(&base, &model.observe()), Step::Converged);
        let backends: Vec<&Backend> = model.members.iter().map(|m| &m.backend).collect();
        prop_assert!(backends.iter().all(|b| **b == base.backend), "{} not applied: {:?}", field, backends);
        prop_assert!(model.members.iter().all(|m| m.tuning == base.tuning && m.version == base.version));
        prop_assert!(model.members.iter().all(|m| m.pod == base.pod), "{} not applied", field);
    }
}
