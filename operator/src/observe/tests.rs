//! Tests of what an observation makes of members' answers.

use super::not_yet;
use crate::etcd::{self, ErrorKind};
use crate::version::Version;

fn failed(kind: ErrorKind) -> Option<etcd::Result<etcd::MemberStatus>> {
    Some(Err(etcd::Error {
        op: "status",
        url: "https://127.1.2.3:2379".into(),
        kind,
    }))
}

#[test]
fn only_every_member_refusing_tls_is_a_tls_refusal() {
    let tls = || {
        failed(ErrorKind::TlsRefused(
            "invalid peer certificate: UnknownIssuer".into(),
        ))
    };
    let down = || {
        failed(ErrorKind::Unreachable(
            "tcp connect error: Connection refused".into(),
        ))
    };
    let refusal = super::tls_refusal(&[tls(), None, tls()]).expect("a refusal");
    assert!(refusal.contains("UnknownIssuer"), "{refusal}");
    assert_eq!(
        super::tls_refusal(&[tls(), down()]),
        None,
        "one is simply down"
    );
    assert_eq!(super::tls_refusal(&[None, None]), None, "nobody was asked");
}

#[test]
fn tls_handshake_failures_are_told_from_members_that_are_down() {
    for text in [
        "transport error: invalid peer certificate: UnknownIssuer",
        "received fatal alert: BadCertificate",
        "error trying to connect: received fatal alert: UnknownCA",
        "tls handshake eof",
    ] {
        assert!(etcd::is_tls_failure(text), "{text}");
    }
    for text in [
        "tcp connect error: Connection refused (os error 111)",
        "deadline has elapsed",
    ] {
        assert!(!etcd::is_tls_failure(text), "{text}");
    }
}

#[test]
fn names_this_operator_gave() {
    let record = crate::platform::ClusterRecord {
        next_index: 3,
        ..Default::default()
    };
    assert!(super::created("demo", &record, "demo-2"));
    assert!(!super::created("demo", &record, "demo-3"), "not given yet");
    assert!(!super::created("demo", &record, "demo2-0"));
    assert!(!super::created("demo", &record, "other"));
}

#[test]
fn a_member_counts_at_its_version_only_once_etcd_reports_it() {
    let v = Version::new(3, 5, 1);
    assert_eq!(not_yet(v, "3.5.1"), None);
    let note = not_yet(v, "3.4.23").expect("still the old process");
    assert!(note.contains("3.4.23") && note.contains("3.5.1"), "{note}");
    assert_eq!(
        not_yet(v, ""),
        None,
        "no version reported: nothing to judge"
    );
}
