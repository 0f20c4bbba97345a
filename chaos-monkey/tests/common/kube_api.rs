//! A scripted Kubernetes API server (tower-test's mock service): each
//! request is asserted exactly (method, path with query, JSON body) and
//! answered, the way controller-rs's `ApiServerVerifier` does.

use std::time::{Duration, SystemTime};

use chaos_monkey::cli::FaultKind;
use chaos_monkey::config::PlatformConfig;
use chaos_monkey::monkey::Error;
use chaos_monkey::select::{self, ClusterView, MemberView, Target};
use chaos_monkey::target::kube::Kube;
use chaos_monkey::{Config, FaultLog, Summary};
use etcd_operator::faults::Role;
use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock;

pub const NS: &str = "chaos";
pub const WAIT: Duration = Duration::from_secs(30);
/// The longest a whole mocked run may take.
pub const RUN_WAIT: Duration = Duration::from_secs(120);
/// `app.kubernetes.io/managed-by=etcd-operator,etcdoperator.dev/cluster,etcdoperator.dev/member`
/// (member pods only: a Job's or the follower's pod has no member label), URL-encoded.
pub const MEMBERS: &str = "app.kubernetes.io%2Fmanaged-by%3Detcd-operator%2Cetcdoperator.dev%2Fcluster%2Cetcdoperator.dev%2Fmember";
/// The same up to the cluster requirement.
const MANAGED_CLUSTER: &str =
    "app.kubernetes.io%2Fmanaged-by%3Detcd-operator%2Cetcdoperator.dev%2Fcluster";

pub type Handle = mock::Handle<Request<Body>, Response<Body>>;

/// The scripted API server.
pub struct Server(pub Handle);

impl Server {
    /// Expects one request and answers it.
    pub async fn expect(
        &mut self,
        method: Method,
        uri: &str,
        body: Option<Value>,
        status: StatusCode,
        reply: Value,
    ) {
        let (req, send) = tokio::time::timeout(WAIT, self.0.next_request())
            .await
            .unwrap_or_else(|_| panic!("no request within {WAIT:?}; expected {method} {uri}"))
            .expect("the client is gone; expected another request");
        assert_eq!(req.method(), method, "{}", req.uri());
        assert_eq!(req.uri().to_string(), uri);
        if let Some(want) = body {
            let bytes = req.into_body().collect_bytes().await.expect("request body");
            let got: Value = serde_json::from_slice(&bytes).expect("JSON body");
            assert_eq!(got, want, "body of {method} {uri}");
        }
        let resp = Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Body::from(serde_json::to_vec(&reply).expect("json")))
            .expect("response");
        send.send_response(resp);
    }

    pub async fn get(&mut self, uri: &str, reply: Value) {
        self.expect(Method::GET, uri, None, StatusCode::OK, reply)
            .await;
    }

    /// Expects the EtcdCluster `name` to be read (for the roles etcd did
    /// not give) and answers that there is none.
    pub async fn no_etcdcluster(&mut self, name: &str) {
        let gone = api_status(
            404,
            "NotFound",
            &format!("etcdclusters.etcdoperator.dev \"{name}\" not found"),
        );
        self.expect(
            Method::GET,
            &etcdcluster_uri(name),
            None,
            StatusCode::NOT_FOUND,
            gone,
        )
        .await;
    }

    /// Expects the EtcdCluster `name` to be read and answers it with
    /// `status` (`Value::Null`: none published yet).
    pub async fn etcdcluster(&mut self, name: &str, status: Value) {
        self.get(&etcdcluster_uri(name), etcdcluster(name, status))
            .await;
    }

    /// Expects the reads that pick a victim among cluster `a`'s three
    /// running pods (without IPs: etcd is not asked): the selection check
    /// (no EtcdCluster), then tick 0 (one without a published status).
    pub async fn picks_in_cluster_a(&mut self) {
        self.get(&pods_uri(MEMBERS), cluster_a()).await;
        self.get(&pods_uri(&in_clusters("a")), cluster_a()).await;
        self.no_etcdcluster("a").await;
        self.get(&pods_uri(MEMBERS), cluster_a()).await;
        self.get(&pods_uri(&in_clusters("a")), cluster_a()).await;
        self.etcdcluster("a", Value::Null).await;
    }

    /// Expects pod `name` to be deleted at once (grace period 0) and
    /// answers `code` with `reply`.
    pub async fn delete_pod(&mut self, name: &str, code: StatusCode, reply: Value) {
        let uri = format!("/api/v1/namespaces/{NS}/pods/{name}?");
        self.expect(Method::DELETE, &uri, Some(grace0(name)), code, reply)
            .await;
    }

    /// Expects the client to send nothing more.
    pub async fn done(mut self) {
        let next = tokio::time::timeout(WAIT, self.0.next_request())
            .await
            .expect("client dropped");
        if let Some((req, _)) = next {
            panic!("unexpected request {} {}", req.method(), req.uri());
        }
    }
}

pub fn pod(cluster: &str, member: &str, phase: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": member,
            "namespace": NS,
            "uid": format!("uid-{member}"),
            "labels": {
                "etcdoperator.dev/cluster": cluster,
                "etcdoperator.dev/member": member,
                "app.kubernetes.io/managed-by": "etcd-operator",
                "app.kubernetes.io/name": "etcd",
            },
        },
        "status": {"phase": phase, "startTime": "2026-01-01T00:00:00Z"},
    })
}

/// A `Status` error reply of the API server.
pub fn api_status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

pub fn etcdcluster_uri(name: &str) -> String {
    format!("/apis/etcdoperator.dev/v1alpha1/namespaces/{NS}/etcdclusters/{name}")
}

/// An EtcdCluster as the operator keeps it, with `status` (none when null).
pub fn etcdcluster(name: &str, status: Value) -> Value {
    let mut c = json!({
        "apiVersion": "etcdoperator.dev/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-cluster-{name}")},
        "spec": {"size": 3, "version": "3.5.17"},
    });
    if !status.is_null() {
        c["status"] = status;
    }
    c
}

/// A published status of members `name-0..name-{size-1}`: `leader` the
/// leader (if any), observed at `observed_at`.
pub fn published(name: &str, size: usize, leader: Option<usize>, observed_at: SystemTime) -> Value {
    let members: Vec<Value> = (0..size)
        .map(|i| {
            let m = format!("{name}-{i}");
            json!({
                "name": m,
                "clientURL": format!("http://{m}.{name}.{NS}.svc:2379"),
                "peerURL": format!("http://{m}.{name}.{NS}.svc:2380"),
                "ready": true,
                "leader": leader == Some(i),
            })
        })
        .collect();
    let mut s = json!({
        "phase": "Running",
        "members": members,
        "readyMembers": size,
        "observedAt": humantime::format_rfc3339_millis(observed_at).to_string(),
    });
    if let Some(i) = leader {
        s["leader"] = json!(format!("{name}-{i}"));
    }
    s
}

/// RFC 3339 of `t`, as the API server writes times.
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// The pods of cluster `a`: a-0..a-2, all running.
pub fn cluster_a() -> Value {
    list(
        "PodList",
        (0..3)
            .map(|i| pod("a", &format!("a-{i}"), "Running"))
            .collect(),
    )
}

/// The member tick 0 picks among a-0..a-2 (all running, roles unknown).
pub fn expected_victim(cfg: &Config) -> String {
    let view = ClusterView {
        name: "a".into(),
        members: (0..3)
            .map(|i| MemberView {
                name: format!("a-{i}"),
                role: Role::Unknown,
                running: true,
                eligible: true,
            })
            .collect(),
    };
    let picks = select::choose(cfg.seed, 0, &[view], cfg.target, 1);
    format!("a-{}", picks[0].member)
}

pub fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "1"}, "items": items})
}

pub fn pods_uri(selector: &str) -> String {
    format!("/api/v1/namespaces/{NS}/pods?&labelSelector={selector}")
}

pub fn in_clusters(names: &str) -> String {
    format!("{MANAGED_CLUSTER}+in+%28{names}%29%2Cetcdoperator.dev%2Fmember")
}

pub fn grace0(member: &str) -> Value {
    json!({"gracePeriodSeconds": 0, "preconditions": {"uid": format!("uid-{member}")}})
}

/// A run configuration for the mocked namespace: ticks every 10ms.
pub fn config(fault: FaultKind, target: Target, max_faults: usize) -> Config {
    Config {
        platform: PlatformConfig::Kube {
            kubeconfig: None,
            namespace: Some(NS.into()),
            selector: None,
        },
        clusters: Vec::new(),
        target,
        store_addr: None,
        store_wildcard: false,
        fault,
        interval: Duration::from_millis(10),
        start_after: Duration::ZERO,
        pause_for: Duration::from_secs(1),
        max_kill: usize::MAX,
        probability: 1.0,
        min_age: Duration::ZERO,
        jitter: Duration::ZERO,
        seed: 3,
        dry_run: false,
        duration: None,
        max_faults: Some(max_faults),
        fault_log: None,
        faults: chaos_monkey::config::FaultOptions::default(),
    }
}

/// Runs the monkey on a mocked API server scripted by `script`.
pub async fn run_mocked<F>(
    cfg: Config,
    selector: Option<&str>,
    script: impl FnOnce(Server) -> F,
) -> (Result<Summary, Error>, FaultLog)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let (svc, handle) = mock::pair::<Request<Body>, Response<Body>>();
    // The script ends early only when it fails (it waits for the client to
    // go otherwise): that stops the monkey, which would tick on forever
    // against a server that is gone.
    let (script_over, stop) = tokio::sync::oneshot::channel::<()>();
    let script = script(Server(handle));
    let server = tokio::spawn(async move {
        let _over = script_over;
        script.await;
    });
    let client = kube::Client::new(svc, "default");
    let kube = Kube::new(client, Some(NS.into()), selector.map(String::from));
    assert_eq!(kube.namespace(), NS);
    let mut log = FaultLog::in_memory();
    let shutdown = async {
        let _ = stop.await;
    };
    let r =
        tokio::time::timeout(RUN_WAIT, chaos_monkey::run(&kube, &cfg, &mut log, shutdown)).await;
    drop(kube);
    if let Err(e) = server.await {
        match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(e) => panic!("the API server script: {e}"),
        }
    }
    let r = r.unwrap_or_else(|_| panic!("the monkey did not stop within {RUN_WAIT:?}"));
    (r, log)
}
