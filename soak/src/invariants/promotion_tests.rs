//! The promotion's accounting: acknowledged writes and R in, what was
//! kept, missing and lost out; the last segment interval's bound.

use super::*;

fn put(key: &str, value: &str, rev: i64, ret: Us) -> AckedWrite {
    AckedWrite {
        key: key.into(),
        value: Some(value.into()),
        rev,
        ret,
    }
}

fn delete(key: &str, rev: i64, ret: Us) -> AckedWrite {
    AckedWrite {
        key: key.into(),
        value: None,
        rev,
        ret,
    }
}

fn at_r(keys: &[(&str, &str, i64)]) -> AtR {
    keys.iter()
        .map(|(k, v, m)| (k.to_string(), (v.to_string(), *m)))
        .collect()
}

const NONE: &BTreeSet<String> = &BTreeSet::new();

#[test]
fn writes_at_or_below_r_are_kept_and_past_it_lost() {
    let writes = [
        put("a", "w0#1", 2, 100),
        put("b", "w1#1", 3, 200),
        put("a", "w0#2", 4, 300),
        put("c", "w1#2", 5, 400),
        put("a", "w0#3", 6, 500),
    ];
    // R = 4: a holds w0#2, b w1#1; c and a's third write are past R.
    let a = account(
        &writes,
        4,
        &at_r(&[("a", "w0#2", 4), ("b", "w1#1", 3)]),
        NONE,
        (600, Some(250)),
    );
    assert_eq!((a.acked, a.kept, a.lost, a.lost_keys), (5, 3, 2, 2));
    assert!(a.missing.is_empty(), "{:?}", a.missing);
    assert_eq!(a.lost_revisions, Some((5, 6)));
    assert_eq!(
        a.lost_listed,
        vec![
            (5, "c".into(), "w1#2".into()),
            (6, "a".into(), "w0#3".into())
        ]
    );
    assert_eq!(revisions(&a), "5..6 on 2 keys");
    // Answers in (350, 600]: the writes at 400 and 500.
    assert_eq!(a.last_segment, Some(2));
    assert!(check(&a, LostOnPromotion::LastSegment, 0).is_empty());
    let v = check(&a, LostOnPromotion::Writes(0), 7);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!((v[0].at, v[0].check), (7, Check::Promotion));
    assert!(
        v[0].message
            .contains("lost 2 acknowledged writes (revisions 5..6 on 2 keys)")
    );
    assert!(v[0].message.contains("(0: 0)"), "{}", v[0].message);
}

#[test]
fn a_write_at_or_below_r_missing_is_a_violation_whatever_the_bound() {
    let writes = [put("a", "w0#1", 2, 100), put("b", "w1#1", 3, 200)];
    // b holds an older value at R; a is absent.
    let a = account(&writes, 3, &at_r(&[("b", "w1#0", 1)]), NONE, (300, None));
    assert_eq!(a.missing.len(), 2, "{:?}", a.missing);
    assert_eq!(a.missing[0].key, "a");
    assert_eq!(a.missing[0].found, "the key is absent");
    assert_eq!(a.missing[1].found, "w1#0 (revision 1)");
    let v = check(&a, LostOnPromotion::Writes(1000), 0);
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(
        v[1].message
            .contains("b: w1#1 acknowledged by the primary at revision 3")
    );
    // No segment interval: lastSegment cannot be judged, and says so.
    let v = check(&a, LostOnPromotion::LastSegment, 0);
    assert!(v.iter().any(|x| x.message.contains("no segment interval")));
}

#[test]
fn later_changes_deletes_and_unanswered_deletes_count_as_there() {
    let writes = [
        put("a", "w0#1", 2, 100),
        put("b", "w0#2", 3, 200),
        delete("b", 4, 300),
        put("c", "w0#3", 5, 400),
    ];
    let uncertain: BTreeSet<String> = ["c".to_string()].into();
    // a: a write never answered changed it at 6 (<= R); b deleted and
    // absent; c absent for a delete whose answer never came.
    let a = account(
        &writes,
        7,
        &at_r(&[("a", "w3#9", 6)]),
        &uncertain,
        (500, Some(1_000)),
    );
    assert!(a.missing.is_empty(), "{:?}", a.missing);
    assert_eq!((a.kept, a.lost), (4, 0));
    assert_eq!(a.lost_revisions, None);
    assert_eq!(revisions(&a), "none");
    assert_eq!(a.last_segment, Some(4), "every answer within a second");
    assert!(check(&a, LostOnPromotion::Writes(0), 0).is_empty());
    // Without the unanswered delete, c missing; a deleted key found is too.
    let a = account(
        &writes,
        7,
        &at_r(&[("a", "w0#1", 2), ("b", "w0#2", 3)]),
        NONE,
        (500, None),
    );
    let keys: Vec<&str> = a.missing.iter().map(|m| m.key.as_str()).collect();
    assert_eq!(keys, ["b", "c"]);
    assert_eq!(a.missing[0].write, "delete");
}

#[test]
fn the_last_segment_counts_answers_in_the_interval_before_the_loss() {
    let writes = [
        put("a", "w0#1", 2, 1_000),
        put("a", "w0#2", 3, 1_500),
        put("a", "w0#3", 4, 2_000),
        put("a", "w0#4", 5, 2_001),
    ];
    assert_eq!(last_segment(&writes, 2_000, 1_000), 2, "(1000, 2000]");
    assert_eq!(last_segment(&writes, 2_000, 5_000), 3, "from the start");
    assert_eq!(last_segment(&writes, 2_000, 0), 0);
    assert_eq!(last_segment(&[], 2_000, 1_000), 0);
}

#[test]
fn only_changes_that_were_acknowledged_count() {
    let mut r = Record::new("w0", Kind::Put, "soak/k000001", 10);
    r.value = Some("w0#1".into());
    r.ret = 20;
    r.status = Status::Ok;
    r.rev = Some(9);
    assert_eq!(AckedWrite::of(&r), Some(put("soak/k000001", "w0#1", 9, 20)));
    let mut unknown = r.clone();
    unknown.status = Status::Unknown;
    assert_eq!(AckedWrite::of(&unknown), None);
    let mut cas = r.clone();
    cas.op = Kind::Cas;
    cas.succeeded = Some(false);
    assert_eq!(
        AckedWrite::of(&cas),
        None,
        "a compare that failed wrote nothing"
    );
    cas.succeeded = Some(true);
    assert!(AckedWrite::of(&cas).is_some());
    let mut del = r.clone();
    del.op = Kind::Delete;
    del.value = None;
    del.deleted = Some(0);
    assert_eq!(AckedWrite::of(&del), None, "deleted nothing");
    del.deleted = Some(1);
    assert_eq!(AckedWrite::of(&del), Some(delete("soak/k000001", 9, 20)));
    let mut get = r;
    get.op = Kind::Get;
    assert_eq!(AckedWrite::of(&get), None);
}
