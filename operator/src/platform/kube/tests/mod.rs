//! Tests of the Kubernetes platform: the objects it builds, how it reads
//! members from them, and its requests against a mocked API server.

mod api;
mod builders;
mod fixtures;
mod members;
mod platform;
mod reconcile;
