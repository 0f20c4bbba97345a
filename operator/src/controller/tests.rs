//! The generic controller against both platforms (the kube one on a fake
//! API server), for what was seen on a real API server:
//!
//! * one member name per add in flight: etcd refuses an add for 5 s after
//!   a member reconnects, and every retry took a new name (a 3 -> 5 resize
//!   ended with members `example-5` and `example-18`). Here no etcd answers
//!   at all, so every add fails; the name and the record stay the same;
//! * `Available` was published as True while 1 of 3 members was ready.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use super::Cluster;
use super::act::add_learner;
use super::kube::spec_state;
use crate::crd::StoragePolicy;
use crate::etcd::Clients;
use crate::observe::Observation;
use crate::platform::kube::tests::fake::fake;
use crate::platform::kube::tests::fixtures::{platform_for, resource};
use crate::platform::local::LocalPlatform;
use crate::platform::local::binaries::Binaries;
use crate::platform::{ClusterRecord, Platform};
use crate::validate::ValidSpec;

/// A client URL where nothing answers (loopback only).
fn nobody() -> String {
    let ip = crate::testing::free_loopback("add-tests-nobody", &HashSet::new());
    format!("http://{ip}:2379")
}

fn clients() -> Arc<Clients> {
    Arc::new(Clients::new(Duration::from_millis(200)))
}

/// Tries the add three times; returns the record after each try.
async fn retried<P: Platform>(c: &mut Cluster<P>, spec: &ValidSpec) -> Vec<ClusterRecord> {
    let api = nobody();
    let mut records = Vec::new();
    for _ in 0..3 {
        let e = add_learner(c, &Observation::default(), spec, &api).await;
        assert!(e.is_err(), "nothing answers at {api}");
        records.push(c.record().clone());
    }
    records
}

fn assert_one_name(records: &[ClusterRecord]) {
    for r in records {
        assert_eq!(r.adding.as_deref(), Some("demo-0"), "{r:?}");
        assert_eq!(r.next_index, 1, "{r:?}");
    }
}

fn valid(state: &super::SpecState) -> ValidSpec {
    match state {
        super::SpecState::Valid { spec, .. } => (**spec).clone(),
        super::SpecState::Invalid { message, .. } => panic!("{message}"),
    }
}

#[tokio::test]
async fn a_retried_add_keeps_its_name_on_kubernetes() {
    let (client, fake) = fake();
    let r = resource(3, "3.5.1", StoragePolicy::Persistent);
    let platform = Arc::new(platform_for(client, &r));
    let state = spec_state(&r);
    let spec = valid(&state);
    let mut c = Cluster::new("demo", platform.clone(), clients(), state)
        .await
        .expect("the cluster");
    assert_one_name(&retried(&mut c, &spec).await);
    // As saved for the next operator.
    let saved = platform.load_record("demo").await.expect("a record");
    assert_eq!(saved.and_then(|r| r.adding).as_deref(), Some("demo-0"));
    drop(fake);
}

#[tokio::test]
async fn a_retried_add_keeps_its_name_locally() {
    let state_dir = tempfile::tempdir().expect("a temporary folder");
    let (events, _rx) = tokio::sync::mpsc::unbounded_channel();
    let binaries = Arc::new(Binaries::new(vec![]));
    let platform = LocalPlatform::open(state_dir.path(), binaries, events).expect("a platform");
    let platform = Arc::new(platform);
    let r = resource(3, "3.5.1", StoragePolicy::Persistent);
    let spec = valid(&spec_state(&r));
    let state = super::SpecState::Valid {
        resource: Box::new(r),
        spec: Box::new(spec.clone()),
        source: None,
    };
    let mut c = Cluster::new("demo", platform.clone(), clients(), state)
        .await
        .expect("the cluster");
    assert_one_name(&retried(&mut c, &spec).await);
    let saved = platform.load_record("demo").await.expect("a record");
    assert_eq!(saved.and_then(|r| r.adding).as_deref(), Some("demo-0"));
}

#[tokio::test]
async fn available_is_published_false_while_only_one_of_three_voters_is_ready() {
    use crate::plan::{EtcdMember, Member, Step, Wait};
    use crate::platform::kube::tests::rbac::clusters_path;
    let (client, fake) = fake();
    let r = resource(3, "3.5.1", StoragePolicy::Persistent);
    fake.put(clusters_path(), serde_json::to_value(&r).expect("json"));
    let platform = Arc::new(platform_for(client, &r));
    let mut c = Cluster::new("demo", platform, clients(), spec_state(&r))
        .await
        .expect("the cluster");
    // The member list was read from demo-0, which still names a leader;
    // the two others do not answer.
    let mut obs = Observation::default();
    obs.observed.bootstrapped = true;
    obs.observed.membership_known = true;
    for i in 0..3u64 {
        obs.observed.members.push(Member {
            name: format!("demo-{i}"),
            platform: None,
            etcd: Some(EtcdMember {
                id: i + 1,
                started: true,
                learner: false,
                leader: i == 0,
                peer_https: false,
            }),
            db: Default::default(),
            healthy: i == 0,
            position: None,
        });
    }
    obs.leader = Some("demo-0".into());
    let step = Step::Wait(Wait::MemberNotReady {
        member: "demo-1".into(),
    });
    c.publish(&obs, Some(&step), &[]).await;
    let published = fake
        .get(&format!("{}/demo", clusters_path()))
        .expect("the resource");
    let conditions = published["status"]["conditions"].as_array().cloned();
    let available = conditions
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Available")
        .expect("an Available condition");
    assert_eq!(available["status"], "False", "{available:#}");
    assert_eq!(available["reason"], "QuorumNotReady", "{available:#}");
}
