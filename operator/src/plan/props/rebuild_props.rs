//! The properties of rebuilding a cluster that lost a majority for good,
//! driven through the whole plan with [`super::rules::converge`] (every
//! step checked by the rules, [`super::rebuild::check_rebuild`] among them).

use proptest::prelude::*;

use super::rules::{converge, desired};
use super::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// A majority lost for good with some members running with their
    /// data: never rebuilt while a survivor is paused (it may be ahead, and
    /// paused members may bring quorum back), survivors merely stopped are
    /// restarted first, and once every survivor answers the cluster is
    /// rebuilt from the most advanced one and converges to the spec with
    /// nothing lost that a survivor held.
    #[test]
    fn a_lost_majority_is_rebuilt_from_the_most_advanced_survivor(
        (size, lost, positions, paused, stopped) in (3usize..=9).prop_flat_map(|size| (
            Just(size),
            prop::sample::subsequence((0..size).collect::<Vec<_>>(), (size - quorum(size) + 1)..size),
            prop::collection::vec(0u64..20, size),
            prop::collection::vec(any::<bool>(), size),
            prop::collection::vec(any::<bool>(), size),
        )),
        with_backup in any::<bool>(),
    ) {
        let mut d = desired(size, V34, StoragePolicy::Persistent);
        let mut model = Model::new(StoragePolicy::Persistent);
        converge(&mut model, &d).map_err(TestCaseError::fail)?;
        for (i, m) in model.members.iter_mut().enumerate() {
            m.pos = positions[i];
            if lost.contains(&i) {
                m.running = false;
                m.has_data = false;
            } else if stopped[i] {
                m.running = false;
            } else if paused[i] {
                m.hung = true;
            }
        }
        let best = model
            .members
            .iter()
            .filter(|m| m.has_data)
            .map(|m| m.pos)
            .max()
            .unwrap_or(0);
        d.from_survivor = true;
        d.restore_from_backup = with_backup;
        let last = converge(&mut model, &d).map_err(TestCaseError::fail)?;
        if model.members.iter().any(|m| m.hung) {
            // Paused survivors: never taken for lost, nothing rebuilt.
            prop_assert!(model.reseeded.is_none() && !model.restored, "{:?}", model);
            prop_assert!(matches!(
                last,
                Step::Wait(Wait::SurvivorSilent { .. } | Wait::Electing { .. })
            ), "{}", last);
            for m in &mut model.members {
                m.hung = false;
            }
        }
        let last = converge(&mut model, &d).map_err(TestCaseError::fail)?;
        prop_assert_eq!(&last, &Step::Converged, "model: {:?}", model);
        let (seed, at) = model.reseeded.clone().expect("rebuilt from a survivor");
        prop_assert_eq!(at, best, "seeded from {} at {}, best was {}", seed, at, best);
        prop_assert!(!model.restored);
        prop_assert_eq!(model.voters().count(), size);
        prop_assert!(model.reseeding.is_none());
    }

    /// Members that run but answer nothing (SIGSTOP, a partition) are
    /// never lost: with a minority destroyed and any number paused, no
    /// rebuild happens whatever the recovery flags, and once they resume
    /// the cluster converges without one.
    #[test]
    fn a_paused_majority_is_never_taken_for_lost(
        (size, destroyed, paused) in (3usize..=9).prop_flat_map(|size| (
            Just(size),
            prop::sample::subsequence((0..size).collect::<Vec<_>>(), 0..=(size - quorum(size))),
            prop::collection::vec(any::<bool>(), size),
        )),
        from_survivor in any::<bool>(),
        restore in any::<bool>(),
    ) {
        let mut d = desired(size, V34, StoragePolicy::Persistent);
        let mut model = Model::new(StoragePolicy::Persistent);
        converge(&mut model, &d).map_err(TestCaseError::fail)?;
        for (i, m) in model.members.iter_mut().enumerate() {
            if destroyed.contains(&i) {
                m.running = false;
                m.has_data = false;
            } else if paused[i] {
                m.hung = true;
            }
        }
        d.from_survivor = from_survivor;
        d.restore_from_backup = restore;
        converge(&mut model, &d).map_err(TestCaseError::fail)?;
        prop_assert!(model.reseeded.is_none() && !model.restored, "{:?}", model);
        for m in &mut model.members {
            m.hung = false;
        }
        let last = converge(&mut model, &d).map_err(TestCaseError::fail)?;
        prop_assert_eq!(&last, &Step::Converged, "model: {:?}", model);
        prop_assert!(model.reseeded.is_none() && !model.restored, "{:?}", model);
    }
}
