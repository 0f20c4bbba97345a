//! The `elections` section: new leaders (raft terms) per minute on a
//! settled cluster, idle and with every core busy plus writes.

use std::time::Duration;

use etcd_operator::testing::client_urls;
use etcd_operator::testing::writer::{TermWatch, Writer};

use super::{operator_env, tuned};

/// Busy loops on every core until `stop`.
fn burn(stop: &std::sync::Arc<std::sync::atomic::AtomicBool>) -> Vec<std::thread::JoinHandle<()>> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (0..cores)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    std::hint::black_box(x);
                }
            })
        })
        .collect()
}

/// New raft terms per minute on a settled cluster with `tuning`, idle and
/// under load (every core busy and a writer).
pub fn spurious_elections(tuning: Option<(u32, u32)>, window: Duration) -> (usize, usize) {
    let mut env = operator_env(true);
    env.write_manifest("e.yaml", &tuned("e", 3, "3.4.23", tuning));
    env.start_operator();
    let urls = client_urls(&env.wait_running("e", 3));
    let mut out = Vec::new();
    for loaded in [false, true] {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watch = TermWatch::start(urls.clone());
        let (burners, writer) = if loaded {
            (burn(&stop), Some(Writer::start(urls.clone())))
        } else {
            (Vec::new(), None)
        };
        std::thread::sleep(window);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for b in burners {
            let _ = b.join();
        }
        drop(writer);
        out.push(watch.stop().len().saturating_sub(1));
    }
    (out[0], out[1])
}
