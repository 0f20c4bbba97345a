//! chaos-monkey: injects faults into the etcd members that etcd-operator
//! manages, on a schedule, reproducibly, and logs each one for the soak
//! runner. The `chaos-monkey` binary is a thin shell around this library.
//!
//! - [`cli`] and [`config`]: the flags and their checks;
//! - [`select`] (with [`rng`]): victim choice, a pure function of the seed,
//!   the tick and the candidates;
//! - [`target`]: where faults land ([`target::local`] processes,
//!   [`target::kube`] pods) and how roles are found ([`roles`]);
//! - [`net`] (with [`netplan`]): network faults on the local platform, kernel
//!   rules around the members; [`disk`]: corrupt and disk-full;
//! - [`monkey`]: the run loop; [`faultlog`]: its records; [`app`]: a run on
//!   the configured platform.

pub mod app;
pub mod cli;
pub mod clock;
pub mod config;
pub mod disk;
pub mod faultlog;
pub mod kinds;
pub mod monkey;
pub mod net;
pub mod netplan;
pub mod rng;
pub mod roles;
pub mod select;
pub mod target;

pub use config::Config;
pub use faultlog::FaultLog;
pub use monkey::{Stop, Summary, run};
