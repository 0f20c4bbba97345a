//! A fake API server for tests that care about what is asked, not in which
//! order: an in-memory store answering every request the operator makes
//! (applies and merge patches as JSON merges, gets, lists filtered by
//! label equality and `metadata.name`, creates, replaces, deletes; every
//! change gets a resourceVersion, and watches are answered with the
//! changes they select ([`watch`]), unless told to expire), and a log of
//! every request.

mod watch;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::{Method, Request, Response, StatusCode};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock::{self, Handle};

/// One request as the server saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// `GET`, `PATCH`...
    pub method: Method,
    /// The path, without the query.
    pub path: String,
    /// The decoded query parameters.
    pub query: BTreeMap<String, String>,
    /// The `Content-Type` header.
    pub content_type: String,
    /// When it came (tokio's clock: virtual in a test with paused time).
    pub at: tokio::time::Instant,
}

/// A path taken apart: `/api/v1/namespaces/NS/RESOURCE/NAME/SUB` or
/// `/apis/GROUP/VERSION/...`, namespaced or not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// API group, `""` for the core group.
    pub group: String,
    /// `/api/v1` or `/apis/GROUP/VERSION`.
    pub prefix: String,
    /// Namespace, if the path has one.
    pub namespace: Option<String>,
    /// Plural resource name.
    pub resource: String,
    /// Object name, if the path names one.
    pub name: Option<String>,
    /// Subresource (`status`), if any.
    pub sub: Option<String>,
}

impl Target {
    /// Parses `path`; `None` for a path that is no resource path.
    pub fn parse(path: &str) -> Option<Target> {
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, prefix, rest) = match parts.as_slice() {
            ["api", v, rest @ ..] => (String::new(), format!("/api/{v}"), rest),
            ["apis", g, v, rest @ ..] => (g.to_string(), format!("/apis/{g}/{v}"), rest),
            _ => return None,
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
            _ => (None, rest),
        };
        let (resource, name, sub) = match rest {
            [r] => (r, None, None),
            [r, n] => (r, Some(n.to_string()), None),
            [r, n, s] => (r, Some(n.to_string()), Some(s.to_string())),
            _ => return None,
        };
        Some(Target {
            group,
            prefix,
            namespace,
            resource: resource.to_string(),
            name,
            sub,
        })
    }

    /// The store key of the object `name` in `namespace`.
    fn key(&self, namespace: &str, name: &str) -> String {
        format!(
            "{}/namespaces/{namespace}/{}/{name}",
            self.prefix, self.resource
        )
    }
}

/// The RBAC verbs a request needs. A server-side apply may create the
/// object, so it needs `create` as well as `patch` (not on a subresource).
pub fn verbs(seen: &Seen, target: &Target) -> Vec<&'static str> {
    let watch = seen
        .query
        .get("watch")
        .is_some_and(|w| w == "true" || w == "1");
    match (&seen.method, target.name.is_some()) {
        (&Method::GET, true) => vec!["get"],
        (&Method::GET, false) if watch => vec!["watch"],
        (&Method::GET, false) => vec!["list"],
        (&Method::POST, _) => vec!["create"],
        (&Method::PUT, _) => vec!["update"],
        // A subresource (status) is never created by an apply.
        (&Method::PATCH, true)
            if seen.content_type.starts_with("application/apply-patch") && target.sub.is_none() =>
        {
            vec!["patch", "create"]
        }
        (&Method::PATCH, _) => vec!["patch"],
        (&Method::DELETE, true) => vec!["delete"],
        (&Method::DELETE, false) => vec!["deletecollection"],
        _ => vec!["unknown"],
    }
}

/// The objects by path, and their changes.
#[derive(Debug, Default)]
struct Inner {
    objects: BTreeMap<String, Value>,
    changes: watch::Changes,
}

impl Inner {
    /// Stores `object` at `key` with the next resourceVersion; returns it
    /// as stored.
    fn write(&mut self, key: &str, mut object: Value) -> Value {
        self.changes.stamp(&mut object);
        let kind = match self.objects.contains_key(key) {
            true => "MODIFIED",
            false => "ADDED",
        };
        self.objects.insert(key.to_string(), object.clone());
        self.changes.record(key, kind, &object);
        object
    }

    /// Takes the object at `key` away.
    fn delete(&mut self, key: &str) -> Option<Value> {
        let mut object = self.objects.remove(key)?;
        self.changes.stamp(&mut object);
        self.changes.record(key, "DELETED", &object);
        Some(object)
    }
}

type Store = Arc<Mutex<Inner>>;
type Log = Arc<Mutex<Vec<Seen>>>;

/// The fake server; it serves until every client is dropped.
#[derive(Clone, Debug)]
pub struct Fake {
    store: Store,
    log: Log,
    /// Paths whose next watch is answered "too old resource version".
    expire: Arc<Mutex<Vec<String>>>,
    /// Pods' logs, by the pod's path.
    logs: Arc<Mutex<BTreeMap<String, String>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A client of a fresh fake server (default namespace `default`).
pub fn fake() -> (Client, Fake) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let fake = Fake {
        store: Arc::default(),
        log: Arc::default(),
        expire: Arc::default(),
        logs: Arc::default(),
    };
    tokio::spawn(serve(Box::pin(handle), fake.clone()));
    (Client::new(service, "default"), fake)
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `labels` match an equality selector (`k=v,k2=v2`, bare `k`).
pub(super) fn selects(selector: &str, labels: &Value) -> bool {
    selector
        .split(',')
        .filter(|t| !t.trim().is_empty())
        .all(|term| match term.split_once('=') {
            Some((k, v)) => labels[k.trim()].as_str() == Some(v.trim()),
            None => labels.get(term.trim()).is_some(),
        })
}

/// RFC 7386 merge of `patch` into `target`.
fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

impl Fake {
    /// Stores `object` (it must carry its name and namespace) under the
    /// collection path `collection` (such as `/api/v1/namespaces/default/pods`).
    pub fn put(&self, collection: &str, object: Value) {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let key = format!("{collection}/{name}");
        lock(&self.store).write(&key, object);
    }

    /// Whether there is an object at `path`.
    pub fn has(&self, path: &str) -> bool {
        lock(&self.store).objects.contains_key(path)
    }

    /// The object at `path`.
    pub fn get(&self, path: &str) -> Option<Value> {
        lock(&self.store).objects.get(path).cloned()
    }

    /// Takes the object at `path` away.
    pub fn remove(&self, path: &str) -> Option<Value> {
        lock(&self.store).delete(path)
    }

    /// Changes the object at `path` with a merge patch.
    pub fn change(&self, path: &str, patch: &Value) {
        let mut store = lock(&self.store);
        if let Some(mut o) = store.objects.get(path).cloned() {
            merge(&mut o, patch);
            store.write(path, o);
        }
    }

    /// The next watch of `path` (a collection, such as `/api/v1/pods`)
    /// gets one ERROR event, 410 "too old resource version", and ends, as
    /// from an API server that restarted and compacted its history.
    pub fn expire_next_watch(&self, path: &str) {
        lock(&self.expire).push(path.to_string());
    }

    /// Sets the log of the pod at `path` (`.../pods/NAME`), as served by
    /// `GET .../pods/NAME/log`.
    pub fn set_log(&self, path: &str, text: &str) {
        lock(&self.logs).insert(path.to_string(), text.to_string());
    }

    /// Every object whose path starts with `prefix`, with its path.
    pub fn all(&self, prefix: &str) -> Vec<(String, Value)> {
        let store = lock(&self.store);
        let found = store.objects.iter().filter(|(k, _)| k.starts_with(prefix));
        found.map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Seen> {
        lock(&self.log).clone()
    }

    fn answer(&self, seen: &Seen, body: &Value) -> (u16, Value) {
        let Some(target) = Target::parse(&seen.path) else {
            return (404, status(404, "NotFound"));
        };
        let ns = target.namespace.clone().unwrap_or_default();
        let mut store = lock(&self.store);
        match (&seen.method, &target.name) {
            (&Method::GET, None) => {
                let items: Vec<Value> = store
                    .objects
                    .iter()
                    .filter(|(k, v)| watch::selected(&seen.path, &seen.query, k, v))
                    .map(|(_, v)| v.clone())
                    .collect();
                let version = store.changes.version().to_string();
                let list = json!({
                    "kind": "List", "apiVersion": "v1",
                    "metadata": {"resourceVersion": version}, "items": items,
                });
                (200, list)
            }
            (&Method::GET, Some(name)) => match store.objects.get(&target.key(&ns, name)) {
                Some(o) if target.sub.is_none() || target.sub.as_deref() == Some("status") => {
                    (200, o.clone())
                }
                _ => (404, status(404, "NotFound")),
            },
            (&Method::POST, None) => {
                let mut object = body.clone();
                let count = store.objects.len();
                let name = match object["metadata"]["name"].as_str() {
                    Some(n) => n.to_string(),
                    None => {
                        let base = object["metadata"]["generateName"].as_str().unwrap_or("x");
                        format!("{base}{count}")
                    }
                };
                object["metadata"]["name"] = json!(name);
                object["metadata"]["namespace"] = json!(ns);
                object["metadata"]["uid"] = json!(format!("uid-{count}"));
                (201, store.write(&target.key(&ns, &name), object))
            }
            (&Method::PATCH, Some(name)) => {
                let key = target.key(&ns, name);
                let apply = seen.content_type.starts_with("application/apply-patch");
                let next_uid = format!("uid-{}", store.objects.len());
                let mut object = match store.objects.get(&key) {
                    Some(o) => o.clone(),
                    None if apply && target.sub.is_none() => {
                        let mut o = json!({"metadata": {
                            "name": name, "namespace": ns, "uid": next_uid,
                        }});
                        merge(&mut o, body);
                        o["metadata"]["name"] = json!(name);
                        return (201, store.write(&key, o));
                    }
                    None => return (404, status(404, "NotFound")),
                };
                match target.sub.as_deref() {
                    Some("status") => merge(&mut object["status"], &body["status"]),
                    _ => merge(&mut object, body),
                }
                (200, store.write(&key, object))
            }
            // A replace: the whole object, as sent (no resourceVersion check).
            (&Method::PUT, Some(name)) if target.sub.is_none() => {
                let key = target.key(&ns, name);
                match store.objects.contains_key(&key) {
                    true => (200, store.write(&key, body.clone())),
                    false => (404, status(404, "NotFound")),
                }
            }
            (&Method::DELETE, Some(name)) => match store.delete(&target.key(&ns, name)) {
                Some(_) => (200, status(200, "")),
                None => (404, status(404, "NotFound")),
            },
            _ => (405, status(405, "MethodNotAllowed")),
        }
    }
}

fn status(code: u16, reason: &str) -> Value {
    let failure = code >= 400;
    json!({
        "kind": "Status", "apiVersion": "v1",
        "status": if failure { "Failure" } else { "Success" },
        "reason": reason, "code": code, "message": reason,
    })
}

async fn serve(mut handle: std::pin::Pin<Box<Handle<Request<Body>, Response<Body>>>>, fake: Fake) {
    while let Some((request, send)) = handle.as_mut().next_request().await {
        let (parts, body) = request.into_parts();
        let bytes = body.collect_bytes().await.unwrap_or_default();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let query = parts
            .uri
            .query()
            .unwrap_or_default()
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (decode(k), decode(v)))
            .collect();
        let content_type = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let seen = Seen {
            method: parts.method,
            path: parts.uri.path().to_string(),
            query,
            content_type,
            at: tokio::time::Instant::now(),
        };
        lock(&fake.log).push(seen.clone());
        let watch = seen
            .query
            .get("watch")
            .is_some_and(|w| w == "true" || w == "1");
        if seen.method == Method::GET && watch {
            let expire = {
                let mut paths = lock(&fake.expire);
                let at = paths.iter().position(|p| *p == seen.path);
                at.map(|i| paths.remove(i)).is_some()
            };
            if expire {
                send.send_response(watch::expired());
            } else {
                lock(&fake.store)
                    .changes
                    .watch(&seen.path, &seen.query, send);
            }
            continue;
        }
        if seen.method == Method::GET
            && let Some(pod) = seen.path.strip_suffix("/log")
        {
            let text = lock(&fake.logs).get(pod).cloned();
            let (code, text) = match text {
                Some(t) => (StatusCode::OK, t),
                None => (StatusCode::NOT_FOUND, String::new()),
            };
            let response = Response::builder()
                .status(code)
                .header(http::header::CONTENT_TYPE, "text/plain")
                .body(Body::from(text.into_bytes()));
            if let Ok(r) = response {
                send.send_response(r);
            }
            continue;
        }
        let (code, answer) = fake.answer(&seen, &body);
        let response = Response::builder()
            .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Body::from(serde_json::to_vec(&answer).unwrap_or_default()));
        if let Ok(r) = response {
            send.send_response(r);
        }
    }
}

#[test]
fn paths_selectors_and_verbs() {
    let t = Target::parse("/apis/etcdoperator.dev/v1alpha1/namespaces/ns/etcdclusters/demo/status")
        .expect("a resource path");
    assert_eq!(
        (
            t.group.as_str(),
            t.resource.as_str(),
            t.name.as_deref(),
            t.sub.as_deref()
        ),
        (
            "etcdoperator.dev",
            "etcdclusters",
            Some("demo"),
            Some("status")
        )
    );
    let all = Target::parse("/api/v1/pods").expect("a resource path");
    assert_eq!((all.namespace, all.name), (None, None));
    assert_eq!(decode("a%2Fb%3Dc%2Cd"), "a/b=c,d");
    assert!(selects("a=b,c", &json!({"a": "b", "c": "x"})));
    assert!(!selects("a=b", &json!({"a": "c"})));
    let apply = Seen {
        method: Method::PATCH,
        path: "/api/v1/namespaces/ns/pods/p".into(),
        query: BTreeMap::new(),
        content_type: "application/apply-patch+yaml".into(),
        at: tokio::time::Instant::now(),
    };
    let target = Target::parse(&apply.path).expect("a resource path");
    assert_eq!(verbs(&apply, &target), ["patch", "create"]);
}
