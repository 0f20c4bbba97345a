use super::compare::difference;
use super::*;

/// Every version is fine here (whether a binary exists is not the point).
struct AnyVersion;

impl etcd_operator::validate::Versions for AnyVersion {
    fn check(&self, _: etcd_operator::version::Version) -> Result<(), String> {
        Ok(())
    }
}

fn primary(backup: &str) -> ClusterSpec {
    let yaml = format!("name: prod\nsize: 3\nversion: \"3.4.23\"\n{backup}");
    etcd_operator::yaml::from_str::<ClusterSpec>(&yaml).expect("a cluster")
}

fn standby(stream: bool) -> Standby {
    Standby {
        size: 1,
        stream,
        max_lag: crate::scenario::Dur(Duration::from_secs(10)),
        catch_up: crate::scenario::Dur(Duration::from_secs(60)),
        chaos: None,
        lose_primary_at: None,
    }
}

#[test]
fn the_standby_follows_the_primary_from_where_its_backups_are() {
    let eps = [
        "http://127.0.0.1:1".to_string(),
        "http://127.0.0.1:2".into(),
    ];
    // The default folder: no location.
    let p = primary("backup: {interval: 10s, maxBackups: 3, continuous: {segmentInterval: 1s}}\n");
    let c = cluster(&p, &standby(true), &eps);
    assert_eq!(c.name, "prod-standby");
    assert_eq!(c.spec.size, 1);
    assert_eq!(c.spec.version, "3.4.23");
    assert!(c.spec.backup.is_none(), "the standby takes no backups");
    let sb = c.spec.standby.as_ref().expect("standby");
    assert_eq!(sb.cluster, "prod");
    assert_eq!(sb.location, None);
    assert_eq!(
        sb.stream.as_ref().map(|s| s.endpoints.clone()),
        Some(eps.to_vec())
    );
    assert!(!sb.promote);

    // The run's store: the same objectStore block; no stream.
    let p = primary(
        "backup: {interval: 10s, maxBackups: 3, continuous: {segmentInterval: 1s}, location: \
         {objectStore: {url: \"s3://soak\", endpoint: \"http://127.0.0.1:9\"}}}\n",
    );
    let c = cluster(&p, &standby(false), &eps);
    let sb = c.spec.standby.as_ref().expect("standby");
    assert!(sb.stream.is_none());
    let store = sb
        .location
        .as_ref()
        .and_then(|l| l.object_store.as_ref())
        .expect("objectStore");
    assert_eq!(store.url, "s3://soak");
    assert_eq!(store.endpoint.as_deref(), Some("http://127.0.0.1:9"));

    // The operator accepts what the runner writes.
    let m = etcd_operator::manifest::parse(&c.manifest(false)).expect("the operator reads it");
    assert_eq!(m[0].spec, c.spec);
    let checked = etcd_operator::validate::validate(&c.name, &c.spec, &AnyVersion);
    assert!(checked.is_ok(), "{checked:?}");
}

#[test]
fn read_backs_differ_by_key_metadata_or_count() {
    let kv = |k: &str, m: i64| (k.as_bytes().to_vec(), b"v".to_vec(), 2, m, 1);
    let a = vec![kv("a", 3), kv("b", 4)];
    assert_eq!(difference(&a, &a), None);
    let b = vec![kv("a", 3), kv("b", 5)];
    let d = difference(&a, &b).expect("differs");
    assert!(d.contains("key b differs") && d.contains("mod 4"), "{d}");
    let c = vec![kv("a", 3), kv("c", 4)];
    assert!(difference(&a, &c).expect("differs").contains("key b here"));
    let d = difference(&a, &a[..1]).expect("differs");
    assert_eq!(d, "2 keys here, 1 on the primary");
}

mod after_the_promotion {
    use super::super::after::check;
    use crate::invariants::promotion::{AtR, Promotion};
    use crate::ops::{Found, Kind, Record, Status};

    fn op(id: u64, kind: Kind, key: &str, (call, ret): (u64, u64), rev: i64) -> Record {
        let mut r = Record::new("w0", kind, key, call);
        r.id = id;
        r.ret = ret;
        r.status = Status::Ok;
        r.rev = Some(rev);
        r
    }

    fn promotion(at_r: AtR) -> Promotion {
        Promotion {
            moved_at: Some(1),
            at_r: Some(at_r),
            ..Promotion::default()
        }
    }

    fn run(records: &[Record], at_r: AtR) -> crate::lin::Report {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("history.jsonl");
        let text: String = records
            .iter()
            .map(|r| serde_json::to_string(r).expect("json") + "\n")
            .collect();
        std::fs::write(&path, text).expect("write");
        check(&path, &promotion(at_r), None, 10_000).expect("checked")
    }

    #[test]
    fn the_history_after_the_move_starts_from_the_keys_at_r() {
        let at_r: AtR = [("soak/k000001".to_string(), ("w0#5".to_string(), 40))].into();
        // Before the move (call < 1000 µs): the primary's, left out even
        // though the promoted cluster never saw its write.
        let mut lost = op(0, Kind::Put, "soak/k000001", (10, 20), 45);
        lost.value = Some("w0#6".into());
        // After: a read of the value at R, then a put and its read.
        let mut read = op(1, Kind::Get, "soak/k000001", (2_000, 2_100), 41);
        read.found = Some(Found {
            value: "w0#5".into(),
            mod_rev: 40,
        });
        let mut put = op(2, Kind::Put, "soak/k000001", (2_200, 2_300), 42);
        put.value = Some("w0#7".into());
        let r = run(&[lost.clone(), read.clone(), put], at_r.clone());
        assert!(r.pass(), "{r:?}");
        assert_eq!(r.counts.ops, 3, "one seed and two operations");

        // A read after the move of the lost write is a violation.
        let mut stale = read;
        stale.found = Some(Found {
            value: "w0#6".into(),
            mod_rev: 45,
        });
        let r = run(&[lost, stale], at_r);
        assert!(!r.pass(), "{r:?}");
    }

    #[test]
    fn nothing_to_start_from_is_said() {
        let p = Promotion::default();
        let e = check(std::path::Path::new("/nonexistent"), &p, None, 0).expect_err("no R");
        assert!(e.contains("not read"), "{e}");
    }
}
