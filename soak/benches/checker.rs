//! Benchmark of the linearizability checker: histories of 10k, 100k and
//! 1M operations over 1k keys, generated from a sequential etcd with 32
//! concurrent clients and 1% lost answers (`soak::lin::generate`), written
//! to a history.jsonl and checked from it as a run is: read and parsed,
//! then searched. Prints the time of each part and the peak heap memory;
//! never passes or fails on time (the target, 1M operations in under 60 s
//! on the 2-core CI machine, is read off the numbers).
//! `BENCH_SIZES=10000,100000` picks the sizes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use soak::lin::generate::{Spec, generate};
use soak::lin::{History, Options, check};

/// Counts heap bytes in use and their peak.
struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

#[allow(unsafe_code)]
// SAFETY: every call is passed on to the system allocator unchanged; only
// counters are updated beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = NOW.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        NOW.fetch_sub(l.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn main() {
    let sizes: Vec<usize> = std::env::var("BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![10_000, 100_000, 1_000_000]);
    let dir = tempfile::tempdir().expect("a temporary folder");
    println!(
        "linearizability checker: 1k keys, 32 clients, 1% lost answers, {} threads",
        Options::default().threads
    );
    println!(
        "{:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>8}",
        "ops", "file MiB", "read s", "check s", "total s", "peak heap MiB", "result"
    );
    for n in sizes {
        let records = generate(&Spec {
            ops: n,
            keys: 1000,
            clients: 32,
            unknown: 0.01,
            max_latency: 20_000,
            seed: n as u64,
        });
        let path = dir.path().join("history.jsonl");
        let w = soak::ops::file::Writer::create(&path).expect("create");
        for mut r in records {
            w.record(&mut r);
        }
        w.finish().expect("written");
        drop(w);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let base = NOW.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let t = Instant::now();
        let mut h = History::new();
        soak::ops::file::read(&path, |r| {
            h.add(&r).expect("valid");
        })
        .expect("read");
        h.patch(false);
        let read = t.elapsed();
        let report = check(&h, &Options::default());
        let total = t.elapsed();
        let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
        println!(
            "{:>10} {:>10.1} {:>10.2} {:>10.2} {:>10.2} {:>12.1} {:>8}",
            n,
            size as f64 / (1024.0 * 1024.0),
            read.as_secs_f64(),
            (total - read).as_secs_f64(),
            total.as_secs_f64(),
            mib(peak),
            if report.pass() {
                "pass"
            } else if report.violations > 0 {
                "FAIL"
            } else {
                "unknown"
            }
        );
        drop(h);
    }
}
