//! A tiny deterministic random number generator (SplitMix64).
//!
//! The monkey's choices must be a pure function of the seed and the tick
//! number, stable across runs, machines and crate upgrades, so it uses its
//! own generator instead of one whose output may change between releases.
//! Each tick gets independent streams (whether it fires, its jitter, its
//! victims), so changing `--probability` or `--jitter` does not change which
//! members a given tick picks.

/// What a random stream is used for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// Whether a tick fires (`--probability`).
    Fire,
    /// A tick's extra delay (`--jitter`).
    Jitter,
    /// A tick's victims.
    Victims,
    /// The members that join a victim on its side of a `--split`.
    Split,
    /// Where a `corrupt` fault flips bytes.
    Damage,
}

impl Stream {
    fn key(self) -> u64 {
        match self {
            Stream::Fire => 0x6669_7265,
            Stream::Jitter => 0x6a69_7474,
            Stream::Victims => 0x7669_6374,
            Stream::Split => 0x7370_6c69,
            Stream::Damage => 0x6461_6d61,
        }
    }
}

/// SplitMix64: fast, statistically good enough for picking victims, and
/// fully specified by its seed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    state: u64,
}

const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// The generator of one stream of one tick.
    pub fn for_tick(seed: u64, tick: u64, stream: Stream) -> Self {
        let s = mix(mix(seed.wrapping_add(GAMMA)) ^ stream.key());
        Rng::new(mix(s ^ tick.wrapping_mul(GAMMA)))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        mix(self.state)
    }

    /// A uniform number in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        // 53 random bits: every value is exactly representable.
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A uniform index in `0..n` (0 when `n` is 0), without modulo bias.
    pub fn below(&mut self, n: usize) -> usize {
        let n = n as u64;
        if n <= 1 {
            return 0;
        }
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let v = self.next_u64();
            if v < zone {
                return usize::try_from(v % n).unwrap_or(0);
            }
        }
    }

    /// `k` distinct indices out of `0..n` in random order (all of them when
    /// `k >= n`): a partial Fisher-Yates shuffle.
    pub fn sample(&mut self, n: usize, k: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..n).collect();
        let k = k.min(n);
        for i in 0..k {
            let j = i + self.below(n - i);
            all.swap(i, j);
        }
        all.truncate(k);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::{Rng, Stream};
    use proptest::prelude::{prop_assert, prop_assert_eq, proptest};

    #[test]
    fn known_values_never_change() {
        // Pinned: a change here breaks `--seed` replays of older runs.
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn streams_and_ticks_differ() {
        let a = Rng::for_tick(1, 0, Stream::Victims).next_u64();
        let b = Rng::for_tick(1, 1, Stream::Victims).next_u64();
        let c = Rng::for_tick(1, 0, Stream::Fire).next_u64();
        let d = Rng::for_tick(2, 0, Stream::Victims).next_u64();
        assert!(a != b && a != c && a != d, "{a} {b} {c} {d}");
    }

    proptest! {
        #[test]
        fn below_is_in_range(seed: u64, n in 0usize..1000) {
            let mut r = Rng::new(seed);
            let v = r.below(n);
            prop_assert!(v < n.max(1));
        }

        #[test]
        fn unit_is_in_range(seed: u64) {
            let u = Rng::new(seed).unit();
            prop_assert!((0.0..1.0).contains(&u));
        }

        #[test]
        fn sample_is_distinct_and_in_range(seed: u64, n in 0usize..50, k in 0usize..60) {
            let s = Rng::new(seed).sample(n, k);
            prop_assert_eq!(s.len(), k.min(n));
            let mut sorted = s.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), s.len());
            prop_assert!(s.iter().all(|&i| i < n));
        }
    }
}
