//! etcd-operator: keeps etcd clusters in the state their `EtcdCluster` spec
//! declares. The binaries `etcd-operator`, `kubectl-etcd` (the kubectl
//! plugin, [`kubectl`]), `chaos-monkey` and `soak` are thin shells around
//! this library.
//!
//! The reconcile pipeline is `observe` -> `plan` (pure) -> `controller::act`
//! -> `controller::status`; `platform` says where members run.

pub mod backup;
pub mod child_env;
pub mod cli;
pub mod controller;
pub mod crd;
pub mod etcd;
pub mod faults;
pub mod fence;
pub mod kube_names;
pub mod kubectl;
pub mod manifest;
pub mod member;
pub mod metrics;
pub mod names;
pub mod observe;
pub mod plan;
pub mod platform;
pub mod standby;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tls;
pub mod units;
pub mod userfile;
pub mod validate;
pub mod version;
pub mod yaml;
