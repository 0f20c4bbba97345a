use std::time::Duration;

use clap::Parser;
use proptest::prelude::*;

use super::Chaos;
use crate::cli::{Args, CorruptPart, FaultKind, Skew, Split};
use crate::select::Target;

fn from_flags(flags: &[String]) -> Result<Chaos, String> {
    let argv = std::iter::once("chaos-monkey".to_string()).chain(flags.iter().cloned());
    Args::try_parse_from(argv)
        .map(|a| a.chaos)
        .map_err(|e| e.to_string())
}

fn from_file(text: &str) -> Result<Chaos, String> {
    etcd_operator::yaml::from_str::<Chaos>(text)
}

#[test]
fn flags_left_out_and_fields_left_out_mean_the_same() {
    assert_eq!(from_flags(&[]), Ok(Chaos::default()));
    assert_eq!(from_file("{}"), Ok(Chaos::default()));
    assert!(Chaos::default().to_args().contains(&"30000ms".to_string()));
}

#[test]
fn a_file_value_goes_through_the_flags_parser() {
    let cases = [
        ("probability: 2", "--probability", "2"),
        ("killInterval: 0s", "--kill-interval", "0s"),
        ("killInterval: 100y", "--kill-interval", "100y"),
        ("loss: 130", "--loss", "130"),
        ("diskIops: 0", "--disk-iops", "0"),
        ("maxKill: 0", "--max-kill", "0"),
        ("fillMax: 1KiB", "--fill-max", "1KiB"),
        ("skew: 0s", "--skew", "0s"),
        ("startAfter: -5s", "--start-after", "-5s"),
    ];
    for (field, flag, value) in cases {
        let file = from_file(field).expect_err(field);
        let flags = from_flags(&[flag.into(), value.into()]).expect_err(flag);
        // The parser's own words, in both.
        let words = flags
            .split(": ")
            .last()
            .unwrap_or_default()
            .lines()
            .next()
            .unwrap_or_default()
            .to_string();
        let first = words.split(" (").next().unwrap_or_default();
        assert!(first.len() > 10, "{flag}: {flags:?}");
        assert!(
            file.contains(first.trim()),
            "{field}: the file says {file:?}, the flag {flags:?}"
        );
    }
}

#[test]
fn fields_are_camel_case_and_unknown_ones_are_refused() {
    let c =
        from_file("{killInterval: 5s, fault: pause, pauseFor: 2s, maxFaults: 3}").expect("parses");
    assert_eq!(c.kill_interval, Duration::from_secs(5));
    assert_eq!(c.fault, FaultKind::Pause);
    assert_eq!(c.pause_for, Some(Duration::from_secs(2)));
    assert_eq!(c.max_faults, Some(3));
    let e = from_file("{kill_interval: 5s}").expect_err("snake case");
    assert!(
        e.contains("kill_interval") && e.contains("killInterval"),
        "{e}"
    );
}

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        (0u64..=31_536_000_000).prop_map(Duration::from_millis),
        (0u64..=10_000_000_000).prop_map(Duration::from_nanos),
    ]
}

fn positive() -> impl Strategy<Value = Duration> {
    duration().prop_map(|d| d.max(Duration::from_nanos(1)))
}

fn chaos() -> impl Strategy<Value = Chaos> {
    let head = (
        prop::sample::select(vec![
            Target::Random,
            Target::Leader,
            Target::Follower,
            Target::Minority,
            Target::Majority,
            Target::Operator,
            Target::Store,
        ]),
        any::<bool>(),
        prop::sample::select(vec![
            FaultKind::Kill,
            FaultKind::Destroy,
            FaultKind::Pause,
            FaultKind::Partition,
            FaultKind::Delay,
            FaultKind::Loss,
            FaultKind::BlackholeUntilSnapshot,
            FaultKind::Corrupt,
            FaultKind::DiskFull,
            FaultKind::ClockSkew,
            FaultKind::SlowDisk,
        ]),
        positive(),
        duration(),
        prop::option::of(positive()),
        prop::option::of(positive()),
        prop::option::of(prop::sample::select(vec![Split::Minority, Split::Majority])),
        prop::option::of(positive()),
        prop::option::of(duration()),
        prop::option::of(0.001f64..=100.0),
    );
    let tail = (
        prop::option::of(prop::sample::select(vec![
            CorruptPart::Db,
            CorruptPart::Wal,
        ])),
        prop::option::of((1u64 << 20)..=(1u64 << 42)),
        prop::option::of(
            (-31_536_000_000_000_000i64..=31_536_000_000_000_000)
                .prop_filter_map("not zero", Skew::from_nanos),
        ),
        prop::option::of(1u32..=1_000_000),
        prop::option::of(1usize..=100),
        0.0f64..=1.0,
        duration(),
        duration(),
        prop::option::of(any::<u64>()),
        any::<bool>(),
        prop::option::of(1usize..=10_000),
    );
    (head, tail).prop_map(
        |(
            (
                target,
                allow_quorum_loss,
                fault,
                kill_interval,
                start_after,
                pause_for,
                fault_for,
                split,
                latency,
                latency_jitter,
                loss,
            ),
            (
                corrupt,
                fill_max,
                skew,
                disk_iops,
                max_kill,
                probability,
                min_age,
                jitter,
                seed,
                dry_run,
                max_faults,
            ),
        )| Chaos {
            target,
            allow_quorum_loss,
            fault,
            kill_interval,
            start_after,
            pause_for,
            fault_for,
            split,
            latency,
            latency_jitter,
            loss,
            corrupt,
            fill_max,
            skew,
            disk_iops,
            max_kill,
            probability,
            min_age,
            jitter,
            seed,
            dry_run,
            max_faults,
        },
    )
}

proptest! {
    /// What the soak writes as flags is what the monkey reads.
    #[test]
    fn flags_read_back_the_same(c in chaos()) {
        prop_assert_eq!(from_flags(&c.to_args()), Ok(c));
    }

    /// What is written to a file reads back the same, as strictly as a
    /// scenario is read.
    #[test]
    fn a_file_reads_back_the_same(c in chaos()) {
        let text = serde_json::to_string(&c).expect("serializes");
        prop_assert_eq!(from_file(&text), Ok(c));
    }
}
