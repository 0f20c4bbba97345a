//! Tests of the Kubernetes platform.
