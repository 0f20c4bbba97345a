//! Who a network fault cuts from whom: a pure function of the victims the
//! tick chose, the cluster's running members and, for `--split`, the seed
//! (which other members join the victim's side).
//!
//! Without `--split` each victim is cut from every other running member.
//! With it, the victim's side has `(N-1)/2` (minority) or `N/2+1`
//! (majority) of the cluster's N members, and every member of one side is
//! cut from every member of the other.

use crate::cli::Split;
use crate::rng::Rng;

/// The sides of a fault, as indexes of the cluster's members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cut {
    /// The members the fault is aimed at (the victim's side for a split).
    pub victims: Vec<usize>,
    /// Pairs whose traffic is cut or slowed, each once, `(a, b)` with `a`
    /// a victim.
    pub pairs: Vec<(usize, usize)>,
}

/// The cut for `picks` among `running` (both indexes of the cluster's
/// `size` members). `None` when nobody would be cut from anybody.
pub fn cut(
    picks: &[usize],
    running: &[usize],
    size: usize,
    split: Option<Split>,
    rng: &mut Rng,
) -> Option<Cut> {
    let victims: Vec<usize> = match split {
        None => picks.to_vec(),
        Some(s) => {
            let &first = picks.first()?;
            let want = match s {
                Split::Minority => (size.saturating_sub(1) / 2).max(1),
                Split::Majority => size / 2 + 1,
            };
            let others: Vec<usize> = running.iter().copied().filter(|&m| m != first).collect();
            let mut side = vec![first];
            for i in rng.sample(others.len(), want.saturating_sub(1)) {
                side.push(others[i]);
            }
            side.sort_unstable();
            side
        }
    };
    let mut pairs = Vec::new();
    for &v in &victims {
        for &o in running {
            if o == v || (split.is_some() && victims.contains(&o)) {
                continue;
            }
            if victims.contains(&o) && o < v {
                continue; // (o, v) is already there
            }
            pairs.push((v, o));
        }
    }
    (!pairs.is_empty()).then_some(Cut { victims, pairs })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{prop_assert, prop_assert_eq, proptest};

    #[test]
    fn one_victim_is_cut_from_everyone_else() {
        let c = cut(&[1], &[0, 1, 2], 3, None, &mut Rng::new(1)).expect("cut");
        assert_eq!(c.victims, [1]);
        assert_eq!(c.pairs, [(1, 0), (1, 2)]);
        // Two victims are cut from each other too, once.
        let c = cut(&[0, 3], &[0, 1, 2, 3, 4], 5, None, &mut Rng::new(1)).expect("cut");
        assert_eq!(
            c.pairs,
            [(0, 1), (0, 2), (0, 3), (0, 4), (3, 1), (3, 2), (3, 4)]
        );
        // Alone, nothing to cut.
        assert!(cut(&[0], &[0], 3, None, &mut Rng::new(1)).is_none());
    }

    #[test]
    fn splits_have_the_asked_sizes() {
        let c = cut(
            &[2],
            &[0, 1, 2, 3, 4],
            5,
            Some(Split::Minority),
            &mut Rng::new(9),
        )
        .expect("cut");
        assert_eq!(c.victims.len(), 2);
        assert!(c.victims.contains(&2));
        assert_eq!(c.pairs.len(), 2 * 3);
        let c = cut(&[2], &[0, 1, 2], 3, Some(Split::Majority), &mut Rng::new(9)).expect("cut");
        assert_eq!(c.victims.len(), 2);
        assert_eq!(c.pairs.len(), 2);
    }

    proptest! {
        #[test]
        fn sides_never_overlap_and_replay(seed: u64, size in 2usize..9, pick in 0usize..9, split in 0u8..3) {
            let pick = pick % size;
            let running: Vec<usize> = (0..size).collect();
            let split = [None, Some(Split::Minority), Some(Split::Majority)][usize::from(split)];
            let a = cut(&[pick], &running, size, split, &mut Rng::new(seed));
            let b = cut(&[pick], &running, size, split, &mut Rng::new(seed));
            prop_assert_eq!(&a, &b);
            if let Some(c) = a {
                prop_assert!(c.victims.contains(&pick));
                for (x, y) in &c.pairs {
                    prop_assert!(x != y);
                    prop_assert!(c.victims.contains(x));
                    if split.is_some() {
                        prop_assert!(!c.victims.contains(y));
                    }
                }
                if split == Some(Split::Majority) {
                    prop_assert!(c.victims.len() * 2 > size);
                }
                if split == Some(Split::Minority) && size >= 3 {
                    prop_assert!(c.victims.len() * 2 < size);
                }
            }
        }
    }
}
