//! The soak runner: an etcd cluster under the operator, a chaos monkey and
//! client load, checked continuously against invariants and, at the end,
//! against the bounds of a scenario.
//!
//! `scenario` (parse and validate) -> `runner` (processes, `load`, `probe`,
//! `watch`), recording into `data` -> `invariants`, `lin` and
//! `watch::check` (pure checkers over the recorded histories) -> `report`.

pub mod bench;
pub mod client;
pub mod data;
pub mod history;
pub mod invariants;
pub mod lin;
pub mod load;
pub mod ops;
pub mod paths;
pub mod probe;
pub mod progress;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod watch;
