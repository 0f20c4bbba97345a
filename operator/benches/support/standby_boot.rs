//! The bootstrap of a standby from a chain in a bucket (issue 36): a
//! 1-member standby of the chain's cluster declared, timed from its
//! manifest to `Following` at the chain's last revision: the source's
//! newest good full backup downloaded and checked, its segments replayed
//! (as a restore), the member started from the result, the applier
//! following. Beside the restore of the same chain in the same run (the
//! goal: as fast as a restore).

use std::time::{Duration, Instant};

use etcd_operator::backup::BackupMeta;
use etcd_operator::testing::{Env, manifest};

use super::bucket::InBucket;

/// Declares a standby of `base`'s cluster, whose chain ends at `last`, in
/// `bucket` with the operator of `env` (started again), and prints how
/// long it takes to follow, beside `restore` (the chain's restore, median
/// seconds).
pub fn run(env: &mut Env, bucket: &InBucket, (base, last): (&BackupMeta, i64), restore: f64) {
    env.start_operator();
    let mut m = manifest("tps", 1, "3.5.1");
    m.push_str("  quotaBackendBytes: 4294967296\n");
    m.push_str(&format!("  standby:\n    cluster: {}\n", base.cluster));
    m.push_str(&bucket.yaml());
    let t = Instant::now();
    env.write_manifest("tps.yaml", &m);
    let mut following = None;
    while t.elapsed() < Duration::from_secs(300) {
        let st = env.status("tps").and_then(|c| c.status);
        let s = st.as_ref().and_then(|s| s.standby.clone());
        if let Some(s) = s.filter(|s| s.state == "Following" && s.applied_revision >= last) {
            following = Some((t.elapsed(), s, st.and_then(|s| s.restore)));
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let Some((took, s, restored)) = following else {
        println!("standby bootstrap: not following within 300 s");
        return;
    };
    let from = restored.map_or_else(String::new, |r| {
        format!(
            " (from {}, {} segments replayed)",
            r.backup, r.replayed_segments
        )
    });
    println!(
        "standby bootstrap from the chain{from}: {:.2}s from its manifest to Following at \
         revision {} ({:.2}x the chain's restore, {restore:.2}s)",
        took.as_secs_f64(),
        s.applied_revision,
        took.as_secs_f64() / restore.max(1e-9)
    );
}
