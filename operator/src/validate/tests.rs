//! Tests of [`super::validate`]: refusals name the field, accepted specs
//! come out as the policies the controller uses.

use super::*;
use crate::crd::{BackupSpec, RecoverySpec, TlsEndpoint, TlsMode};

struct Only(Version);
impl Versions for Only {
    fn check(&self, v: Version) -> Result<(), String> {
        if v == self.0 {
            Ok(())
        } else {
            Err(format!("no etcd binary for {v}"))
        }
    }
}
const V: Only = Only(Version::new(3, 4, 23));

fn spec(size: i64, version: &str) -> EtcdClusterSpec {
    EtcdClusterSpec::minimal(size, version)
}

/// `spec.backup` every `interval` keeping `max_backups`, its backups
/// restore-checked every `check` when given; nothing else set.
fn backup_spec(interval: &str, max_backups: i64, check: Option<String>) -> Option<BackupSpec> {
    Some(BackupSpec {
        interval: interval.into(),
        max_backups,
        location: None,
        restore_check: check.map(|interval| crate::crd::RestoreCheckSpec { interval }),
        continuous: None,
    })
}

fn fields(r: Result<ValidSpec, Invalid>) -> Vec<String> {
    r.expect_err("should be invalid")
        .0
        .into_iter()
        .map(|e| e.field)
        .collect()
}

#[test]
fn accepts_a_plain_spec() {
    let v = validate("demo", &spec(3, "3.4.23"), &V).expect("valid");
    assert_eq!(v.size, 3);
    assert_eq!(v.version, Version::new(3, 4, 23));
}

#[test]
fn size_out_of_range_names_the_field() {
    for size in [0, -1, 10] {
        let e = validate("demo", &spec(size, "3.4.23"), &V).expect_err("invalid");
        assert_eq!(e.0[0].field, "spec.size");
        assert!(e.to_string().contains("between 1 and 9"), "{e}");
    }
}

#[test]
fn version_malformed_or_missing_binary() {
    assert_eq!(
        fields(validate("demo", &spec(3, "latest"), &V)),
        ["spec.version"]
    );
    let e = validate("demo", &spec(3, "3.9.9"), &V).expect_err("invalid");
    assert!(e.to_string().contains("no etcd binary for 3.9.9"), "{e}");
}

#[test]
fn all_errors_reported_together() {
    assert_eq!(
        fields(validate("Demo_", &spec(0, "x"), &V)),
        ["metadata.name", "spec.size", "spec.version"]
    );
}

/// A backup interval of 100000000h (or Go's limit, 2562048h) was accepted
/// and the scheduler panicked formatting a year past 9999: every
/// schedule's interval is at most a year and a day, every other duration
/// at most 100 years, every count bounded; each refusal names the field
/// and the range.
#[test]
fn durations_and_counts_past_their_bounds_are_refused_naming_the_field() {
    let backup = |interval: &str, max_backups: i64, check: Option<&str>| {
        let mut s = spec(3, "3.4.23");
        s.backup = backup_spec(interval, max_backups, check.map(Into::into));
        validate("demo", &s, &V)
    };
    for huge in ["100000000h", "2562048h", "876001h", "8785h"] {
        let e = backup(huge, 3, None).expect_err("refused").to_string();
        assert!(
            e.contains("spec.backup.interval") && e.contains("at most 8784h (366 days)"),
            "{e}"
        );
        let e = backup("1h", 3, Some(huge))
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("spec.backup.restoreCheck.interval") && e.contains("8784h"),
            "{e}"
        );
    }
    assert!(backup("8784h", 3, Some("8784h")).is_ok());
    let e = backup("1h", 10_001, None).expect_err("refused").to_string();
    assert!(
        e.contains("spec.backup.maxBackups") && e.contains("at most 10000"),
        "{e}"
    );
    assert!(backup("1h", 10_000, None).is_ok());
    // Durations that are not a schedule's (a CA's validity): 100 years.
    assert!(parse_duration("876000h").is_ok());
    assert!(
        parse_duration("876001h")
            .expect_err("refused")
            .contains("100 years")
    );
}

#[test]
fn backup_bounds() {
    let mut s = spec(3, "3.4.23");
    s.backup = backup_spec("500ms", 0, None);
    assert_eq!(
        fields(validate("demo", &s, &V)),
        ["spec.backup.interval", "spec.backup.maxBackups"]
    );
    s.backup = backup_spec("30m", 3, None);
    let v = validate("demo", &s, &V).expect("valid");
    let b = v.backup.expect("backup policy");
    assert_eq!(b.interval, Duration::from_secs(1800));
    assert_eq!(b.max_backups, 3);
    assert_eq!(b.restore_check, None, "restore checks are off when unset");
}

/// `spec.backup.restoreCheck.interval`: a Go duration of at least 1s;
/// anything else names the field.
#[test]
fn restore_check_interval() {
    let with = |interval: &str| {
        let mut s = spec(3, "3.4.23");
        s.backup = backup_spec("30m", 3, Some(interval.into()));
        validate("demo", &s, &V)
    };
    let b = with("1h").expect("valid").backup.expect("policy");
    assert_eq!(b.restore_check, Some(Duration::from_secs(3600)));
    for bad in ["500ms", "soon", "", "-1h"] {
        assert_eq!(
            fields(with(bad)),
            ["spec.backup.restoreCheck.interval"],
            "{bad:?}"
        );
    }
}

proptest::proptest! {
    /// Whole seconds from 1 up are taken as given; less is refused,
    /// naming the field.
    #[test]
    fn any_restore_check_interval_is_judged(ms in 0u64..10_000_000) {
        let mut s = spec(3, "3.4.23");
        s.backup = backup_spec("30m", 3, Some(format!("{ms}ms")));
        match validate("demo", &s, &V) {
            Ok(v) => {
                proptest::prop_assert!(ms >= 1000);
                let got = v.backup.and_then(|b| b.restore_check);
                proptest::prop_assert_eq!(got, Some(Duration::from_millis(ms)));
            }
            Err(_) => {
                proptest::prop_assert!(ms < 1000);
                proptest::prop_assert_eq!(fields(validate("demo", &s, &V)), ["spec.backup.restoreCheck.interval"]);
            }
        }
    }
}

#[test]
fn restore_from_backup_needs_backups() {
    let mut s = spec(3, "3.4.23");
    s.recovery = Some(RecoverySpec {
        restore_from_backup: true,
        from_survivor: None,
    });
    assert_eq!(
        fields(validate("demo", &s, &V)),
        ["spec.recovery.restoreFromBackup"]
    );
}

#[test]
fn tls_modes_need_what_they_name_and_validities_have_a_floor() {
    use crate::crd::TlsSpec;
    let endpoint = |mode, path: Option<&str>, secret: Option<&str>| {
        Some(TlsEndpoint {
            mode,
            path: path.map(Into::into),
            secret_name: secret.map(Into::into),
        })
    };
    let mut s = spec(3, "3.4.23");
    s.tls = Some(TlsSpec {
        peer: endpoint(TlsMode::Auto, None, None),
        client: endpoint(TlsMode::Provided, Some("/certs"), None),
        certificate_validity: Some("2m".into()),
        ca_validity: None,
    });
    let v = validate("demo", &s, &V).expect("valid");
    assert_eq!(v.tls.peer, Some(TlsSource::Auto));
    assert_eq!(v.tls.certificate_validity, Duration::from_secs(120));
    assert_eq!(v.tls.ca_validity, DEFAULT_CA_VALIDITY);
    assert!(v.tls.any());
    s.tls = Some(TlsSpec {
        peer: endpoint(TlsMode::Auto, Some("/x"), None),
        client: endpoint(TlsMode::Provided, None, Some("Bad_Name")),
        certificate_validity: Some("30s".into()),
        ca_validity: Some("soon".into()),
    });
    assert_eq!(
        fields(validate("demo", &s, &V)),
        [
            "spec.tls.peer",
            "spec.tls.client.secretName",
            "spec.tls.certificateValidity",
            "spec.tls.caValidity"
        ]
    );
    s.tls = Some(TlsSpec {
        client: endpoint(TlsMode::Provided, None, None),
        ..TlsSpec::default()
    });
    let e = validate("demo", &s, &V).expect_err("invalid");
    assert!(e.to_string().contains("needs path"), "{e}");
}

#[test]
fn tuning_problems_come_with_the_others() {
    let mut s = spec(0, "3.4.23");
    s.tuning = Some(crate::crd::TuningSpec {
        heartbeat_interval: Some("x".into()),
        election_timeout: Some("0ms".into()),
    });
    assert_eq!(
        fields(validate("demo", &s, &V)),
        [
            "spec.size",
            "spec.tuning.heartbeatInterval",
            "spec.tuning.electionTimeout"
        ]
    );
    s.size = 3;
    s.tuning = Some(crate::crd::TuningSpec {
        heartbeat_interval: Some("25ms".into()),
        election_timeout: Some("250ms".into()),
    });
    let v = validate("demo", &s, &V).expect("valid");
    assert_eq!(v.tuning, Tuning::new(Some(25), Some(250)));
}

#[test]
fn from_survivor_follows_restore_from_backup_unless_set_and_needs_persistent_storage() {
    let mut s = spec(3, "3.4.23");
    s.backup = backup_spec("30m", 3, None);
    let recovery = |restore, survivor| {
        Some(RecoverySpec {
            restore_from_backup: restore,
            from_survivor: survivor,
        })
    };
    for (r, fs, want) in [
        (true, None, true),
        (false, None, false),
        (true, Some(false), false),
        (false, Some(true), true),
    ] {
        s.recovery = recovery(r, fs);
        let v = validate("demo", &s, &V).expect("valid");
        assert_eq!(
            (v.restore_from_backup, v.from_survivor),
            (r, want),
            "{r} {fs:?}"
        );
    }
    s.storage.policy = StoragePolicy::Ephemeral;
    s.recovery = recovery(true, None);
    let v = validate("demo", &s, &V).expect("valid: the default just stays off");
    assert!(!v.from_survivor);
    s.recovery = recovery(true, Some(true));
    let e = validate("demo", &s, &V).expect_err("an explicit fromSurvivor is refused");
    assert_eq!(e.0[0].field, "spec.recovery.fromSurvivor");
    assert!(e.to_string().contains("Persistent"), "{e}");
}

#[test]
fn names() {
    for good in ["demo", "a", "my-cluster-2"] {
        assert!(check_name(good).is_ok(), "{good}");
    }
    for bad in ["", "Demo", "-a", "a-", "a_b", "1abc", &"a".repeat(41)] {
        assert!(check_name(bad).is_err(), "{bad}");
    }
}

#[test]
fn restore_names_whose_backup_and_where_for_a_name_only() {
    let with =
        |backup: &str, cluster: Option<&str>, location: Option<crate::crd::RestoreLocation>| {
            let mut s = spec(3, "3.4.23");
            s.restore = Some(crate::crd::RestoreSpec {
                backup: backup.into(),
                cluster: cluster.map(str::to_string),
                location,
                to_revision: None,
                to_time: None,
            });
            validate("demo", &s, &V)
        };
    let claim = |c: &str| crate::crd::RestoreLocation {
        persistent_volume_claim: Some(c.into()),
        ..Default::default()
    };
    let v = with(
        "example-20261205-012308-950",
        Some("example"),
        Some(claim("ex-backups")),
    )
    .expect("valid");
    assert_eq!(
        v.restore_from,
        RestoreFrom {
            cluster: Some("example".into()),
            path: None,
            claim: Some("ex-backups".into()),
            object: None,
            until: None,
        }
    );
    assert_eq!(
        fields(with("/snap/x.db", Some("example"), None)),
        ["spec.restore.cluster"]
    );
    assert_eq!(
        fields(with("x.db", None, Some(claim("c")))),
        ["spec.restore.location"]
    );
    assert_eq!(
        fields(with("example-20261205-012308-950", Some("Bad_Name"), None)),
        ["spec.restore.cluster"]
    );
    let both = crate::crd::RestoreLocation {
        path: Some("/b".into()),
        persistent_volume_claim: Some("c".into()),
        object_store: None,
    };
    assert_eq!(
        fields(with("example-20261205-012308-950", None, Some(both))),
        ["spec.restore.location"]
    );
    assert_eq!(
        fields(with(
            "example-20261205-012308-950",
            None,
            Some(claim("no/slash"))
        )),
        ["spec.restore.location.persistentVolumeClaim"]
    );
}

#[test]
fn an_object_store_is_checked_by_field_and_is_the_only_place() {
    let with = |location: serde_json::Value| {
        let mut s = spec(3, "3.4.23");
        s.backup = Some(
            serde_json::from_value(serde_json::json!({
                "interval": "30m", "maxBackups": 3, "location": location,
            }))
            .expect("a backup spec"),
        );
        validate("demo", &s, &V)
    };
    let v = with(serde_json::json!({"objectStore": {
        "url": "s3://etcd-backups/prod", "endpoint": "http://127.0.0.1:9000", "region": "eu-west-1",
    }}))
    .expect("valid");
    let o = v.backup.and_then(|b| b.object).expect("an object store");
    assert_eq!(o.cluster_prefix("demo"), "prod/demo");
    assert_eq!(
        fields(with(
            serde_json::json!({"objectStore": {"url": "s3://AK:SK@bkt"}})
        )),
        ["spec.backup.location.objectStore.url"]
    );
    assert_eq!(
        fields(with(
            serde_json::json!({"objectStore": {"url": "s3://bkt", "endpoint": "x"}})
        )),
        ["spec.backup.location.objectStore.endpoint"]
    );
    assert_eq!(
        fields(with(
            serde_json::json!({"path": "/b", "objectStore": {"url": "s3://bkt"}})
        )),
        ["spec.backup.location.objectStore"]
    );
    let mut s = spec(3, "3.4.23");
    s.restore = Some(crate::crd::RestoreSpec {
        backup: "example-20261205-012308-950".into(),
        cluster: None,
        location: Some(crate::crd::RestoreLocation {
            path: Some("/b".into()),
            object_store: Some(crate::crd::ObjectStoreSpec {
                url: "gs://UPPER".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        to_revision: None,
        to_time: None,
    });
    assert_eq!(
        fields(validate("demo", &s, &V)),
        [
            "spec.restore.location",
            "spec.restore.location.objectStore.url"
        ]
    );
}

#[test]
fn a_point_in_time_is_one_revision_or_one_time() {
    use crate::backup::point::PointInTime;
    let with = |backup: &str, rev: Option<i64>, time: Option<&str>| {
        let mut s = spec(3, "3.4.23");
        s.restore = Some(crate::crd::RestoreSpec {
            backup: backup.into(),
            cluster: None,
            location: None,
            to_revision: rev,
            to_time: time.map(str::to_string),
        });
        validate("demo", &s, &V)
    };
    let name = "example-20261205-012308-950";
    let v = with(name, Some(81234), None).expect("valid");
    assert_eq!(v.restore_from.until, Some(PointInTime::Revision(81234)));
    let v = with(name, None, Some("2026-12-04T10:41:59Z")).expect("valid");
    assert_eq!(
        v.restore_from.until,
        Some(PointInTime::Time(1_796_380_919_000))
    );
    assert_eq!(
        fields(with(name, Some(0), None)),
        ["spec.restore.toRevision"]
    );
    assert_eq!(
        fields(with(name, Some(5), Some("2026-12-04T10:41:59Z"))),
        ["spec.restore.toRevision"]
    );
    assert_eq!(
        fields(with(name, None, Some("yesterday"))),
        ["spec.restore.toTime"]
    );
    assert_eq!(
        fields(with("/snap/x.db", Some(5), None)),
        ["spec.restore.toRevision"]
    );
}
