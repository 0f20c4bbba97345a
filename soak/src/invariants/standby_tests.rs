use super::*;

fn sample(at: Ms, state: &str, lag_ms: i64) -> Sample {
    Sample {
        at,
        state: Some(state.into()),
        via: Some("stream".into()),
        applied: 100,
        source: 101,
        lag_revisions: i64::from(lag_ms > 0),
        lag_ms,
        message: None,
        revision: None,
    }
}

#[test]
fn lag_counts_from_the_first_following_sample_and_the_max_is_bounded() {
    // Bootstrap (no state, then a long "lag" before it follows) is not counted.
    let mut samples = vec![
        Sample {
            at: 0,
            ..Sample::default()
        },
        sample(100, "Bootstrapping", 60_000),
    ];
    samples.extend((1..=100i64).map(|i| sample(100 + i.unsigned_abs() * 200, "Following", i)));
    let o = check(&samples, &[], 1000, 99_999);
    assert_eq!(o.violations().count(), 0, "{o:?}");
    let lag = o.lag.expect("lag");
    assert_eq!((lag.samples, lag.p50, lag.p99, lag.max), (100, 50, 99, 100));
    assert_eq!(o.via, [("stream".to_string(), 100)]);

    // Over the bound for two stretches: one violation each.
    samples.push(sample(30_000, "Following", 2500));
    samples.push(sample(30_200, "Following", 3000));
    samples.push(sample(30_400, "Following", 10));
    samples.push(sample(30_600, "Following", 1200));
    let o = check(&samples, &[], 1000, 99_999);
    assert_eq!((o.over.len(), o.states.len()), (2, 0), "{o:?}");
    assert_eq!(o.over[0].at, 30_000);
    assert!(o.over[0].message.contains("standby.maxLag"));
    assert_eq!(o.lag.expect("lag").max, 3000);
}

#[test]
fn diverged_or_stopped_is_a_violation_once_per_stretch() {
    let mut samples = vec![sample(0, "Following", 0)];
    let mut diverged = sample(200, "Diverged", 0);
    diverged.message = Some("a foreign write at 57".into());
    samples.push(diverged.clone());
    samples.push(Sample {
        at: 400,
        ..diverged
    });
    samples.push(sample(600, "Stopped", 0));
    let o = check(&samples, &[], 1000, 1000);
    assert_eq!((o.over.len(), o.states.len()), (0, 2), "{o:?}");
    assert!(o.states[0].message.contains("Diverged"));
    assert!(o.states[0].message.contains("a foreign write at 57"));
    assert!(o.states[1].message.contains("Stopped"));
    assert!(o.violations().all(|v| v.check == Check::Standby));
}

#[test]
fn a_standby_never_following_fails() {
    let o = check(&[sample(0, "Bootstrapping", 0)], &[], 1000, 5);
    assert_eq!(o.lag, None);
    assert_eq!(o.states.len(), 1);
    assert_eq!(o.states[0].at, 5);
}

#[test]
fn the_final_comparison_fails_on_any_difference_or_problem() {
    let member = |equal| MemberCompare {
        url: "http://127.0.0.1:1".into(),
        method: Some(Method::HashKv),
        value: Some(7),
        equal,
        detail: if equal {
            String::new()
        } else {
            "hash 8 != 7".into()
        },
    };
    let good = Final {
        revision: 10,
        applied: 10,
        members: vec![member(true), member(true)],
        ..Final::default()
    };
    assert!(good.equal());
    assert!(check_final(Some(&good), 1).is_empty());
    let bad = Final {
        members: vec![member(true), member(false)],
        ..good.clone()
    };
    assert!(!bad.equal());
    let v = check_final(Some(&bad), 1);
    assert_eq!(v.len(), 1);
    assert!(v[0].message.contains("hash 8 != 7"), "{:?}", v);
    let late = Final {
        problem: Some("applied only 8 of 10 within 60s".into()),
        ..good.clone()
    };
    assert_eq!(check_final(Some(&late), 1).len(), 1);
    assert!(!late.equal());
    let none = Final {
        members: vec![],
        ..good
    };
    assert_eq!(check_final(Some(&none), 1).len(), 1);
    assert_eq!(check_final(None, 1).len(), 1);
}

/// Probe samples of the primary: at each time, the members' revisions.
fn probes(points: &[(Ms, &[i64])]) -> Vec<crate::history::Sample> {
    points
        .iter()
        .map(|(at, revs)| {
            let mut s = crate::history::Sample::empty(*at, 3);
            s.views = revs
                .iter()
                .map(|r| crate::history::MemberView {
                    revision: *r,
                    ..Default::default()
                })
                .collect();
            s
        })
        .collect()
}

#[test]
fn the_primarys_timeline_is_its_highest_revision_so_far() {
    let t = primary_timeline(&probes(&[
        (0, &[5, 6]),
        (200, &[]),
        (400, &[4]),
        (600, &[9, 8]),
    ]));
    assert_eq!(t, [(0, 6), (400, 6), (600, 9)]);
}

#[test]
fn the_measured_lag_is_how_long_the_primary_was_past_the_standby() {
    let t = primary_timeline(&probes(&[
        (0, &[10]),
        (200, &[12]),
        (400, &[15]),
        (600, &[20]),
    ]));
    let at = |at, revision| Sample {
        revision,
        ..sample(at, "Following", 0)
    };
    // Caught up: the primary never seen past it.
    assert_eq!(measured_lag(&at(650, Some(20)), &t), Some((0, 0)));
    // At 12 at 650: the primary was past 12 at 400 (15), 250 ms before;
    // 8 revisions ahead at 600.
    assert_eq!(measured_lag(&at(650, Some(12)), &t), Some((250, 8)));
    // Nobody answered: nothing measured.
    assert_eq!(measured_lag(&at(650, None), &t), None);
    // Before any probe: the primary not seen past it yet.
    assert_eq!(measured_lag(&at(100, Some(1)), &t[1..]), Some((0, 0)));

    // A standby stuck at 12 from 650 to 1650 while the primary moves on:
    // one violation for the stretch over 1 s, and the figures.
    let mut samples = vec![at(650, Some(20))];
    samples.extend((0..6).map(|i| at(1200 + i * 200, Some(12))));
    let o = check(&samples, &t, 1000, 5000);
    let m = o.measured.expect("measured");
    assert_eq!((m.samples, m.max, m.max_revisions), (7, 1800, 8));
    assert_eq!((o.over.len(), o.over_measured.len()), (0, 1), "{o:?}");
    assert!(o.over_measured[0].message.contains("revision 12"), "{o:?}");
    // The published lag (0 throughout) passes by itself.
    assert_eq!(o.lag.expect("lag").max, 0);
}
