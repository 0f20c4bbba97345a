//! An upgrade to a version whose image does not exist is undone by fixing
//! the spec. (Seen on a real API server: `3.5.99` was accepted as a 3.5.x,
//! the claim recorded it before the pod ran, and setting `spec.version`
//! back, or deleting the pod, left the member in `ErrImagePull` for good.)
//! A member that cannot pull its image does not run, its claim keeps the
//! version its data ran, and starting it again waits for the image while
//! the spec asks for it, and re-creates it at its version once the spec
//! no longer does.

use http::Method;
use serde_json::json;

use super::api::{ApiServer, core, mock};
use super::fake::fake;
use super::fixtures::{Seen, platform_for, resource};
use super::rbac::collection;
use super::scenario::{config_of, expect_shared, expect_watched_gone, play};
use crate::crd::StoragePolicy::Persistent;
use crate::platform::{Platform, Settings};
use crate::version::Version;

const PULL_ERROR: &str = "rpc error: manifest for quay.io/coreos/etcd:v3.5.99 not found";

#[tokio::test]
async fn an_upgrade_to_an_image_that_never_runs_is_undone_by_the_spec() {
    let (client, fake) = fake();
    let pods = collection("pods");
    let claims = collection("persistentvolumeclaims");
    let claim = Seen::claim("demo-1", "3.5.1").started();
    fake.put(&claims, claim.json());
    let pod = Seen::pod("demo-1", "3.5.1", Persistent)
        .ready()
        .runs("3.5.1");
    fake.put(&pods, pod.json());
    let broken = resource(3, "3.5.99", Persistent);
    let p = platform_for(client, &broken);

    let settings = Settings {
        version: Version::new(3, 5, 99),
        tuning: Default::default(),
        backend: Default::default(),
        pod: Default::default(),
    };
    p.restart("demo", "demo-1", &settings)
        .await
        .expect("the pod is re-created on the new image");
    let pod_path = format!("{pods}/demo-1");
    let claim_path = format!("{claims}/demo-1-data");
    let new = fake.get(&pod_path).expect("a new pod");
    assert_eq!(
        new["spec"]["containers"][0]["image"],
        "quay.io/coreos/etcd:v3.5.99"
    );
    // The kubelet cannot pull it.
    fake.change(
        &pod_path,
        &Seen(new)
            .phase("Pending")
            .waiting("ErrImagePull", PULL_ERROR)
            .json(),
    );
    let members = p.members("demo").await.expect("members");
    let m = members
        .iter()
        .find(|m| m.addr.name == "demo-1")
        .expect("demo-1");
    assert!(!m.running, "a pod that cannot pull its image does not run");
    assert!(m.has_data);
    assert_eq!(m.version, Version::new(3, 5, 1), "the version its data ran");
    let claim_config = config_of(&fake.get(&claim_path).expect("the claim"));
    assert_eq!(claim_config.version, Version::new(3, 5, 1));

    // While the spec asks for 3.5.99 there is nothing to restart.
    let e = p.start("demo", "demo-1").await.expect_err("busy");
    assert_eq!(e.category(), "busy");
    assert!(e.to_string().contains("waits for its image"), "{e}");
    let still = fake.get(&pod_path).expect("the pod stays");
    assert_eq!(config_of(&still).version, Version::new(3, 5, 99));

    // The spec is fixed: the member starts again at 3.5.1, on its data.
    let fixed = resource(3, "3.5.1", Persistent);
    p.prepare("demo", &fixed, 3, false).await.expect("taken");
    p.start("demo", "demo-1").await.expect("re-created");
    let back = fake.get(&pod_path).expect("a pod");
    assert_eq!(
        back["spec"]["containers"][0]["image"],
        "quay.io/coreos/etcd:v3.5.1"
    );
    assert_eq!(config_of(&back).version, Version::new(3, 5, 1));
    assert!(fake.has(&claim_path), "the data stays");
}

#[tokio::test]
async fn rolling_back_a_failed_upgrade_re_creates_the_pod_from_its_claim() {
    let (client, api) = mock();
    let scenario = |mut api: ApiServer| async move {
        let claim = Seen::claim("demo-1", "3.5.1").started();
        api.expect(Method::GET, &core("persistentvolumeclaims", "demo-1-data"))
            .await
            .ok(&claim.json());
        let pod = Seen::pod("demo-1", "3.5.99", Persistent)
            .phase("Pending")
            .waiting("ImagePullBackOff", PULL_ERROR);
        api.expect(Method::GET, &core("pods", "demo-1"))
            .await
            .ok(&pod.json());
        let delete = api.expect(Method::DELETE, &core("pods", "demo-1")).await;
        assert_eq!(delete.body["preconditions"]["uid"], "pod-demo-1");
        delete.ok(&pod.clone().terminating().json());
        expect_watched_gone(&mut api, "demo-1").await;
        expect_shared(&mut api, 2).await;
        let new = api.expect_apply(&core("pods", "demo-1")).await;
        let etcd = &new.body["spec"]["containers"][0];
        assert_eq!(etcd["image"], json!("quay.io/coreos/etcd:v3.5.1"));
        assert_eq!(config_of(&new.body).version, Version::new(3, 5, 1));
        new.echo();
        api
    };
    play(
        platform_for(client, &resource(3, "3.5.1", Persistent)),
        scenario,
        |p| async move {
            p.start("demo", "demo-1").await.expect("re-created");
            (p, ())
        },
        api,
    )
    .await;
}
