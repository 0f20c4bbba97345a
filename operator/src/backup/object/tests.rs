use proptest::prelude::*;

use super::*;
use crate::crd::ObjectStoreSpec;

fn spec(url: &str, endpoint: Option<&str>, region: Option<&str>) -> ObjectStoreSpec {
    ObjectStoreSpec {
        url: url.into(),
        endpoint: endpoint.map(str::to_string),
        region: region.map(str::to_string),
        credentials_secret: None,
        service_account_name: None,
    }
}

fn parse(url: &str) -> Result<ObjectLocation, Vec<(String, String)>> {
    ObjectLocation::parse(&spec(url, None, None), "o")
}

#[test]
fn the_three_stores_with_and_without_a_prefix() {
    let l = parse("s3://my-bucket/etcd/prod/").expect("ok");
    assert_eq!(
        (l.scheme, l.bucket.as_str(), l.prefix.as_str()),
        (Scheme::S3, "my-bucket", "etcd/prod")
    );
    assert_eq!(l.cluster_prefix("example"), "etcd/prod/example");
    assert_eq!(l.to_string(), "s3://my-bucket/etcd/prod");
    let g = parse("gs://b.example").expect("ok");
    assert_eq!((g.scheme, g.prefix.as_str()), (Scheme::Gcs, ""));
    assert_eq!(g.cluster_prefix("x"), "x");
    assert_eq!(parse("az://backups/a").expect("ok").scheme, Scheme::Azure);
}

#[test]
fn bad_urls_name_the_field_and_the_fix() {
    for (url, says) in [
        ("my-bucket", "write s3://"),
        ("ftp://bucket", "the stores are"),
        ("s3://AK:SECRET@bucket/p", "credentials come from"),
        ("s3://bucket/p?x=1", "must not hold"),
        ("s3://Bucket", "not a bucket name"),
        ("s3://ab", "not a bucket name"),
        ("s3://-ab", "not a bucket name"),
        ("s3://bucket/../other", "is not allowed"),
        ("s3://bucket/a//b", "is not allowed"),
        ("s3://bucket/a b", "is not allowed"),
    ] {
        let e = parse(url).expect_err(url);
        assert_eq!(e[0].0, "o.url", "{url}");
        assert!(e[0].1.contains(says), "{url}: {}", e[0].1);
    }
}

#[test]
fn endpoints_and_regions() {
    let ok = |e: &str| ObjectLocation::parse(&spec("s3://bkt", Some(e), None), "o");
    assert_eq!(
        ok("http://127.0.0.1:9000/")
            .expect("ok")
            .endpoint
            .as_deref(),
        Some("http://127.0.0.1:9000")
    );
    ok("https://minio.example.com").expect("ok");
    for bad in [
        "127.0.0.1:9000",
        "http://user:pw@host",
        "http://host:0",
        "http://host:99999",
        "http://",
    ] {
        let e = ok(bad).expect_err(bad);
        assert_eq!(e[0].0, "o.endpoint", "{bad}");
    }
    // A path: an Azure emulator's account only.
    assert_eq!(
        ok("http://host/acct").expect_err("s3 path")[0].0,
        "o.endpoint"
    );
    let az = ObjectLocation::parse(
        &spec(
            "az://c0ntainer",
            Some("http://127.0.0.1:10000/devstoreaccount1"),
            None,
        ),
        "o",
    );
    assert!(az.is_ok(), "{az:?}");
    let r = |r: &str| ObjectLocation::parse(&spec("s3://bkt", None, Some(r)), "o");
    r("eu-west-1").expect("ok");
    assert_eq!(r("EU West").expect_err("bad")[0].0, "o.region");
}

#[test]
fn the_secret_and_the_service_account_are_object_names() {
    let mut s = spec("s3://bkt", None, None);
    s.credentials_secret = Some("s3-keys".into());
    s.service_account_name = Some("backup-writer".into());
    let l = ObjectLocation::parse(&s, "o").expect("ok");
    assert_eq!(l.secret.as_deref(), Some("s3-keys"));
    assert_eq!(l.service_account.as_deref(), Some("backup-writer"));
    s.credentials_secret = Some("S3_Keys".into());
    s.service_account_name = Some("../sa".into());
    let fields: Vec<String> = ObjectLocation::parse(&s, "o")
        .expect_err("bad names")
        .into_iter()
        .map(|(f, _)| f)
        .collect();
    assert_eq!(fields, ["o.credentialsSecret", "o.serviceAccountName"]);
}

proptest! {
    /// Whatever the text, parsing does not panic, and what is accepted can
    /// never step out of its prefix or carry credentials.
    #[test]
    fn anything_parses_without_panic_and_accepted_places_are_confined(
        url in "(s3|gs|az|http)?(://)?[a-z0-9./@?:_ -]{0,40}",
        endpoint in proptest::option::of("(https?://)?[a-z0-9.:@/\\[\\]-]{0,30}"),
    ) {
        if let Ok(l) = ObjectLocation::parse(&spec(&url, endpoint.as_deref(), None), "o") {
            let p = l.cluster_prefix("c");
            prop_assert!(!p.split('/').any(|s| s.is_empty() || s == "." || s == ".."), "{p}");
            prop_assert!(!url.contains('@'));
            prop_assert!(l.endpoint.as_deref().is_none_or(|e| !e.contains('@')));
        }
    }
}

#[test]
fn secrets_are_scrubbed_from_messages() {
    let secrets = vec!["wJalrXUtnFEMI/K7MDENG".to_string(), "abc".to_string()];
    let m = client::scrub_with(
        "denied: signature for wJalrXUtnFEMI/K7MDENG did not match (abc)",
        &secrets,
    );
    assert_eq!(m, "denied: signature for *** did not match (abc)");
}
