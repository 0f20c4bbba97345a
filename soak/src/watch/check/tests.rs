//! The watch checks on crafted traces: a clean one passes; each broken
//! guarantee is caught.

use super::*;

fn put(id: u64, key: u32, value: &str, rev: i64, status: Status) -> Record {
    let mut r = Record::new("w0", Kind::Put, &key_name(key), 0);
    r.id = id;
    r.value = Some(value.into());
    r.status = status;
    r.rev = (status == Status::Ok).then_some(rev);
    r
}

fn del(key: u32, rev: i64) -> Record {
    let mut r = Record::new("w0", Kind::Delete, &key_name(key), 0);
    r.status = Status::Ok;
    r.deleted = Some(1);
    r.rev = Some(rev);
    r
}

fn ev(rev: i64, key: u32, value: Option<&str>) -> Event {
    Event {
        rev,
        key,
        value: value.map(|v| crate::lin::parse_write(v).unwrap_or(FOREIGN_VALUE)),
        at: rev as u64 * 1000,
    }
}

fn trace(start: Start, from: i64, events: Vec<Event>) -> Trace {
    Trace {
        name: "watch0".into(),
        start,
        from,
        last: events.iter().map(|e| e.rev).max().unwrap_or(0),
        events,
        resumes: Vec::new(),
        errors: Vec::new(),
    }
}

fn writes(records: &[Record]) -> Writes {
    let mut w = Writes::default();
    for r in records {
        w.add(r);
    }
    w
}

fn finals(items: &[(u32, &str, i64)]) -> FinalState {
    items
        .iter()
        .map(|(k, v, r)| {
            (
                *k,
                (crate::lin::parse_write(v).unwrap_or(FOREIGN_VALUE), *r),
            )
        })
        .collect()
}

fn run(t: &Trace, w: &Writes, f: Option<&FinalState>) -> Vec<String> {
    let (_, problems, n) = check_trace(t, 6, 99_000, w, f, &History::new());
    assert_eq!(problems.len(), n);
    problems.into_iter().map(|p| p.message).collect()
}

fn history() -> Writes {
    writes(&[
        put(0, 1, "w0#1", 2, Status::Ok),
        put(1, 2, "w0#2", 3, Status::Ok),
        put(2, 1, "w0#3", 0, Status::Unknown),
        del(2, 5),
    ])
}

fn clean() -> Vec<Event> {
    vec![
        ev(2, 1, Some("w0#1")),
        ev(3, 2, Some("w0#2")),
        ev(4, 1, Some("w0#3")), // the unknown write, applied
        ev(5, 2, None),
        ev(6, OTHER_KEY, Some("raw")),
    ]
}

#[test]
fn a_clean_trace_passes_and_replays_to_the_final_state() {
    let f = finals(&[(1, "w0#3", 4)]);
    assert_eq!(
        run(&trace(Start::First, 1, clean()), &history(), Some(&f)),
        Vec::<String>::new()
    );
    // From "now": only the keys it saw are compared.
    let late: Vec<Event> = clean().into_iter().filter(|e| e.rev >= 4).collect();
    assert_eq!(
        run(&trace(Start::Now, 4, late), &history(), Some(&f)),
        Vec::<String>::new()
    );
}

#[test]
fn order_duplicates_and_gaps_are_caught() {
    let mut e = clean();
    e.swap(1, 2);
    let m = run(&trace(Start::First, 1, e), &history(), None);
    assert!(m.iter().any(|m| m.contains("out of order")), "{m:?}");

    let mut e = clean();
    e.insert(1, ev(2, 1, Some("w0#1")));
    let m = run(&trace(Start::First, 1, e), &history(), None);
    assert!(m.iter().any(|m| m.contains("arrived twice")), "{m:?}");

    // A resume that skipped revision 3 (an acknowledged write).
    let e: Vec<Event> = clean().into_iter().filter(|e| e.rev != 3).collect();
    let m = run(&trace(Start::First, 1, e), &history(), None);
    assert_eq!(
        m,
        vec!["revisions 3..3 are missing (1 acknowledged writes among them)"]
    );

    // The stream stopped early.
    let e: Vec<Event> = clean().into_iter().filter(|e| e.rev <= 4).collect();
    let m = run(&trace(Start::First, 1, e), &history(), None);
    assert!(
        m.iter().any(|m| m.contains("revisions 5..6 never arrived")),
        "{m:?}"
    );
}

#[test]
fn events_must_match_the_history() {
    let mut e = clean();
    e[0] = ev(2, 1, Some("w0#9"));
    let m = run(&trace(Start::First, 1, e), &history(), None);
    assert!(
        m.iter().any(|m| m.contains("revision 2 is put soak/k000001 = w0#9, but the history acknowledged put soak/k000001 = w0#1")),
        "{m:?}"
    );
    let mut e = clean();
    e[2] = ev(4, 1, Some("w1#1"));
    let m = run(&trace(Start::First, 1, e), &history(), None);
    assert!(m.iter().any(|m| m.contains("matches no write")), "{m:?}");
}

#[test]
fn the_replay_must_equal_the_final_state() {
    let f = finals(&[(1, "w0#1", 2)]);
    let m = run(&trace(Start::First, 1, clean()), &history(), Some(&f));
    assert!(
        m.iter()
            .any(|m| m
                .contains("soak/k000001: the watch replays to w0#3@4, the key space holds w0#1@2")),
        "{m:?}"
    );
    // A key the watch never saw but the key space holds.
    let f = finals(&[(1, "w0#3", 4), (7, "w0#5", 1)]);
    let m = run(&trace(Start::First, 1, clean()), &history(), Some(&f));
    assert!(m.iter().any(|m| m.contains("soak/k000007")), "{m:?}");
}
