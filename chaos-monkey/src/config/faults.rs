//! The options of the network and disk faults: their defaults, which fault
//! each belongs to, and the faults Kubernetes cannot take.

use std::time::Duration;

use super::Error;
use crate::cli::{Args, CorruptPart, FaultKind, Skew, Split};
use crate::select::Target;

/// Why `--fault clock-skew` is refused on Kubernetes.
pub const CLOCK_SKEW_WHY: &str = "etcd is a Go program, and Go reads the clock through the \
    kernel's vDSO, never through libc, so libfaketime cannot shift it; the monkey patches the \
    member's vDSO through ptrace, which needs to run as root beside the member (the local \
    platform), not through the Kubernetes API";

/// Why `--fault clock-skew` is refused off x86_64 Linux.
pub const CLOCK_SKEW_ARCH: &str = "the vDSO patch is x86_64 machine code: clock-skew works on \
    x86_64 Linux only";

/// The default of `--skew`: 30 s ahead.
pub const DEFAULT_SKEW_NANOS: i64 = 30_000_000_000;

/// The options of the newer faults (network, disk), with their defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultOptions {
    /// How long partition, delay and loss last; the longest a
    /// blackhole-until-snapshot waits for its snapshot.
    pub fault_for: Duration,
    /// `--split`: cut the cluster in two around the victim.
    pub split: Option<Split>,
    /// `--latency`.
    pub latency: Duration,
    /// `--latency-jitter`.
    pub latency_jitter: Duration,
    /// `--loss`, in percent (0, 100].
    pub loss_percent: f64,
    /// `--corrupt`.
    pub corrupt: CorruptPart,
    /// `--fill-max`, bytes.
    pub fill_max: u64,
    /// `--skew`.
    pub skew: Skew,
    /// `--disk-iops`.
    pub disk_iops: u32,
}

impl Default for FaultOptions {
    fn default() -> Self {
        FaultOptions {
            fault_for: Duration::from_secs(10),
            split: None,
            latency: Duration::from_millis(200),
            latency_jitter: Duration::ZERO,
            loss_percent: 30.0,
            corrupt: CorruptPart::Db,
            fill_max: 4 << 30,
            skew: Skew::from_nanos(DEFAULT_SKEW_NANOS).expect("30s is a valid skew"),
            disk_iops: 20,
        }
    }
}

/// Why a fault cannot be injected on Kubernetes, or `None` when it can.
pub fn kube_refusal(fault: FaultKind) -> Option<&'static str> {
    match fault {
        FaultKind::Kill | FaultKind::Destroy | FaultKind::Partition => None,
        FaultKind::Pause => Some("pods cannot be SIGSTOPped through the Kubernetes API"),
        FaultKind::Delay | FaultKind::Loss => Some(
            "latency and loss need packet rules inside the pod's network namespace (NET_ADMIN), \
             which the API cannot grant without privileges",
        ),
        FaultKind::BlackholeUntilSnapshot => Some(
            "it needs the members' raft indexes and metrics at their pod IPs, out of reach \
             from where the monkey runs; use --fault partition with --fault-for",
        ),
        FaultKind::Corrupt => Some(
            "it needs an exec into the member's container, and this build's Kubernetes client \
             has no exec (kube's `ws` websocket feature is not enabled)",
        ),
        FaultKind::DiskFull => Some(
            "the write burst needs a client connection to a member, and pod IPs are out of \
             reach from where the monkey runs",
        ),
        FaultKind::ClockSkew => Some(CLOCK_SKEW_WHY),
        FaultKind::SlowDisk => Some(
            "it moves the member's process into a blkio cgroup of the node, which needs root \
             on the node, not the Kubernetes API",
        ),
    }
}

/// Checks the options of the newer faults against `--fault` and
/// `--target`, and fills in the defaults.
pub(super) fn fault_options(a: &Args) -> Result<FaultOptions, Error> {
    if let Some((flag, wants)) = a.chaos.options_for_other_faults().first() {
        return Err(Error::OptionForOtherFault(
            flag,
            wants,
            a.chaos.fault.as_str(),
        ));
    }
    if a.chaos.split.is_some()
        && !matches!(
            a.chaos.target,
            Target::Random | Target::Leader | Target::Follower
        )
    {
        return Err(Error::SplitTarget(a.chaos.target.as_str()));
    }
    let d = FaultOptions::default();
    Ok(FaultOptions {
        fault_for: a.chaos.fault_for.unwrap_or(d.fault_for),
        split: a.chaos.split,
        latency: a.chaos.latency.unwrap_or(d.latency),
        latency_jitter: a.chaos.latency_jitter.unwrap_or(d.latency_jitter),
        loss_percent: a.chaos.loss.unwrap_or(d.loss_percent),
        corrupt: a.chaos.corrupt.unwrap_or(d.corrupt),
        fill_max: a.chaos.fill_max.unwrap_or(d.fill_max),
        skew: a.chaos.skew.unwrap_or(d.skew),
        disk_iops: a.chaos.disk_iops.unwrap_or(d.disk_iops),
    })
}
