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
