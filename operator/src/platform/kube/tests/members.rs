//! How pods and claims become members (no API calls).

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

use super::super::members::{Found, Mark, join};
use super::fixtures::{Seen, config};
use crate::crd::StoragePolicy::{Ephemeral, Persistent};
use crate::member::Tuning;
use crate::version::Version;

fn one(pods: &[Seen], claims: &[Seen]) -> Found {
    let pods: Vec<Pod> = pods.iter().map(Seen::typed).collect();
    let claims: Vec<PersistentVolumeClaim> = claims.iter().map(Seen::typed).collect();
    let mut found = join(&pods, &claims).expect("readable configs");
    assert_eq!(found.len(), 1, "{found:?}");
    found.remove(0)
}

#[test]
fn a_ready_pod_marks_its_claim_started() {
    let f = one(
        &[Seen::pod("demo-0", "3.5.1", Persistent).ready()],
        &[Seen::claim("demo-0", "3.5.1")],
    );
    assert!(f.member.running && f.member.has_data);
    let mark = Mark::Claim {
        name: "demo-0-data".into(),
        started: true,
        config: None,
    };
    assert_eq!(f.mark, Some(mark));
    assert!(f.member.started_at.is_some());
}

#[test]
fn a_pod_that_never_got_ready_leaves_no_data() {
    let f = one(
        &[Seen::pod("demo-0", "3.5.1", Persistent)],
        &[Seen::claim("demo-0", "3.5.1")],
    );
    assert!(f.member.running, "pending counts as running: it will start");
    assert!(!f.member.has_data);
    assert_eq!(f.mark, None);
}

#[test]
fn a_deleted_pod_with_a_started_claim_can_restart_in_place() {
    let f = one(&[], &[Seen::claim("demo-0", "3.5.1").started()]);
    assert!(!f.member.running);
    assert!(f.member.has_data);
    assert_eq!(f.member.addr.name, "demo-0");
    assert!(f.member.bootstrap);
}

#[test]
fn terminating_or_failed_pods_do_not_run() {
    let claim = Seen::claim("demo-0", "3.5.1").started();
    for pod in [
        Seen::pod("demo-0", "3.5.1", Persistent)
            .ready()
            .terminating(),
        Seen::pod("demo-0", "3.5.1", Persistent)
            .ready()
            .phase("Failed"),
    ] {
        let f = one(&[pod], std::slice::from_ref(&claim));
        assert!(!f.member.running);
        assert!(f.member.has_data);
    }
}

#[test]
fn a_claim_being_deleted_holds_no_data() {
    let f = one(
        &[Seen::pod("demo-0", "3.5.1", Persistent).ready()],
        &[Seen::claim("demo-0", "3.5.1").started().terminating()],
    );
    assert!(!f.member.has_data);
    assert_eq!(f.mark, None);
}

#[test]
fn version_is_the_running_pods_else_the_claims() {
    // The claim records the version the data last ran (3.5.1); a new pod
    // on 3.5.2 that is not ready yet runs 3.5.2, and the claim stays.
    let claim = Seen::claim("demo-0", "3.5.1").started();
    let new = Seen::pod("demo-0", "3.5.2", Persistent);
    let f = one(std::slice::from_ref(&new), std::slice::from_ref(&claim));
    assert_eq!(f.member.version, Version::new(3, 5, 2));
    assert_eq!(f.mark, None);
    let f = one(&[new.terminating()], &[claim]);
    assert_eq!(f.member.version, Version::new(3, 5, 1));
}

#[test]
fn a_member_ready_on_another_version_records_it_on_its_claim() {
    let claim = Seen::claim("demo-0", "3.5.1").started();
    let pod = Seen::pod("demo-0", "3.5.2", Persistent)
        .ready()
        .runs("3.5.2");
    let f = one(&[pod], &[claim]);
    let Some(Mark::Claim {
        name,
        started: false,
        config: Some(config),
    }) = f.mark
    else {
        panic!("expected the new version on the claim, got {:?}", f.mark);
    };
    assert_eq!(name, "demo-0-data");
    assert_eq!(config.version, Version::new(3, 5, 2));
    assert!(f.member.has_data);
}

/// New timing (spec.tuning) is recorded on the claim as a new version
/// is: once the member is ready on it, not before.
#[test]
fn a_member_ready_on_new_timing_records_it_on_its_claim() {
    let claim = Seen::claim("demo-0", "3.5.1").started();
    let mut tuned = config("demo-0", "3.5.1");
    tuned.tuning = Tuning::new(Some(25), Some(250));
    let starting = Seen::pod_of(&tuned, Persistent);
    let f = one(
        std::slice::from_ref(&starting),
        std::slice::from_ref(&claim),
    );
    assert!(f.mark.is_none(), "not ready yet: {:?}", f.mark);
    let f = one(&[starting.ready().runs("3.5.1")], &[claim]);
    let Some(Mark::Claim {
        started: false,
        config: Some(config),
        ..
    }) = f.mark
    else {
        panic!("expected the new timing on the claim, got {:?}", f.mark);
    };
    assert_eq!(config.tuning, tuned.tuning);
}

/// A new quota is recorded on the claim as new timing is, so a member
/// whose pod is gone restarts with the quota it last ran with, not the
/// one its data was created with (the claim kept the old one, and the
/// plan restarted the member again for it).
#[test]
fn a_member_ready_on_a_new_quota_records_it_on_its_claim() {
    let claim = Seen::claim("demo-0", "3.5.1").started();
    let mut raised = config("demo-0", "3.5.1");
    raised.backend.quota_backend_bytes = Some(64 << 20);
    let pod = Seen::pod_of(&raised, Persistent).ready().runs("3.5.1");
    let f = one(&[pod], &[claim]);
    let Some(Mark::Claim {
        config: Some(config),
        ..
    }) = f.mark
    else {
        panic!("expected the new quota on the claim, got {:?}", f.mark);
    };
    assert_eq!(config.settings(), raised.settings());
    assert_eq!(f.member.backend, raised.backend);
}

#[test]
fn a_pod_whose_image_cannot_be_pulled_does_not_run() {
    // An upgrade to a version without an image: the member is down, at
    // the version its data ran, and says why.
    let claim = Seen::claim("demo-0", "3.5.1").started();
    for reason in ["ErrImagePull", "ImagePullBackOff"] {
        let pod = Seen::pod("demo-0", "3.5.99", Persistent)
            .waiting(reason, "manifest for quay.io/coreos/etcd:v3.5.99 not found");
        let f = one(&[pod.phase("Pending")], std::slice::from_ref(&claim));
        assert!(!f.member.running, "{reason}");
        assert!(!f.member.crash_looping, "{reason}");
        assert!(f.member.has_data, "{reason}");
        assert_eq!(f.member.version, Version::new(3, 5, 1), "{reason}");
        let problem = f.member.problem.unwrap_or_default();
        assert!(problem.starts_with(reason), "{problem}");
    }
}

#[test]
fn empty_dir_members_live_and_die_with_their_pod() {
    let f = one(&[Seen::pod("demo-0", "3.5.1", Ephemeral).ready()], &[]);
    assert!(f.member.running && f.member.has_data);
    assert_eq!(f.mark, Some(Mark::Pod("demo-0".into())));
    let f = one(
        &[Seen::pod("demo-0", "3.5.1", Ephemeral)
            .ready()
            .started()
            .phase("Failed")],
        &[],
    );
    assert!(!f.member.running && !f.member.has_data);
}

#[test]
fn a_persistent_pod_whose_claim_is_gone_has_no_data() {
    let f = one(
        &[Seen::pod("demo-0", "3.5.1", Persistent).ready().started()],
        &[],
    );
    assert!(f.member.running);
    assert!(!f.member.has_data);
}

#[test]
fn an_unreadable_config_is_an_error_naming_the_object() {
    let mut pod = Seen::pod("demo-0", "3.5.1", Ephemeral);
    pod.0["metadata"]["annotations"]["etcdoperator.dev/member-config"] = "{".into();
    let pods: Vec<Pod> = vec![pod.typed()];
    let e = join(&pods, &[]).expect_err("unreadable");
    assert!(
        e.to_string()
            .starts_with("pods/demo-0: unreadable member config"),
        "{e}"
    );
}

#[test]
fn the_operator_calls_a_running_pod_at_its_ip() {
    let claim = Seen::claim("demo-0", "3.5.1").started();
    let ready = Seen::pod("demo-0", "3.5.1", Persistent).ready();
    let f = one(
        &[ready.clone().ip("10.244.1.7")],
        std::slice::from_ref(&claim),
    );
    assert_eq!(f.member.call_url.as_deref(), Some("http://10.244.1.7:2379"));
    assert_eq!(
        f.member.addr.client_url, "http://demo-0.demo.default.svc:2379",
        "the published client URL stays the DNS name"
    );
    let f = one(
        &[ready.clone().ip("fd00:10:244::7")],
        std::slice::from_ref(&claim),
    );
    assert_eq!(
        f.member.call_url.as_deref(),
        Some("http://[fd00:10:244::7]:2379")
    );
    // Pending without an IP, or on its way out: not called at all.
    let pending = Seen::pod("demo-0", "3.5.1", Persistent);
    let f = one(&[pending], std::slice::from_ref(&claim));
    assert!(f.member.running);
    assert_eq!(f.member.call_url, None);
    let f = one(&[ready.ip("10.244.1.7").terminating()], &[claim]);
    assert_eq!(f.member.call_url, None);
}

#[test]
fn urls_of_ips_and_names() {
    use crate::platform::http_url;
    assert_eq!(http_url("10.0.0.1", 2379), "http://10.0.0.1:2379");
    assert_eq!(http_url("fd00::1", 2379), "http://[fd00::1]:2379");
    assert_eq!(
        http_url("::ffff:10.0.0.1", 2379),
        "http://[::ffff:10.0.0.1]:2379"
    );
    assert_eq!(
        http_url("demo-0.demo.default.svc", 2379),
        "http://demo-0.demo.default.svc:2379"
    );
}

const FATAL: &str = "{\"level\":\"info\",\"msg\":\"starting\"}\n\
    {\"level\":\"fatal\",\"msg\":\"failed to recover v3 backend from snapshot\",\"error\":\"database file (/var/lib/etcd/data/member/snap/db) of the backend is missing\"}\n";

#[test]
fn a_persistent_member_crash_loops_after_three_fast_failures() {
    let claim = Seen::claim("demo-2", "3.5.1").started();
    let pod = |restarts| {
        Seen::pod("demo-2", "3.5.1", Persistent)
            .crash_loop(restarts, 1, 1, FATAL)
            .ip("10.244.1.9")
    };
    let f = one(&[pod(2)], std::slice::from_ref(&claim));
    assert!(
        f.member.running && !f.member.crash_looping,
        "the kubelet retries"
    );
    let problem = f.member.problem.expect("a problem");
    assert_eq!(
        problem,
        "CrashLoopBackOff: restarted 2 time(s), last exit code 1: failed to recover v3 backend \
         from snapshot: database file (/var/lib/etcd/data/member/snap/db) of the backend is \
         missing"
    );
    let f = one(&[pod(3)], std::slice::from_ref(&claim));
    assert!(!f.member.running && f.member.crash_looping, "{f:?}");
    assert!(
        f.member.has_data,
        "the claim is still there: the plan decides"
    );
    assert_eq!(f.member.call_url, None);
    assert!(
        f.member
            .problem
            .is_some_and(|p| p.starts_with("CrashLoopBackOff: restarted 3"))
    );
}

#[test]
fn slow_failures_and_kills_are_no_crash_loop() {
    let claim = Seen::claim("demo-2", "3.5.1").started();
    for (exit, ran) in [(1, 600), (137, 1), (143, 1)] {
        let pod = Seen::pod("demo-2", "3.5.1", Persistent).crash_loop(9, exit, ran, "");
        let f = one(&[pod], std::slice::from_ref(&claim));
        assert!(
            f.member.running && !f.member.crash_looping,
            "exit {exit} after {ran} s"
        );
        let problem = f.member.problem.expect("a problem");
        assert_eq!(
            problem,
            format!("CrashLoopBackOff: restarted 9 time(s), last exit code {exit}")
        );
    }
}

#[test]
fn an_empty_dir_member_in_crash_loop_back_off_is_down() {
    let pod = Seen::pod("demo-0", "3.5.1", Ephemeral)
        .started()
        .crash_loop(1, 1, 1, "panic: boom\n\ngoroutine 1 [running]:\n");
    let f = one(&[pod], &[]);
    assert!(!f.member.running && f.member.crash_looping && !f.member.has_data);
    assert_eq!(
        f.member.problem.as_deref(),
        Some("CrashLoopBackOff: restarted 1 time(s), last exit code 1: panic: boom")
    );
}

#[test]
fn pods_stuck_pending_say_why() {
    let claim = Seen::claim("demo-0", "3.5.1");
    let message = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.";
    let f = one(
        &[Seen::pod("demo-0", "3.5.1", Persistent).unschedulable(message)],
        std::slice::from_ref(&claim),
    );
    assert!(f.member.running, "it will run once scheduled");
    assert_eq!(f.member.problem, Some(format!("Pending: {message}")));
    for reason in ["ImagePullBackOff", "ErrImagePull"] {
        let pull = "Back-off pulling image \"quay.io/coreos/etcd:v3.5.1\"";
        let pod = Seen::pod("demo-0", "3.5.1", Persistent).waiting(reason, pull);
        let f = one(&[pod], std::slice::from_ref(&claim));
        // Not running: it never will until the image can be pulled.
        assert!(!f.member.running && !f.member.crash_looping);
        assert_eq!(f.member.problem, Some(format!("{reason}: {pull}")));
    }
    let creating = Seen::pod("demo-0", "3.5.1", Persistent).waiting("ContainerCreating", "");
    assert_eq!(
        one(&[creating], std::slice::from_ref(&claim))
            .member
            .problem,
        None
    );
    let ready = Seen::pod("demo-0", "3.5.1", Persistent).ready();
    assert_eq!(one(&[ready], &[claim]).member.problem, None);
}

#[test]
fn a_long_termination_message_is_cut() {
    let long = "x".repeat(5000);
    let pod = Seen::pod("demo-0", "3.5.1", Persistent).crash_loop(1, 2, 1, &long);
    let f = one(&[pod], &[]);
    let problem = f.member.problem.expect("a problem");
    assert!(problem.chars().count() <= 303, "{}", problem.len());
    assert!(problem.ends_with("..."));
}

#[test]
fn an_evicted_pod_says_so() {
    let mut pod = Seen::pod("demo-0", "3.5.1", Persistent).phase("Failed");
    pod.0["status"]["reason"] = "Evicted".into();
    pod.0["status"]["message"] = "The node was low on resource: ephemeral-storage.".into();
    let f = one(&[pod], &[Seen::claim("demo-0", "3.5.1").started()]);
    assert!(!f.member.running && !f.member.crash_looping);
    assert_eq!(
        f.member.problem.as_deref(),
        Some("Failed: Evicted: The node was low on resource: ephemeral-storage.")
    );
}
