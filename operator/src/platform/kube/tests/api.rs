//! A mocked API server (tower-test) that plays a scenario: each expected
//! request is checked for its method, path and query, its body is handed
//! to the test, and the test says what to answer. Every wait is bounded.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock::{self, Handle, SendResponse};

/// How long a scenario waits for the next request before failing.
const WAIT: Duration = Duration::from_secs(10);

/// The server side of a mocked client.
pub struct ApiServer {
    handle: Pin<Box<Handle<Request<Body>, Response<Body>>>>,
}

/// A client of a fresh mocked API server (default namespace `default`).
pub fn mock() -> (Client, ApiServer) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let server = ApiServer {
        handle: Box::pin(handle),
    };
    (Client::new(service, "default"), server)
}

/// One request, waiting for its answer.
pub struct Call {
    /// `GET`, `PATCH`...
    pub method: Method,
    /// The path, without the query.
    pub path: String,
    /// The query parameters.
    pub query: BTreeMap<String, String>,
    /// The `Content-Type` header.
    pub content_type: String,
    /// The body as JSON (`Null` when empty).
    pub body: Value,
    send: SendResponse<Response<Body>>,
}

impl ApiServer {
    /// The next request.
    pub async fn next(&mut self) -> Call {
        let next = tokio::time::timeout(WAIT, self.handle.as_mut().next_request()).await;
        let (request, send) = next
            .expect("no request came in time")
            .expect("the client went away before the expected request");
        let (parts, body) = request.into_parts();
        let bytes = body.collect_bytes().await.expect("request body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("a JSON body")
        };
        let query = parts
            .uri
            .query()
            .unwrap_or_default()
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let content_type = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        Call {
            method: parts.method,
            path: parts.uri.path().to_string(),
            query,
            content_type,
            body,
            send,
        }
    }

    /// The next request, which must be `method path`.
    pub async fn expect(&mut self, method: Method, path: &str) -> Call {
        let call = self.next().await;
        assert_eq!(
            (&call.method, call.path.as_str()),
            (&method, path),
            "unexpected request (body {})",
            call.body
        );
        call
    }

    /// A server-side apply of `path` by the operator's field manager.
    pub async fn expect_apply(&mut self, path: &str) -> Call {
        let call = self.expect(Method::PATCH, path).await;
        assert_eq!(call.content_type, "application/apply-patch+yaml", "{path}");
        assert_eq!(
            call.query.get("fieldManager").map(String::as_str),
            Some("etcd-operator")
        );
        assert_eq!(call.query.get("force").map(String::as_str), Some("true"));
        call
    }

    /// A merge patch (`kind`: `merge` or `strategic-merge`) of `path`.
    pub async fn expect_patch(&mut self, kind: &str, path: &str) -> Call {
        let call = self.expect(Method::PATCH, path).await;
        assert_eq!(
            call.content_type,
            format!("application/{kind}-patch+json"),
            "{path}"
        );
        call
    }

    /// Asserts that the client made no other request: call once every
    /// client of this server is dropped.
    pub async fn done(mut self) {
        let next = tokio::time::timeout(WAIT, self.handle.as_mut().next_request()).await;
        match next.expect("the client was not dropped") {
            None => {}
            Some((request, _)) => {
                panic!("unexpected request {} {}", request.method(), request.uri())
            }
        }
    }
}

impl Call {
    /// Answers with `code` and `body`.
    pub fn reply(self, code: u16, body: &Value) {
        let response = Response::builder()
            .status(StatusCode::from_u16(code).expect("status code"))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Body::from(serde_json::to_vec(body).expect("json")))
            .expect("response");
        self.send.send_response(response);
    }

    /// Answers 200 with plain text (a pod's log).
    pub fn text(self, text: &str) {
        let response = Response::builder()
            .status(StatusCode::OK)
            .header(http::header::CONTENT_TYPE, "text/plain")
            .body(Body::from(text.as_bytes().to_vec()))
            .expect("response");
        self.send.send_response(response);
    }

    /// Answers 200 with `body`.
    pub fn ok(self, body: &Value) {
        self.reply(200, body)
    }

    /// Answers 200 with the request's own body (an apply's result).
    pub fn echo(self) {
        let body = self.body.clone();
        self.ok(&body)
    }

    /// Answers 404 Not Found.
    pub fn not_found(self) {
        let status = json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "NotFound", "code": 404, "message": "not found",
        });
        self.reply(404, &status)
    }

    /// Answers a delete: 200 with a Success status.
    pub fn deleted(self) {
        self.ok(&json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 200}))
    }
}

/// Path of a core v1 object in `default`.
pub fn core(resource: &str, name: &str) -> String {
    format!("/api/v1/namespaces/default/{resource}/{name}")
}

/// Path of a core v1 collection in `default`.
pub fn core_list(resource: &str) -> String {
    format!("/api/v1/namespaces/default/{resource}")
}

/// A list answer.
pub fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items})
}
