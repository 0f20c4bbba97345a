//! The checker on crafted histories: each kind of anomaly is caught, a
//! correct concurrent history is accepted, a write with an unknown outcome
//! is accepted whether it took effect or not, and the time bound reports
//! unknown instead of passing.

use std::time::Duration;

use super::*;
use crate::ops::{Found, Kind, Record, Status};

fn rec(id: u64, client: &str, op: Kind, key: &str, call: Us, ret: Us) -> Record {
    let mut r = Record::new(client, op, key, call);
    r.id = id;
    r.ret = ret;
    r.status = Status::Ok;
    r
}

fn put(id: u64, client: &str, key: &str, value: &str, t: (Us, Us), rev: i64) -> Record {
    let mut r = rec(id, client, Kind::Put, key, t.0, t.1);
    r.value = Some(value.into());
    r.rev = Some(rev);
    r
}

fn lost_put(id: u64, client: &str, key: &str, value: &str, t: (Us, Us)) -> Record {
    let mut r = put(id, client, key, value, t, 0);
    r.status = Status::Unknown;
    r.rev = None;
    r.error = Some("timeout".into());
    r
}

fn get(
    id: u64,
    client: &str,
    key: &str,
    t: (Us, Us),
    rev: i64,
    found: Option<(&str, i64)>,
) -> Record {
    let mut r = rec(id, client, Kind::Get, key, t.0, t.1);
    r.rev = Some(rev);
    r.found = found.map(|(v, m)| Found {
        value: v.into(),
        mod_rev: m,
    });
    r
}

fn cas(
    id: u64,
    client: &str,
    key: &str,
    expect: i64,
    value: &str,
    t: (Us, Us),
    (ok, rev): (bool, i64),
) -> Record {
    let mut r = rec(id, client, Kind::Cas, key, t.0, t.1);
    r.expect_mod_rev = Some(expect);
    r.value = Some(value.into());
    r.succeeded = Some(ok);
    r.rev = Some(rev);
    r
}

fn delete(id: u64, client: &str, key: &str, t: (Us, Us), deleted: u64, rev: i64) -> Record {
    let mut r = rec(id, client, Kind::Delete, key, t.0, t.1);
    r.deleted = Some(deleted);
    r.rev = Some(rev);
    r
}

fn run(records: &[Record]) -> Report {
    run_with(records, false, Duration::from_secs(10))
}

fn run_with(records: &[Record], complete: bool, timeout: Duration) -> Report {
    let mut h = History::new();
    for r in records {
        h.add(r).expect("valid record");
    }
    h.patch(complete);
    check(
        &h,
        &Options {
            timeout,
            ..Options::default()
        },
    )
}

fn kinds(r: &Report) -> Vec<FindingKind> {
    r.findings.iter().map(|f| f.kind).collect()
}

const K: &str = "soak/k000001";
const L: &str = "soak/k000002";

#[test]
fn a_correct_concurrent_history_is_accepted() {
    // w0 and w1 write concurrently; reads overlapping both may see either,
    // in the order the revisions say; a cas and a delete follow.
    let h = [
        put(0, "w0", K, "w0#1", (0, 100), 10),
        put(1, "w1", K, "w1#1", (10, 90), 11),
        get(2, "r0", K, (20, 60), 10, Some(("w0#1", 10))),
        get(3, "r1", K, (30, 120), 11, Some(("w1#1", 11))),
        get(4, "r0", K, (130, 140), 11, Some(("w1#1", 11))),
        cas(5, "w0", K, 11, "w0#2", (150, 160), (true, 12)),
        cas(6, "w1", K, 11, "w1#2", (155, 170), (false, 12)),
        delete(7, "w0", K, (180, 190), 1, 13),
        get(8, "r1", K, (200, 210), 13, None),
        delete(9, "w1", K, (220, 230), 0, 13),
        put(10, "w2", L, "w2#3", (15, 25), 9),
    ];
    let mut h = h.to_vec();
    h[6].found = Some(Found {
        value: "w0#2".into(),
        mod_rev: 12,
    });
    let r = run(&h);
    assert!(r.pass(), "{:#?}", r.findings);
    assert_eq!(r.keys, 2);
}

#[test]
fn a_stale_read_is_caught_with_its_sub_history() {
    let mut h = vec![
        put(0, "w0", K, "w0#1", (0, 10), 5),
        put(1, "w0", K, "w0#2", (20, 30), 6),
    ];
    // Noise: many reads of the newest value on another key.
    for i in 0..50 {
        h.push(get(2 + i, "r1", L, (40 + i * 10, 45 + i * 10), 6, None));
    }
    h.push(get(100, "r0", K, (40, 50), 6, Some(("w0#1", 5))));
    let r = run(&h);
    assert_eq!(
        kinds(&r),
        vec![FindingKind::NotLinearizable],
        "{:#?}",
        r.findings
    );
    let f = &r.findings[0];
    assert_eq!(f.key, K);
    assert!(f.ops.len() <= 3, "smallest sub-history: {:#?}", f.ops);
    assert!(f.ops.iter().any(|o| o.id == 100), "{:#?}", f.ops);
    assert!(f.timeline.contains("get -> w0#1@5"), "{}", f.timeline);
    assert!(
        f.message.contains("none of the next can be"),
        "{}",
        f.message
    );
}

#[test]
fn a_lost_acknowledged_write_is_caught() {
    let h = [
        put(0, "w0", K, "w0#1", (0, 10), 5),
        get(1, "r0", K, (20, 30), 7, None),
    ];
    assert_eq!(kinds(&run(&h)), vec![FindingKind::NotLinearizable]);
}

#[test]
fn a_value_nobody_wrote_is_caught() {
    let h = [get(0, "r0", K, (0, 10), 3, Some(("raw:garbage", 3)))];
    assert_eq!(kinds(&run(&h)), vec![FindingKind::NotLinearizable]);
}

#[test]
fn a_cas_that_succeeded_against_the_wrong_revision_is_caught() {
    let h = [
        put(0, "w0", K, "w0#1", (0, 10), 5),
        cas(1, "w1", K, 4, "w1#1", (20, 30), (true, 6)),
    ];
    assert_eq!(kinds(&run(&h)), vec![FindingKind::NotLinearizable]);
    let mut failed = cas(1, "w1", K, 5, "w1#1", (20, 30), (false, 6));
    failed.found = Some(Found {
        value: "w0#1".into(),
        mod_rev: 5,
    });
    let h = [put(0, "w0", K, "w0#1", (0, 10), 5), failed];
    assert_eq!(
        kinds(&run(&h)),
        vec![FindingKind::NotLinearizable],
        "it said the comparison failed, yet the revision matched"
    );
}

#[test]
fn writes_out_of_revision_order_on_one_key_are_caught() {
    // The second put started after the first completed but got a lower
    // revision: caught per key and across keys.
    let h = [
        put(0, "w0", K, "w0#1", (0, 10), 8),
        put(1, "w1", K, "w1#1", (20, 30), 7),
    ];
    let r = run(&h);
    assert!(
        kinds(&r).contains(&FindingKind::NotLinearizable),
        "{:#?}",
        r.findings
    );
    assert!(
        kinds(&r).contains(&FindingKind::RevisionOrder),
        "{:#?}",
        r.findings
    );
}

#[test]
fn revisions_going_back_across_keys_are_caught() {
    let h = [
        put(0, "w0", K, "w0#1", (0, 10), 8),
        get(1, "r0", L, (20, 30), 6, None),
    ];
    let r = run(&h);
    assert_eq!(
        kinds(&r),
        vec![FindingKind::RevisionOrder],
        "{:#?}",
        r.findings
    );
    assert!(
        r.findings[0].message.contains("revision 8"),
        "{}",
        r.findings[0].message
    );
}

#[test]
fn one_revision_acknowledged_to_two_writes_is_caught() {
    let h = [
        put(0, "w0", K, "w0#1", (0, 10), 8),
        put(1, "w1", L, "w1#1", (0, 10), 8),
    ];
    let r = run(&h);
    assert_eq!(
        kinds(&r),
        vec![FindingKind::RevisionReused],
        "{:#?}",
        r.findings
    );
}

#[test]
fn an_unknown_write_may_have_taken_effect_or_not() {
    let before = put(0, "w0", K, "w0#1", (0, 10), 5);
    let lost = lost_put(1, "w1", K, "w1#1", (20, 30));
    // It took effect (later than its client gave up): a read sees it.
    let saw = get(2, "r0", K, (100, 110), 9, Some(("w1#1", 9)));
    assert!(run(&[before.clone(), lost.clone(), saw]).pass());
    // It did not: a read sees the older value.
    let missed = get(2, "r0", K, (100, 110), 9, Some(("w0#1", 5)));
    assert!(run(&[before.clone(), lost.clone(), missed.clone()]).pass());
    // Either way, once seen it stays: a read after that sees it or later.
    let saw = get(2, "r0", K, (100, 110), 9, Some(("w1#1", 9)));
    let back = get(3, "r1", K, (120, 130), 9, Some(("w0#1", 5)));
    let r = run(&[before.clone(), lost.clone(), saw, back]);
    assert_eq!(
        kinds(&r),
        vec![FindingKind::NotLinearizable],
        "{:#?}",
        r.findings
    );
    // A watch that saw every change and not this one: it did not happen
    // (dropped from the search).
    let r = run_with(
        &[before.clone(), lost.clone(), missed],
        true,
        Duration::from_secs(5),
    );
    assert!(r.pass());
    assert_eq!(r.counts.never_applied, 1);
    // An unknown write cannot take effect before it was invoked.
    let early = get(2, "r0", K, (12, 15), 5, Some(("w1#1", 6)));
    assert!(!run(&[before, lost, early]).pass());
}

#[test]
fn the_time_bound_reports_unknown_instead_of_passing() {
    let records = generate::generate(&generate::Spec {
        ops: 20_000,
        keys: 1,
        clients: 16,
        unknown: 0.05,
        ..generate::Spec::default()
    });
    let r = run_with(&records, false, Duration::ZERO);
    assert_eq!(r.unknown_keys, vec![crate::load::ledger::key_name(0)]);
    assert!(!r.pass(), "unknown is not a pass");
    assert_eq!(r.violations, 0);
}

#[test]
fn invalid_records_are_refused_with_their_id() {
    let mut h = History::new();
    let mut r = put(7, "w0", K, "w0#1", (0, 10), 5);
    r.rev = None;
    let e = h.add(&r).expect_err("no rev");
    assert_eq!(e.id, 7);
    assert!(e.to_string().contains("without rev"), "{e}");
    r.rev = Some(5);
    r.ret = 0;
    r.call = 10;
    assert!(h.add(&r).is_err(), "returned before invoked");
}
