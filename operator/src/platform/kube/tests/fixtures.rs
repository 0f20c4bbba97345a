//! Small builders for the tests: a resource, member configs, and pods and
//! claims as the API server would return them.

use kube::Client;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::super::KubePlatform;
use super::super::config::ANNOTATION_STARTED;
use super::super::objects::data_claim;
use super::super::pod::{DEFAULT_IMAGE, member_pod};
use crate::crd::{EtcdCluster, EtcdClusterSpec, StoragePolicy};
use crate::member::{MemberAddr, MemberConfig};
use crate::version::Version;

/// The uid of the test resource.
pub const UID: &str = "uid-1";
/// `metadata.generation` of the test resource.
pub const GENERATION: i64 = 7;

/// The EtcdCluster `default/demo`.
pub fn resource(size: i64, version: &str, storage: StoragePolicy) -> EtcdCluster {
    resource_from(json!({
        "size": size, "version": version, "storage": {"policy": storage},
    }))
}

/// The EtcdCluster `default/demo` with the spec `spec` (JSON as a user
/// writes it).
pub fn resource_from(spec: Value) -> EtcdCluster {
    let spec: EtcdClusterSpec = serde_json::from_value(spec).expect("spec");
    let mut r = EtcdCluster::new("demo", spec);
    r.metadata.namespace = Some("default".into());
    r.metadata.uid = Some(UID.into());
    r.metadata.generation = Some(GENERATION);
    r
}

/// A platform on `client` with `default/demo` (3 members, persistent)
/// registered.
pub fn platform(client: Client) -> KubePlatform {
    platform_for(client, &resource(3, "3.5.1", StoragePolicy::Persistent))
}

/// A platform on `client` with `r` registered.
pub fn platform_for(client: Client, r: &EtcdCluster) -> KubePlatform {
    let p = KubePlatform::new(client, "default", DEFAULT_IMAGE);
    let name = r.metadata.name.as_deref().expect("a name");
    p.register(name, r, 0).expect("a resource with a uid");
    p
}

/// Member `name` of demo's first three, bootstrapping.
pub fn config(name: &str, version: &str) -> MemberConfig {
    let url = |m: &str, port: u16| format!("http://{m}.demo.default.svc:{port}");
    let initial = (0..3)
        .map(|i| format!("demo-{i}={}", url(&format!("demo-{i}"), 2380)))
        .collect::<Vec<_>>()
        .join(",");
    let addr = MemberAddr {
        name: name.into(),
        peer_url: url(name, 2380),
        client_url: url(name, 2379),
    };
    let version = version.parse::<Version>().expect("version");
    crate::testing::bootstrap_config(addr, version, initial, "demo-token")
}

fn owner() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
    use kube::Resource;
    let r = resource(3, "3.5.1", StoragePolicy::Persistent);
    r.controller_owner_ref(&()).expect("owner")
}

/// An object as the API server returns it, built from the platform's own
/// builders and then changed.
#[derive(Clone, Debug)]
pub struct Seen(pub Value);

impl Seen {
    /// Member `name`'s pod, scheduled, not ready.
    pub fn pod(name: &str, version: &str, storage: StoragePolicy) -> Seen {
        Seen::pod_of(&config(name, version), storage)
    }

    /// The pod of the member `config` records, scheduled, not ready.
    pub fn pod_of(config: &MemberConfig, storage: StoragePolicy) -> Seen {
        let name = &config.addr.name;
        let pod = member_pod("demo", config, storage, DEFAULT_IMAGE, &owner());
        let mut v = serde_json::to_value(pod).expect("pod");
        v["metadata"]["uid"] = json!(format!("pod-{name}"));
        v["metadata"]["namespace"] = json!("default");
        v["status"] = json!({"phase": "Pending"});
        Seen(v)
    }

    /// Member `name`'s volume claim, bound, never started.
    pub fn claim(name: &str, version: &str) -> Seen {
        Seen::claim_of(&config(name, version))
    }

    /// The volume claim of the member `config` records, bound, never
    /// started.
    pub fn claim_of(config: &MemberConfig) -> Seen {
        let name = &config.addr.name;
        let claim = data_claim("demo", config, &Default::default(), &owner());
        let mut v = serde_json::to_value(claim).expect("claim");
        v["metadata"]["uid"] = json!(format!("claim-{name}"));
        v["metadata"]["namespace"] = json!("default");
        v["status"] = json!({"phase": "Bound"});
        Seen(v)
    }

    /// The pod runs and is ready.
    pub fn ready(mut self) -> Seen {
        self.0["status"] = json!({
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "startTime": "2026-01-01T00:00:00Z",
        });
        self
    }

    /// Its etcd container runs, ready, from the image of `version` (the
    /// pod's own image may say otherwise: changed, not yet swapped).
    pub fn runs(mut self, version: &str) -> Seen {
        self.0["status"]["containerStatuses"] = json!([{
            "name": "etcd", "image": format!("quay.io/coreos/etcd:v{version}"), "imageID": "",
            "ready": true, "restartCount": 0,
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
        }]);
        self
    }

    /// The pod has the IP `ip` (as `podIP` and `podIPs`).
    pub fn ip(mut self, ip: &str) -> Seen {
        self.0["status"]["podIP"] = json!(ip);
        self.0["status"]["podIPs"] = json!([{"ip": ip}]);
        self
    }

    /// The pod runs, not ready: etcd failed `restarts` times, the last run
    /// lasting `ran_secs` and ending with `exit_code` and `message` (the
    /// termination message), and the kubelet holds off the next restart.
    pub fn crash_loop(
        mut self,
        restarts: i32,
        exit_code: i32,
        ran_secs: u32,
        message: &str,
    ) -> Seen {
        self.0["status"]["phase"] = json!("Running");
        self.0["status"]["conditions"] = json!([
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
        ]);
        self.0["status"]["containerStatuses"] = json!([{
            "name": "etcd", "image": "quay.io/coreos/etcd:v3.5.1", "imageID": "",
            "ready": false, "restartCount": restarts,
            "state": {"waiting": {
                "reason": "CrashLoopBackOff",
                "message": "back-off 40s restarting failed container=etcd pod=demo-2_default(x)",
            }},
            "lastState": {"terminated": {
                "exitCode": exit_code, "reason": "Error", "message": message,
                "startedAt": "2026-01-01T00:00:00Z",
                "finishedAt": format!("2026-01-01T00:{:02}:{:02}Z", ran_secs / 60, ran_secs % 60),
            }},
        }]);
        self
    }

    /// The etcd container waits (it never ran) for `reason`.
    pub fn waiting(mut self, reason: &str, message: &str) -> Seen {
        self.0["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "True"}]);
        self.0["status"]["containerStatuses"] = json!([{
            "name": "etcd", "image": "quay.io/coreos/etcd:v3.5.1", "imageID": "",
            "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": reason, "message": message}},
        }]);
        self
    }

    /// The scheduler cannot place the pod.
    pub fn unschedulable(mut self, message: &str) -> Seen {
        self.0["status"]["conditions"] = json!([{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": message,
        }]);
        self
    }

    /// The pod is unscheduled since `since` (its condition's transition
    /// time) with `message`.
    pub fn unschedulable_since(mut self, message: &str, since: &str) -> Seen {
        self = self.unschedulable(message);
        self.0["status"]["conditions"][0]["lastTransitionTime"] = json!(since);
        self
    }

    /// The pod is in `phase`.
    pub fn phase(mut self, phase: &str) -> Seen {
        self.0["status"]["phase"] = json!(phase);
        self
    }

    /// The member was seen ready before.
    pub fn started(mut self) -> Seen {
        self.0["metadata"]["annotations"][ANNOTATION_STARTED] = json!("2026-01-01T00:00:00Z");
        self
    }

    /// Owned by another resource's uid.
    pub fn owned_by(mut self, uid: &str) -> Seen {
        self.0["metadata"]["ownerReferences"][0]["uid"] = json!(uid);
        self
    }

    /// Being deleted.
    pub fn terminating(mut self) -> Seen {
        self.0["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        self
    }

    /// As JSON.
    pub fn json(&self) -> Value {
        self.0.clone()
    }

    /// As a typed object.
    pub fn typed<K: DeserializeOwned>(&self) -> K {
        serde_json::from_value(self.0.clone()).expect("a valid object")
    }
}
