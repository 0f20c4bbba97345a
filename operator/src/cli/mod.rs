//! What the `status`, `backups` and `backup` commands print, kept out of
//! `bin/etcd-operator` so it is testable.

pub mod backup;
pub mod check_backup;
pub mod docs;
pub mod status;
pub mod table;
