//! A scripted Kubernetes API server (tower-test's mock service): each
//! request is asserted exactly (method, path with query, JSON body) and
//! answered, the way controller-rs's `ApiServerVerifier` does.

use std::time::Duration;

use chaos_monkey::cli::FaultKind;
use chaos_monkey::config::PlatformConfig;
use chaos_monkey::monkey::Error;
use chaos_monkey::select::Target;
use chaos_monkey::target::kube::Kube;
use chaos_monkey::{Config, FaultLog, Summary};
use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock;

pub const NS: &str = "chaos";
pub const WAIT: Duration = Duration::from_secs(30);
/// `app.kubernetes.io/managed-by=etcd-operator,etcdoperator.dev/cluster`, URL-encoded.
pub const MEMBERS: &str =
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

pub fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "1"}, "items": items})
}

pub fn pods_uri(selector: &str) -> String {
    format!("/api/v1/namespaces/{NS}/pods?&labelSelector={selector}")
}

pub fn in_clusters(names: &str) -> String {
    format!("{MEMBERS}+in+%28{names}%29")
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
        fault,
        interval: Duration::from_millis(10),
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
    let server = tokio::spawn(script(Server(handle)));
    let client = kube::Client::new(svc, "default");
    let kube = Kube::new(client, Some(NS.into()), selector.map(String::from));
    assert_eq!(kube.namespace(), NS);
    let mut log = FaultLog::in_memory();
    let r = chaos_monkey::run(&kube, &cfg, &mut log, std::future::pending()).await;
    drop(kube);
    server.await.expect("the API server script passed");
    (r, log)
}
