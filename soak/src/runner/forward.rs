//! How the soak reaches members on Kubernetes without kubectl: a local
//! listener per member (127.0.0.1, a free port) whose every connection is
//! carried to port 2379 of the member's pod by kube-rs's own port-forward
//! (`Api::portforward`, the API server's pods/portforward over WebSocket).
//! When a port-forward cannot be opened (no kubelet streaming, RBAC) and
//! the member's published client URL resolves from here (the soak runs in
//! the cluster, or its DNS is reachable), the client URL is used instead.
//! Which one is used is said once per member, and again when it changes.
//! A member whose pod is not yet scheduled and running gets no route (and
//! no note) until it is: only a running pod that refuses a port-forward
//! says something about RBAC or the kubelet. The first answer decides for
//! the whole run: once a port-forward worked every member gets one at
//! once, once one was refused and client URLs resolve every member uses
//! its URL, without trying each member again (that cost ~3 s of failures
//! per member).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use etcd_operator::crd::member_selector as pod_selector;

/// etcd's client port in a member's pod.
pub const CLIENT_PORT: u16 = 2379;
/// Port-forwards failing in a row before a resolvable client URL is taken
/// instead.
pub const FAILURES_BEFORE_DIRECT: u32 = 3;

/// How a member is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Way {
    /// Through the local port of a port-forward.
    Forward,
    /// At its client URL.
    Direct,
}

/// What to do about a member, from what was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The way.
    pub way: Way,
    /// What to say.
    pub note: String,
}

/// Chooses how to reach `member`: a port-forward when one could be opened
/// (`forward`), else its client URL `url` when it resolves here, else
/// still the port-forward (it may work later; until then the member looks
/// down, and the note says why).
pub fn choose(member: &str, url: &str, forward: Result<(), String>, resolves: bool) -> Choice {
    match forward {
        Ok(()) => Choice {
            way: Way::Forward,
            note: format!(
                "{member}: reached through a port-forward to its pod (kube API, no kubectl)"
            ),
        },
        Err(e) if resolves => Choice {
            way: Way::Direct,
            note: format!(
                "{member}: port-forward failed ({e}); using its client URL {url}, which resolves \
                 here"
            ),
        },
        Err(e) => Choice {
            way: Way::Forward,
            note: format!(
                "{member}: port-forward failed ({e}) and its client URL {url} does not resolve \
                 here: it looks down until a port-forward works (check RBAC pods/portforward \
                 and the kubelet's streaming)"
            ),
        },
    }
}

/// Whether the host of `url` resolves from here.
pub async fn resolves(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host_port = rest.split('/').next().unwrap_or(rest);
    let with_port = if host_port
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        host_port.to_string()
    } else {
        format!("{host_port}:{CLIENT_PORT}")
    };
    tokio::net::lookup_host(with_port)
        .await
        .is_ok_and(|mut a| a.next().is_some())
}

/// One member's route.
struct Route {
    url: String,
    port: u16,
    way: Way,
    failures: Arc<AtomicU32>,
    accept: JoinHandle<()>,
}

impl Drop for Route {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// The routes of a cluster's members.
pub struct Forwards {
    pods: Api<Pod>,
    cluster: String,
    routes: Arc<Mutex<HashMap<String, Route>>>,
    /// The way the first running pod's answer decided, for every member.
    decided: Mutex<Option<Way>>,
}

/// Why a port-forward was not opened.
#[derive(Debug, PartialEq, Eq)]
pub enum OpenError {
    /// The member's pod is not scheduled or not running yet: nothing is
    /// known about port-forwards.
    NotYet(String),
    /// The pod runs and the port-forward failed.
    Refused(String),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::NotYet(m) | OpenError::Refused(m) => f.write_str(m),
        }
    }
}

/// Whether `pod` can be port-forwarded to at all: scheduled on a node and
/// running (a pending pod's forward fails with "does not have a host
/// assigned", which says nothing about RBAC).
pub fn ready_for_forward(pod: &Pod) -> Result<(), OpenError> {
    let name = pod.metadata.name.as_deref().unwrap_or("?");
    if pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .is_none()
    {
        return Err(OpenError::NotYet(format!(
            "pod {name} is not scheduled yet"
        )));
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if phase != Some("Running") {
        return Err(OpenError::NotYet(format!(
            "pod {name} is {}, not Running yet",
            phase.unwrap_or("without a phase")
        )));
    }
    Ok(())
}

impl std::fmt::Debug for Forwards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwards")
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Forwards {
    /// Routes to the members of `cluster`, whose pods `pods` reaches.
    pub fn new(pods: Api<Pod>, cluster: &str) -> Self {
        Forwards {
            pods,
            cluster: cluster.into(),
            routes: Arc::default(),
            decided: Mutex::new(None),
        }
    }

    /// The cluster's name changed (a new scenario step): routes start over.
    pub fn set_cluster(&mut self, cluster: &str) {
        if self.cluster != cluster {
            self.cluster = cluster.into();
            lock(&self.routes).clear();
            *lock(&self.decided) = None;
        }
    }

    /// Makes sure every member has a route; returns what to say about new
    /// or changed ones.
    pub async fn tend(&self, members: &[(String, String)]) -> Vec<String> {
        let mut notes = Vec::new();
        for (member, url) in members {
            let known = {
                let routes = lock(&self.routes);
                routes.get(member).map(|r| {
                    (
                        r.way.clone(),
                        r.failures.load(Ordering::Relaxed),
                        r.url.clone(),
                    )
                })
            };
            match known {
                None => {
                    let decided = lock(&self.decided).clone();
                    let choice = match decided {
                        Some(Way::Forward) => choose(member, url, Ok(()), false),
                        Some(Way::Direct) if resolves(url).await => Choice {
                            way: Way::Direct,
                            note: format!(
                                "{member}: using its client URL {url} (port-forwards were \
                                 refused earlier in this run)"
                            ),
                        },
                        _ => match open(&self.pods, &self.cluster, member).await {
                            // Asked again at the next tend, silently.
                            Err(OpenError::NotYet(_)) => continue,
                            tried => {
                                let tried = tried.map(|_| ()).map_err(|e| e.to_string());
                                let ok = tried.is_ok();
                                let choice = choose(member, url, tried, resolves(url).await);
                                if ok || choice.way == Way::Direct {
                                    *lock(&self.decided) = Some(choice.way.clone());
                                }
                                choice
                            }
                        },
                    };
                    match self.listen(member, url, choice.way.clone()).await {
                        Ok(()) => notes.push(choice.note),
                        Err(e) => notes.push(format!("{member}: {e}")),
                    }
                }
                Some((Way::Forward, failures, known_url))
                    if failures >= FAILURES_BEFORE_DIRECT && resolves(&known_url).await =>
                {
                    if let Some(r) = lock(&self.routes).get_mut(member) {
                        r.way = Way::Direct;
                    }
                    notes.push(format!(
                        "{member}: {failures} port-forwards failed in a row; using its client \
                         URL {known_url}, which resolves here"
                    ));
                }
                Some(_) => {}
            }
        }
        notes
    }

    async fn listen(&self, member: &str, url: &str, way: Way) -> Result<(), String> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("no local address: {e}"))?
            .port();
        let failures = Arc::new(AtomicU32::new(0));
        let accept = tokio::spawn(accept(
            listener,
            self.pods.clone(),
            self.cluster.clone(),
            member.to_string(),
            failures.clone(),
        ));
        let route = Route {
            url: url.into(),
            port,
            way,
            failures,
            accept,
        };
        lock(&self.routes).insert(member.into(), route);
        Ok(())
    }

    /// Where a member's client URL is reached from here: the local port of
    /// its port-forward, or the URL itself.
    pub fn mapper(&self) -> impl Fn(&str) -> String + Send + Sync + 'static {
        let routes = self.routes.clone();
        move |url: &str| {
            let routes = lock(&routes);
            match routes.values().find(|r| r.url == url) {
                Some(r) if r.way == Way::Forward => {
                    let scheme = if url.starts_with("https://") {
                        "https"
                    } else {
                        "http"
                    };
                    format!("{scheme}://127.0.0.1:{}", r.port)
                }
                _ => url.to_string(),
            }
        }
    }

    /// The member client URL a local port-forward URL stands for (to check
    /// a TLS member's certificate against its own name).
    pub fn original(&self) -> impl Fn(&str) -> Option<String> + Send + Sync + 'static {
        let routes = self.routes.clone();
        move |local: &str| {
            let routes = lock(&routes);
            let found = routes.values().find(|r| {
                r.way == Way::Forward && local.ends_with(&format!("127.0.0.1:{}", r.port))
            });
            found.map(|r| r.url.clone())
        }
    }

    /// Stops every listener.
    pub fn clear(&self) {
        lock(&self.routes).clear();
    }
}

/// A port-forward to port 2379 of `member`'s pod (found by its labels, so
/// a re-created pod is found again).
async fn open(
    pods: &Api<Pod>,
    cluster: &str,
    member: &str,
) -> Result<impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin, OpenError> {
    let lp = ListParams::default().labels(&pod_selector(cluster, member));
    let listed = pods
        .list(&lp)
        .await
        .map_err(|e| OpenError::Refused(format!("cannot list its pod: {e}")))?;
    let found = listed
        .items
        .first()
        .ok_or_else(|| OpenError::NotYet("it has no pod yet".into()))?;
    ready_for_forward(found)?;
    let pod = found.metadata.name.clone().unwrap_or_default();
    let mut forwarder = pods
        .portforward(&pod, &[CLIENT_PORT])
        .await
        .map_err(|e| OpenError::Refused(format!("pods/{pod}/portforward: {e}")))?;
    forwarder
        .take_stream(CLIENT_PORT)
        .ok_or_else(|| OpenError::Refused(format!("pods/{pod}/portforward gave no stream")))
}

async fn accept(
    listener: TcpListener,
    pods: Api<Pod>,
    cluster: String,
    member: String,
    failures: Arc<AtomicU32>,
) {
    while let Ok((conn, _)) = listener.accept().await {
        let (pods, cluster, member) = (pods.clone(), cluster.clone(), member.clone());
        let failures = failures.clone();
        tokio::spawn(async move { carry(conn, &pods, &cluster, &member, &failures).await });
    }
}

async fn carry(
    mut conn: TcpStream,
    pods: &Api<Pod>,
    cluster: &str,
    member: &str,
    failures: &AtomicU32,
) {
    match open(pods, cluster, member).await {
        Ok(mut upstream) => {
            failures.store(0, Ordering::Relaxed);
            let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
        }
        Err(e) => {
            // Expected while a member's pod goes away (a fault).
            failures.fetch_add(1, Ordering::Relaxed);
            tracing::debug!("port-forward to {member}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_forward_first_then_a_client_url_that_resolves() {
        let url = "http://soak-0.soak.default.svc:2379";
        let c = choose("soak-0", url, Ok(()), false);
        assert_eq!(c.way, Way::Forward);
        assert!(c.note.contains("no kubectl"), "{}", c.note);
        let c = choose("soak-0", url, Err("403 Forbidden".into()), true);
        assert_eq!(c.way, Way::Direct);
        assert!(
            c.note.contains("403 Forbidden") && c.note.contains(url),
            "{}",
            c.note
        );
        let c = choose("soak-0", url, Err("403 Forbidden".into()), false);
        assert_eq!(c.way, Way::Forward);
        assert!(c.note.contains("does not resolve"), "{}", c.note);
    }

    #[test]
    fn only_a_scheduled_running_pod_can_refuse_a_port_forward() {
        let pod = |node: Option<&str>, phase: Option<&str>| Pod {
            metadata: kube::api::ObjectMeta {
                name: Some("soak-0".into()),
                ..Default::default()
            },
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                node_name: node.map(str::to_string),
                ..Default::default()
            }),
            status: Some(k8s_openapi::api::core::v1::PodStatus {
                phase: phase.map(str::to_string),
                ..Default::default()
            }),
        };
        let e = ready_for_forward(&pod(None, Some("Pending"))).expect_err("pending");
        assert_eq!(
            e,
            OpenError::NotYet("pod soak-0 is not scheduled yet".into())
        );
        let e = ready_for_forward(&pod(Some("n1"), Some("Pending"))).expect_err("starting");
        assert!(matches!(e, OpenError::NotYet(_)), "{e}");
        assert!(ready_for_forward(&pod(Some("n1"), Some("Running"))).is_ok());
    }

    #[test]
    fn the_pod_selector_matches_the_members_pod_only() {
        use etcd_operator::platform::kube::objects::member_labels;
        let selects = |selector: &str, labels: &std::collections::BTreeMap<String, String>| {
            selector.split(',').all(|term| {
                term.split_once('=')
                    .is_some_and(|(k, v)| labels.get(k).is_some_and(|x| x == v))
            })
        };
        let sel = pod_selector("a", "a-1");
        assert!(selects(&sel, &member_labels("a", "a-1")), "{sel}");
        assert!(!selects(&sel, &member_labels("a", "a-2")), "another member");
        assert!(
            !selects(&sel, &member_labels("b", "a-1")),
            "a same-named member of another cluster"
        );
    }

    #[tokio::test]
    async fn resolving_takes_ip_literals_and_names() {
        assert!(resolves("http://127.0.0.1:2379").await);
        assert!(resolves("http://localhost:2379").await);
        assert!(!resolves("http://soak-0.soak.default.svc.invalid:2379").await);
    }
}
