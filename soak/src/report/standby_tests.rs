use std::path::Path;

use etcd_operator::faults::{Fault, FaultRecord, Role};

use super::*;
use crate::data::PlatformKind;
use crate::history::rfc3339;
use crate::invariants::Check;
use crate::invariants::standby::{MemberCompare, Method, Sample};

fn run_data(standby: &str) -> RunData {
    let s = crate::scenario::parse(
        Path::new("t.yaml"),
        &format!(
            "name: t\nduration: 10s\ncluster: {{name: t, size: 3, version: \"3.4.23\", backup: \
             {{interval: 1m, maxBackups: 2, continuous: {{segmentInterval: 1s}}}}}}\n\
             chaos: {{killInterval: 5s}}\n{standby}\
             bounds: {{recoveryP99: 2s, recoveryMax: 5s, availability: 0.9, minFaults: 1}}\n"
        ),
    )
    .expect("parses");
    let mut d = RunData::new(s, PlatformKind::Local, None);
    d.started = 0;
    d.run_end = 10_000;
    d
}

fn followed(lags: &[i64]) -> StandbyRun {
    let samples = lags
        .iter()
        .zip(0..)
        .map(|(&lag_ms, i)| Sample {
            at: i * 200,
            state: Some("Following".into()),
            via: Some("stream".into()),
            applied: 10,
            source: 11,
            lag_revisions: 1,
            lag_ms,
            message: None,
            revision: Some(100),
        })
        .collect();
    StandbyRun {
        name: "t-standby".into(),
        created: 0,
        samples,
        final_check: Some(Final {
            revision: 500,
            applied: 500,
            waited_ms: 300,
            primary_hash: Some(7),
            members: vec![MemberCompare {
                url: "http://127.0.0.1:1".into(),
                method: Some(Method::HashKv),
                value: Some(7),
                equal: true,
                detail: "HashKV 0x7 at 500".into(),
            }],
            problem: None,
        }),
        faults: vec![FaultRecord {
            time: rfc3339(2_000),
            unix_ms: 2_000,
            fault: Fault::Kill,
            cluster: "t-standby".into(),
            member: "t-standby-0".into(),
            role: Role::Leader,
            outcome: "injected".into(),
        }],
    }
}

const STANDBY: &str = "standby: {size: 1, stream: true, maxLag: 1s}\n";

fn judged(d: &RunData) -> (Vec<Row>, Vec<Violation>, Option<Summary>) {
    let (mut rows, mut v) = (Vec::new(), Vec::new());
    let s = super::rows(d, &mut rows, &mut v);
    (rows, v, s)
}

#[test]
fn a_standby_that_kept_up_and_ended_equal_passes_with_its_numbers() {
    let mut d = run_data(STANDBY);
    d.standby = Some(followed(&[5, 10, 20, 900]));
    let (rows, v, s) = judged(&d);
    assert!(v.is_empty(), "{v:?}");
    assert_eq!(rows.len(), 5, "{rows:?}");
    assert!(rows.iter().all(|r| r.pass), "{rows:?}");
    let s = s.expect("summary");
    let lag = s.lag_ms.expect("lag");
    assert_eq!((lag.max, lag.p50), (900, 10));
    assert_eq!(s.faults_injected, 1);
    assert!(rows[1].measured.contains("max 0.900s"), "{rows:?}");
    assert!(rows[3].measured.contains("revision 500"), "{rows:?}");
    // No probe saw the primary past 100: nothing measured behind.
    assert_eq!(s.measured_lag_ms.map(|l| l.max), Some(0));
    let json = serde_json::to_value(&s).expect("json");
    assert_eq!(json["final"]["revision"], 500);
    assert_eq!(json["lagMs"]["max"], 900);
    let csv = csv(d.standby.as_ref().expect("run"), &[(0, 101)]);
    assert_eq!(csv.lines().count(), 5, "{csv}");
    assert!(csv.starts_with("at_ms,state,via,applied_revision"), "{csv}");
    // The last sample (600 ms, at 100) measured against the primary past it at 0.
    assert!(csv.trim_end().ends_with(",100,600,1"), "{csv}");
}

#[test]
fn lag_over_the_bound_a_difference_or_no_kill_fails() {
    let mut d = run_data(STANDBY);
    let mut run = followed(&[5, 1500, 20]);
    if let Some(f) = run.final_check.as_mut() {
        f.members[0].equal = false;
        f.members[0].detail = "HashKV 0x8, the primary's 0x7".into();
    }
    run.faults.clear();
    d.standby = Some(run);
    let (rows, v, _) = judged(&d);
    let failed: Vec<&str> = rows
        .iter()
        .filter(|r| !r.pass)
        .map(|r| r.check.as_str())
        .collect();
    assert_eq!(
        failed,
        [
            "standby lag (status.standby.lagMs, max)",
            "standby = primary at the end",
            "standby faults injected"
        ]
    );
    assert_eq!(v.len(), 3, "{v:?}");
    assert!(v.iter().any(|x| x.message.contains("0x8")), "{v:?}");
}

#[test]
fn a_standby_never_created_fails_and_none_asked_adds_nothing() {
    let d = run_data(STANDBY);
    let (rows, v, s) = judged(&d);
    assert!(rows.is_empty() && s.is_none());
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].check, Check::Standby);
    let d = run_data("");
    let (rows, v, s) = judged(&d);
    assert!(rows.is_empty() && v.is_empty() && s.is_none());
    // Without chaos on the standby, no fault row.
    let mut d = run_data("standby: {maxLag: 1s, chaos: false}\n");
    d.standby = Some(followed(&[5]));
    let (rows, v, _) = judged(&d);
    assert!(v.is_empty(), "{v:?}");
    assert_eq!(rows.len(), 4, "{rows:?}");
}

#[test]
fn after_a_loss_the_promotion_rows_replace_the_comparison() {
    use crate::invariants::promotion::{Accounting, Promotion};
    let mut d = run_data("standby: {maxLag: 1s, stream: true, losePrimaryAt: 5s}\n");
    d.scenario.bounds.lost_on_promotion = Some(crate::scenario::LostOnPromotion::Writes(0));
    let mut run = followed(&[0, 0, 0]);
    run.final_check = None;
    // A sample after the loss, lagging and Stopped: not judged.
    run.samples.push(Sample {
        at: 6_000,
        state: Some("Stopped".into()),
        lag_ms: 60_000,
        ..Sample::default()
    });
    d.standby = Some(run);
    // Never lost: a violation of its own.
    let (rows, v, _) = judged(&d);
    assert!(v.iter().any(|x| x.check == Check::Promotion), "{v:?}");
    assert!(
        !rows
            .iter()
            .any(|r| r.check == "standby = primary at the end")
    );

    d.promotion = Some(Promotion {
        cluster: "t-standby".into(),
        lost_at: 5_000,
        members_killed: 3,
        promoted_at: Some(5_150),
        revision: 90,
        first_write_at: Some(5_600),
        moved_at: Some(7_000),
        accounting: Some(Accounting {
            revision: 90,
            acked: 80,
            kept: 78,
            lost: 2,
            lost_keys: 2,
            lost_revisions: Some((91, 92)),
            lost_listed: vec![(91, "soak/k000001".into(), "w0#9".into())],
            last_segment: Some(5),
            ..Accounting::default()
        }),
        linearizability: Some(crate::lin::Report::default()),
        ..Promotion::default()
    });
    let (rows, v, s) = judged(&d);
    let row = |name: &str| {
        rows.iter()
            .find(|r| r.check == name)
            .unwrap_or_else(|| panic!("no row {name}: {rows:?}"))
    };
    let p = row("promotion (loss -> promoted -> first write)");
    assert!(
        p.pass && p.measured.contains("0.150s") && p.measured.contains("0.600s"),
        "{p:?}"
    );
    assert!(row("linearizable after the promotion").pass);
    assert!(row("primary's writes at or below R on the promoted cluster").pass);
    let lost = row("lost on promotion");
    assert!(!lost.pass, "2 lost, bound 0: {lost:?}");
    assert!(lost.measured.contains("91..92 on 2 keys"), "{lost:?}");
    assert_eq!(
        v.iter().filter(|x| x.check == Check::Promotion).count(),
        1,
        "{v:?}"
    );
    assert!(
        v.iter().all(|x| x.check != Check::Standby),
        "the samples after the loss are not judged: {v:?}"
    );
    let summary = s.expect("summary");
    assert_eq!(summary.promotion.map(|p| p.revision), Some(90));

    // lastSegment: 5 acknowledged in the last interval allow the 2.
    d.scenario.bounds.lost_on_promotion = Some(crate::scenario::LostOnPromotion::LastSegment);
    let (rows, v, _) = judged(&d);
    assert!(v.iter().all(|x| x.check != Check::Promotion), "{v:?}");
    assert!(
        rows.iter()
            .any(|r| r.bound.starts_with("<= lastSegment: 5"))
    );
}
