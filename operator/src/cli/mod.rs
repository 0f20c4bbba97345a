//! What the `status`, `backups` and `backup` commands print, kept out of
//! `bin/etcd-operator` (and `bin/kubectl-etcd`) so it is testable.

pub mod backup;
pub mod backup_table;
pub mod check_backup;
pub mod docs;
pub mod status;
pub mod status_detail;
pub mod store_listing;
pub mod table;

/// Stack of each runtime thread.
pub const STACK_BYTES: usize = 8 << 20;

/// The async runtime every program of the workspace runs on (the
/// operator, the chaos monkey, the soak): two worker threads, timers and
/// I/O on.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // A reconcile pass is one deep future (Kubernetes objects held
        // across awaits): room to spare beyond tokio's 2 MiB.
        .thread_stack_size(STACK_BYTES)
        .enable_all()
        .build()
}
