//! Tests of leader election: the pure rules (expiry, what to do next) with
//! property tests, and the requests against a mocked API server that keeps
//! one Lease with a resourceVersion and answers 409 as a real one does.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::client::Body;
use proptest::prelude::*;
use serde_json::{Value, json};
use tower_test::mock;

use super::*;

const PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/ops/leases/etcd-operator";

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).expect("a time")
}

fn held(holder: Option<&str>, renewed: Option<Timestamp>, seconds: Option<i32>) -> Lease {
    Lease {
        spec: Some(LeaseSpec {
            holder_identity: holder.map(str::to_string),
            renew_time: renewed.map(MicroTime),
            lease_duration_seconds: seconds,
            ..LeaseSpec::default()
        }),
        ..Lease::default()
    }
}

#[test]
fn expiry_is_renewal_plus_duration() {
    assert!(!is_expired(Some(at(0)), 15, at(15)));
    assert!(is_expired(Some(at(0)), 15, at(16)));
    assert!(is_expired(None, 15, at(0)));
    assert!(!is_expired(Some(Timestamp::MAX), i32::MAX, at(0)));
}

#[test]
fn next_action_from_the_lease() {
    assert_eq!(next(None, "a", at(0), 15), Next::Create);
    assert_eq!(
        next(Some(&held(None, Some(at(0)), Some(15))), "a", at(1), 15),
        Next::Take
    );
    assert_eq!(
        next(Some(&held(Some(""), None, None)), "a", at(1), 15),
        Next::Take
    );
    assert_eq!(
        next(
            Some(&held(Some("a"), Some(at(0)), Some(15))),
            "a",
            at(99),
            15
        ),
        Next::Renew
    );
    let fresh = held(Some("b"), Some(at(0)), Some(15));
    assert_eq!(
        next(Some(&fresh), "a", at(10), 15),
        Next::Wait { holder: "b".into() }
    );
    assert_eq!(next(Some(&fresh), "a", at(16), 15), Next::Take);
    // No duration written: ours counts.
    let silent = held(Some("b"), Some(at(0)), None);
    assert_eq!(
        next(Some(&silent), "a", at(10), 15),
        Next::Wait { holder: "b".into() }
    );
    assert_eq!(next(Some(&silent), "a", at(10), 5), Next::Take);
}

proptest! {
    /// Safety: a fresh Lease held by another is never taken, whatever the
    /// times; and an expired one is always taken.
    #[test]
    fn another_holders_fresh_lease_is_never_taken(
        renewed in -1_000i64..1_000, lasts in 0i32..100, after in 0i64..200,
    ) {
        let lease = held(Some("b"), Some(at(renewed)), Some(lasts));
        let now = at(renewed + after);
        let action = next(Some(&lease), "a", now, 15);
        if after <= i64::from(lasts) {
            prop_assert_eq!(action, Next::Wait { holder: "b".into() });
        } else {
            prop_assert_eq!(action, Next::Take);
        }
    }

    /// Our own Lease is renewed, never waited on, whatever its times.
    #[test]
    fn own_lease_is_renewed(renewed in proptest::option::of(-1_000i64..1_000), now in -1_000i64..1_000) {
        let lease = held(Some("a"), renewed.map(at), Some(15));
        prop_assert_eq!(next(Some(&lease), "a", at(now), 15), Next::Renew);
    }
}

/// The mocked API server's state: one Lease (or none), and what it does.
#[derive(Clone, Default)]
struct Server {
    lease: Arc<Mutex<Option<Value>>>,
    version: Arc<Mutex<u64>>,
    /// Answer every request with 500.
    broken: Arc<Mutex<bool>>,
    /// Answer the next write with 409, as if another replica wrote first.
    conflict_next_write: Arc<Mutex<bool>>,
    writes: Arc<Mutex<usize>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "reason": reason, "code": code, "message": reason})
}

impl Server {
    fn answer(&self, method: &Method, path: &str, body: Value) -> (u16, Value) {
        if *lock(&self.broken) {
            return (500, status(500, "InternalError"));
        }
        let collection = PATH.rsplit_once('/').map(|(c, _)| c).unwrap_or(PATH);
        let mut lease = lock(&self.lease);
        let write = |lease: &mut Option<Value>, mut body: Value| {
            let mut v = lock(&self.version);
            *v += 1;
            body["metadata"]["resourceVersion"] = json!(v.to_string());
            *lock(&self.writes) += 1;
            *lease = Some(body.clone());
            (200, body)
        };
        if *method != Method::GET && std::mem::take(&mut *lock(&self.conflict_next_write)) {
            return (409, status(409, "Conflict"));
        }
        match (method.clone(), path) {
            (Method::GET, PATH) => match lease.as_ref() {
                Some(l) => (200, l.clone()),
                None => (404, status(404, "NotFound")),
            },
            (Method::POST, p) if p == collection => {
                if lease.is_some() {
                    return (409, status(409, "AlreadyExists"));
                }
                write(&mut lease, body)
            }
            (Method::PUT, PATH) => {
                let stored = lease
                    .as_ref()
                    .map(|l| l["metadata"]["resourceVersion"].clone());
                if stored != Some(body["metadata"]["resourceVersion"].clone()) {
                    return (409, status(409, "Conflict"));
                }
                write(&mut lease, body)
            }
            _ => (404, status(404, "NotFound")),
        }
    }

    fn holder(&self) -> Option<String> {
        lock(&self.lease)
            .as_ref()
            .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string))
    }

    fn set(&self, holder: &str, renewed: Timestamp) {
        let v = {
            let mut v = lock(&self.version);
            *v += 1;
            *v
        };
        *lock(&self.lease) = Some(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "etcd-operator", "namespace": "ops", "resourceVersion": v.to_string()},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                "renewTime": MicroTime(renewed)},
        }));
    }
}

fn server() -> (kube::Client, Server) {
    let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
    let state = Server::default();
    let s = state.clone();
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let (code, answer) = s.answer(&parts.method, parts.uri.path(), body);
            let response = Response::builder()
                .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Body::from(serde_json::to_vec(&answer).unwrap_or_default()));
            if let Ok(r) = response {
                send.send_response(r);
            }
        }
    });
    (kube::Client::new(service, "ops"), state)
}

fn elector(client: &kube::Client, me: &str) -> Elector {
    Elector::new(client.clone(), "ops", DEFAULT_NAME, me, Timing::default())
}

#[tokio::test]
async fn acquires_when_absent() {
    let (client, server) = server();
    let a = elector(&client, "a");
    assert_eq!(a.step(Timestamp::now()).await.expect("step"), Role::Leader);
    assert_eq!(server.holder().as_deref(), Some("a"));
    let stored = lock(&server.lease).clone().expect("a lease");
    assert_eq!(stored["spec"]["leaseDurationSeconds"], json!(15));
}

#[tokio::test]
async fn acquires_when_expired() {
    let (client, server) = server();
    let now = Timestamp::now();
    server.set("b", now - SignedDuration::from_secs(16));
    let a = elector(&client, "a");
    assert_eq!(a.step(now).await.expect("step"), Role::Leader);
    assert_eq!(server.holder().as_deref(), Some("a"));
    let stored = lock(&server.lease).clone().expect("a lease");
    assert_eq!(stored["spec"]["leaseTransitions"], json!(1));
}

#[tokio::test]
async fn not_acquired_while_another_holds_a_fresh_lease() {
    let (client, server) = server();
    let now = Timestamp::now();
    server.set("b", now - SignedDuration::from_secs(5));
    let a = elector(&client, "a");
    assert_eq!(
        a.step(now).await.expect("step"),
        Role::Follower { holder: "b".into() }
    );
    assert_eq!(server.holder().as_deref(), Some("b"));
    assert_eq!(*lock(&server.writes), 0);
}

#[tokio::test]
async fn renewing_keeps_it_and_moves_renew_time() {
    let (client, server) = server();
    let a = elector(&client, "a");
    let first = Timestamp::now();
    assert_eq!(a.step(first).await.expect("acquire"), Role::Leader);
    let later = first + SignedDuration::from_secs(30);
    assert_eq!(a.step(later).await.expect("renew"), Role::Leader);
    let stored = lock(&server.lease).clone().expect("a lease");
    assert_eq!(stored["spec"]["holderIdentity"], json!("a"));
    assert_eq!(stored["spec"]["renewTime"], json!(MicroTime(later)));
    // A second replica meanwhile waits.
    let b = elector(&client, "b");
    assert_eq!(
        b.step(later).await.expect("step"),
        Role::Follower { holder: "a".into() }
    );
}

#[tokio::test]
async fn conflict_on_renew_means_not_leader() {
    let (client, server) = server();
    let a = elector(&client, "a");
    assert_eq!(
        a.step(Timestamp::now()).await.expect("acquire"),
        Role::Leader
    );
    *lock(&server.conflict_next_write) = true;
    assert!(matches!(
        a.step(Timestamp::now()).await.expect("renew"),
        Role::Follower { .. }
    ));
}

#[tokio::test]
async fn of_two_racing_for_an_expired_lease_one_wins() {
    let (client, server) = server();
    let now = Timestamp::now();
    server.set("old", now - SignedDuration::from_secs(60));
    let (a, b) = (elector(&client, "a"), elector(&client, "b"));
    let (ra, rb) = tokio::join!(a.step(now), b.step(now));
    let leaders = [ra.expect("a"), rb.expect("b")]
        .iter()
        .filter(|r| **r == Role::Leader)
        .count();
    assert_eq!(leaders, 1);
    assert!(matches!(server.holder().as_deref(), Some("a" | "b")));
}

#[tokio::test(start_paused = true)]
async fn hold_returns_when_another_takes_it() {
    let (client, server) = server();
    let a = elector(&client, "a");
    assert_eq!(
        a.step(Timestamp::now()).await.expect("acquire"),
        Role::Leader
    );
    let holding = tokio::spawn({
        let a = a.clone();
        async move { a.hold().await }
    });
    server.set("b", Timestamp::now());
    let lost = tokio::time::timeout(Duration::from_secs(60), holding)
        .await
        .expect("hold returns")
        .expect("joined");
    assert_eq!(lost, Lost::Taken { holder: "b".into() });
}

#[tokio::test(start_paused = true)]
async fn hold_returns_when_renewals_fail_past_the_deadline() {
    let (client, server) = server();
    let a = elector(&client, "a");
    assert_eq!(
        a.step(Timestamp::now()).await.expect("acquire"),
        Role::Leader
    );
    *lock(&server.broken) = true;
    let started = tokio::time::Instant::now();
    let lost = tokio::time::timeout(Duration::from_secs(60), a.hold())
        .await
        .expect("hold returns");
    assert!(matches!(lost, Lost::Deadline { .. }), "{lost:?}");
    // Paused time: exactly the retries it took, never before the deadline
    // and before the lease could have expired for the others.
    let took = started.elapsed();
    let timing = Timing::default();
    assert!(took >= timing.renew_deadline, "{took:?}");
    assert!(took < timing.duration, "{took:?}");
}

#[tokio::test]
async fn release_clears_the_holder_and_another_takes_over_at_once() {
    let (client, server) = server();
    let (a, b) = (elector(&client, "a"), elector(&client, "b"));
    let now = Timestamp::now();
    assert_eq!(a.step(now).await.expect("acquire"), Role::Leader);
    a.release().await.expect("release");
    assert_eq!(server.holder(), None);
    assert_eq!(b.step(Timestamp::now()).await.expect("take"), Role::Leader);
    // Releasing a lease another holds leaves it alone.
    a.release().await.expect("no-op release");
    assert_eq!(server.holder().as_deref(), Some("b"));
}

#[tokio::test(start_paused = true)]
async fn acquire_waits_says_why_and_then_leads() {
    let (client, server) = server();
    server.set("b", Timestamp::now());
    let health = Arc::new(Health::default());
    let a = elector(&client, "a");
    let acquiring = tokio::spawn({
        let (a, health) = (a.clone(), health.clone());
        async move { a.acquire(&health).await }
    });
    let waiting = async {
        loop {
            if health
                .state()
                .is_ok_and(|w| w.is_some_and(|w| w.contains("held by b")))
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("readyz says who leads");
    assert!(!acquiring.is_finished());
    *lock(&server.lease) = None;
    tokio::time::timeout(Duration::from_secs(30), acquiring)
        .await
        .expect("acquires once free")
        .expect("joined");
    assert_eq!(server.holder().as_deref(), Some("a"));
}

fn options(health: &Arc<Health>) -> crate::controller::kube::Options {
    crate::controller::kube::Options {
        namespace: None,
        image: crate::platform::kube::pod::DEFAULT_IMAGE.into(),
        backup_image: None,
        handover: true,
        scratch: None,
        metrics: Default::default(),
        health: health.clone(),
    }
}

#[tokio::test(start_paused = true)]
async fn a_standby_shut_down_never_ran_the_controller_nor_touched_the_lease() {
    use crate::controller::kube::elected::{self, Ended};
    let (client, server) = server();
    server.set("b", Timestamp::now());
    let health = Arc::new(Health::default());
    let stop = tokio::time::sleep(Duration::from_secs(5));
    let ended = elected::run(
        client.clone(),
        options(&health),
        elector(&client, "a"),
        stop,
    )
    .await
    .expect("ran");
    assert_eq!(ended, Ended::Shutdown);
    assert_eq!(server.holder().as_deref(), Some("b"));
    assert_eq!(*lock(&server.writes), 0);
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_lease_is_taken_stops_and_says_so() {
    use crate::controller::kube::elected::{self, Ended};
    let (client, server) = server();
    let health = Arc::new(Health::default());
    let running = tokio::spawn(elected::run(
        client.clone(),
        options(&health),
        elector(&client, "a"),
        std::future::pending(),
    ));
    let leads = async {
        while server.holder().as_deref() != Some("a") {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), leads)
        .await
        .expect("leads");
    server.set("b", Timestamp::now());
    let ended = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .expect("stops")
        .expect("joined")
        .expect("ran");
    assert_eq!(ended, Ended::Lost(Lost::Taken { holder: "b".into() }));
    let why = health.check().expect_err("not ready after losing");
    assert!(why.contains("held by b"), "{why}");
}

/// Against the shared fake API server, which holds watches open as a real
/// one does (the controller then runs as in production until shut down).
#[tokio::test]
async fn a_leader_shut_down_releases_the_lease() {
    use crate::controller::kube::elected::{self, Ended};
    use crate::platform::kube::tests::fake::fake;
    let (client, fake) = fake();
    let path = "/apis/coordination.k8s.io/v1/namespaces/default/leases/etcd-operator";
    let holder = |fake: &crate::platform::kube::tests::fake::Fake| {
        fake.get(path)
            .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string))
    };
    let health = Arc::new(Health::default());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let a = Elector::new(
        client.clone(),
        "default",
        DEFAULT_NAME,
        "a",
        Timing::default(),
    );
    let running = tokio::spawn(elected::run(client, options(&health), a, async move {
        let _ = rx.await;
    }));
    let leads = async {
        while holder(&fake).as_deref() != Some("a") {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), leads)
        .await
        .expect("leads");
    let _ = tx.send(());
    let ended = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .expect("stops")
        .expect("joined")
        .expect("ran");
    assert_eq!(ended, Ended::Shutdown);
    assert!(fake.has(path), "the lease is kept, released");
    assert_eq!(holder(&fake), None);
}
