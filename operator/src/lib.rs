//! etcd-operator: keeps etcd clusters in the state their `EtcdCluster` spec
//! declares. The binaries `etcd-operator`, `chaos-monkey` and `soak` are thin
//! shells around this library.

pub mod crd;
pub mod manifest;
pub mod plan;
pub mod validate;
pub mod version;
