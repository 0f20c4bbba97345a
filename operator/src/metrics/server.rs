//! `--metrics-addr`: `/metrics` (OpenMetrics text), `/healthz` (the
//! operator's runtime answers) and `/readyz` (the controller is running
//! and can see its clusters: the manifests folder read, or the
//! EtcdCluster resources listed; or a standby replica waiting for the
//! leader election Lease, `ok: ` and why), served by axum.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use super::Metrics;

/// OpenMetrics' content type.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Whether the controller is ready, and if not, why.
#[derive(Debug)]
pub struct Health {
    /// `Ok` with a note (a standby replica), or why not ready.
    ready: Mutex<Result<Option<String>, String>>,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            ready: Mutex::new(Err("the controller has not started yet".into())),
        }
    }
}

impl Health {
    fn set(&self, to: Result<Option<String>, String>) {
        *self.ready.lock().unwrap_or_else(|e| e.into_inner()) = to;
    }

    /// The controller sees its clusters.
    pub fn ready(&self) {
        self.set(Ok(None));
    }

    /// A standby replica (another one leads): ready to take over, and why
    /// it does not reconcile.
    pub fn standby(&self, why: impl Into<String>) {
        self.set(Ok(Some(why.into())));
    }

    /// The controller cannot see its clusters, and why.
    pub fn not_ready(&self, why: impl Into<String>) {
        self.set(Err(why.into()));
    }

    /// `Ok`, or why not ready.
    pub fn check(&self) -> Result<(), String> {
        self.state().map(|_| ())
    }

    /// `Ok` with the standby note if any, or why not ready.
    pub fn state(&self) -> Result<Option<String>, String> {
        self.ready.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Why the endpoints could not be served.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on --metrics-addr {addr}: {source}")]
pub struct Error {
    /// The address asked for.
    pub addr: SocketAddr,
    /// The cause.
    pub source: std::io::Error,
}

/// Writes the address bound to `path` (`None`: removes the file), for
/// tools and tests that asked for port 0; a failure is only logged.
pub fn record_addr(path: &std::path::Path, addr: Option<SocketAddr>) {
    let written = match addr {
        Some(a) => std::fs::write(path, format!("{a}\n")),
        None => std::fs::remove_file(path).or_else(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Ok(()),
            _ => Err(e),
        }),
    };
    if let Err(e) = written {
        tracing::warn!("cannot write {}: {e}", path.display());
    }
}

/// Binds `addr` (port 0: any free port) and serves the endpoints on a task
/// of their own until the runtime stops; returns the address bound.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
) -> Result<SocketAddr, Error> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| Error { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| Error { addr, source })?;
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                async move { ([(header::CONTENT_TYPE, CONTENT_TYPE)], metrics.encode()) }
            }),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let health = health.clone();
                async move {
                    match health.state() {
                        Ok(None) => (StatusCode::OK, "ok\n".to_string()).into_response(),
                        Ok(Some(note)) => (StatusCode::OK, format!("ok: {note}\n")).into_response(),
                        Err(why) => (
                            StatusCode::SERVICE_UNAVAILABLE,
                            format!("not ready: {why}\n"),
                        )
                            .into_response(),
                    }
                }
            }),
        );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("the metrics endpoint stopped: {e}");
        }
    });
    tracing::info!("metrics on http://{bound}/metrics, health on /healthz and /readyz");
    Ok(bound)
}
