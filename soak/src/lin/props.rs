//! Property: a history generated from a sequential etcd with random
//! concurrency, lost answers and failed reads is always accepted.

use std::time::Duration;

use proptest::prelude::*;

use super::generate::{Spec, generate};
use super::{History, Options, check};

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn generated_histories_are_linearizable(
        seed in any::<u64>(),
        ops in 1usize..400,
        keys in 1u32..6,
        clients in 1u32..10,
        unknown in 0.0f64..0.3,
        max_latency in 1u64..2000,
    ) {
        let records = generate(&Spec { ops, keys, clients, unknown, max_latency, seed });
        let mut h = History::new();
        for r in &records {
            h.add(r).expect("valid");
        }
        h.patch(false);
        let r = check(&h, &Options { timeout: Duration::from_secs(60), ..Options::default() });
        prop_assert!(r.pass(), "{:#?}", r.findings);
    }
}
