//! The fake API server's watches. Every change to the store gets the next
//! resourceVersion and is kept. A watch from a resourceVersion is answered
//! with the changes after it that it selects (by collection, namespace,
//! labels and `metadata.name`/`metadata.namespace` fields), all at once,
//! and the response ends: as a real watch ends at its timeout, kube's
//! watcher watches again from the last version it got. With nothing to
//! send yet, the watch is held until a change it selects comes.

use std::collections::BTreeMap;

use http::{Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock::SendResponse;

use super::{Target, selects};

/// One change of the store.
#[derive(Debug)]
struct Change {
    version: u64,
    key: String,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    kind: &'static str,
    object: Value,
}

/// A watch waiting for a change.
struct Held {
    path: String,
    query: BTreeMap<String, String>,
    from: u64,
    send: SendResponse<Response<Body>>,
}

/// Every change so far, and the watches held.
#[derive(Default)]
pub struct Changes {
    version: u64,
    log: Vec<Change>,
    held: Vec<Held>,
}

impl std::fmt::Debug for Changes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Changes")
            .field("version", &self.version)
            .field("changes", &self.log.len())
            .field("held", &self.held.len())
            .finish()
    }
}

/// Whether the field selector (`metadata.name=N,metadata.namespace=NS`)
/// matches `object`; other fields are not filtered on.
pub fn fields_match(selector: &str, object: &Value) -> bool {
    selector
        .split(',')
        .filter_map(|term| term.split_once('='))
        .all(|(field, want)| match field.trim() {
            "metadata.name" => object["metadata"]["name"].as_str() == Some(want.trim()),
            "metadata.namespace" => object["metadata"]["namespace"].as_str() == Some(want.trim()),
            _ => true,
        })
}

/// Whether a list or watch of `path` with `query` selects the object
/// `object` stored at `key`.
pub fn selected(path: &str, query: &BTreeMap<String, String>, key: &str, object: &Value) -> bool {
    let (Some(want), Some(at)) = (Target::parse(path), Target::parse(key)) else {
        return false;
    };
    let labels = query.get("labelSelector").map_or("", String::as_str);
    let fields = query.get("fieldSelector").map_or("", String::as_str);
    want.prefix == at.prefix
        && want.resource == at.resource
        && (want.namespace.is_none() || want.namespace == at.namespace)
        && selects(labels, &object["metadata"]["labels"])
        && fields_match(fields, object)
}

impl Changes {
    /// The version of the store now.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Gives `object` the next resourceVersion.
    pub fn stamp(&mut self, object: &mut Value) {
        self.version += 1;
        if object.is_object() {
            object["metadata"]["resourceVersion"] = json!(self.version.to_string());
        }
    }

    /// Keeps the change of `key` (`object` as stamped, or as it was when
    /// deleted) and answers the held watches that select it.
    pub fn record(&mut self, key: &str, kind: &'static str, object: &Value) {
        self.log.push(Change {
            version: self.version,
            key: key.to_string(),
            kind,
            object: object.clone(),
        });
        for held in std::mem::take(&mut self.held) {
            let events = self.since(&held.path, &held.query, held.from);
            if events.is_empty() {
                self.held.push(held);
            } else {
                held.send.send_response(answer(&events));
            }
        }
    }

    /// A watch of `path` with `query`: answered now with what changed
    /// after its resourceVersion, else held.
    pub fn watch(
        &mut self,
        path: &str,
        query: &BTreeMap<String, String>,
        send: SendResponse<Response<Body>>,
    ) {
        let from = query
            .get("resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(self.version);
        let events = self.since(path, query, from);
        if events.is_empty() {
            self.held.push(Held {
                path: path.to_string(),
                query: query.clone(),
                from,
                send,
            });
        } else {
            send.send_response(answer(&events));
        }
    }

    /// The watch events of the changes after `from` that `path` and
    /// `query` select.
    fn since(&self, path: &str, query: &BTreeMap<String, String>, from: u64) -> Vec<Value> {
        self.log
            .iter()
            .filter(|c| c.version > from && selected(path, query, &c.key, &c.object))
            .map(|c| json!({"type": c.kind, "object": c.object}))
            .collect()
    }
}

/// A watch response carrying `events`, one JSON line each, then its end.
fn answer(events: &[Value]) -> Response<Body> {
    let mut lines = Vec::new();
    for e in events {
        lines.extend(serde_json::to_vec(e).unwrap_or_default());
        lines.push(b'\n');
    }
    Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(lines))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// A watch answered with one ERROR event, 410 Gone, and its end.
pub fn expired() -> Response<Body> {
    let event = json!({"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": "too old resource version: 1 (42)", "reason": "Expired", "code": 410,
    }});
    let mut line = serde_json::to_vec(&event).unwrap_or_default();
    line.push(b'\n');
    Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(line))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// kube's own watcher sees the fake's changes: what was there when it
/// listed, then each change after, selected by name.
#[tokio::test]
async fn kubes_watcher_sees_every_change_it_selects() {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use kube::runtime::watcher::{self, Event};

    let (client, fake) = super::fake();
    let pods = "/api/v1/namespaces/default/pods";
    let pod = |name: &str| json!({"metadata": {"name": name, "namespace": "default"}});
    fake.put(pods, pod("a"));
    let api = kube::Api::<Pod>::namespaced(client, "default");
    let config = watcher::Config::default().fields("metadata.name=a");
    let mut events = Box::pin(watcher::watcher(api, config));
    let mut next = async || {
        let e = tokio::time::timeout(std::time::Duration::from_secs(10), events.next()).await;
        match e.expect("an event in time").expect("the stream goes on") {
            Ok(Event::Apply(p) | Event::InitApply(p)) => {
                format!("apply {}", p.metadata.name.unwrap_or_default())
            }
            Ok(Event::Delete(p)) => format!("delete {}", p.metadata.name.unwrap_or_default()),
            Ok(Event::Init) => "init".into(),
            Ok(Event::InitDone) => "done".into(),
            Err(e) => format!("error {e}"),
        }
    };
    for want in ["init", "apply a", "done"] {
        assert_eq!(next().await, want);
    }
    fake.put(pods, pod("b"));
    fake.change(
        &format!("{pods}/a"),
        &json!({"status": {"phase": "Running"}}),
    );
    assert_eq!(next().await, "apply a", "b is not selected");
    fake.remove(&format!("{pods}/a"));
    assert_eq!(next().await, "delete a");
}
