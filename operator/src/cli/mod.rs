//! What the `status`, `backups` and `backup` commands print, kept out of
//! `main.rs` so it is testable.

pub mod backup;
pub mod check_backup;
pub mod status;
mod table;
