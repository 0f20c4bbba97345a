//! Tests of the Kubernetes platform: the objects it builds, how it reads
//! members from them, and its requests against a mocked API server.

pub(crate) mod api;
pub(crate) mod backup_jobs;
mod backup_restore;
mod builders;
mod chain_restore;
mod changes;
mod continuous;
mod etcd_pods;
pub(crate) mod fake;
pub(crate) mod fixtures;
mod idle;
mod kubelet;
mod members;
mod object_store;
mod placement;
mod platform;
mod pod_ip;
pub(crate) mod rbac;
mod rebuild;
mod reconcile;
mod reseed;
mod restart;
mod restore_check;
mod restore_missing;
mod roll_pods;
mod rollback;
mod scale_events;
mod scenario;
mod standby;
mod standby_boot;
mod storage_class;
mod tls_backups;
mod trouble;
mod upgrade;
mod vanishing;
mod volumes;
