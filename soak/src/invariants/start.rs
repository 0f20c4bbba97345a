//! From when a fault's recovery is counted.
//!
//! On the local platform a kill or destroy has taken effect when the
//! monkey logs it (it waits for the process to be gone), so recovery
//! counts from the fault log's time. On Kubernetes a pod delete takes
//! effect later (the kubelet stops the container ~0.4 s after the API
//! call), so the first probe after the log still finds the member up: a
//! 1.2 s recovery read as 0.125 s. There, a member fault counts from the
//! first probe that found the cluster unhealthy after it (the member
//! down); one no probe ever saw before the next fault is reported as
//! having shown no effect, not as a fast recovery. Resolution: one probe
//! interval either way.

use etcd_operator::faults::Fault;
use serde::Serialize;

/// From when recovery is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Start {
    /// From the fault log's time.
    Logged,
    /// From the first probe that saw a member fault's effect.
    Effect,
}

impl Start {
    /// Whether a fault named `fault` (as the fault log names it) is counted
    /// from its effect: a kill or destroy of members (not of the operator,
    /// `operator`, which leaves the cluster healthy; not a spec change or
    /// the end of a lasting fault, which the runner or the monkey did
    /// before logging it).
    pub fn from_effect(self, fault: &str, operator: bool) -> bool {
        self == Start::Effect
            && !operator
            && matches!(Fault::from_name(fault), Some(Fault::Kill | Fault::Destroy))
    }

    /// How the report says recovery was measured.
    pub fn describe(self) -> &'static str {
        match self {
            Start::Logged => {
                "from the fault log's time (local: a fault has taken effect when it is logged) \
                 to the first healthy probe"
            }
            Start::Effect => {
                "member kills from the first probe that saw the member down (Kubernetes: a pod \
                 delete takes effect after the API call), other faults from the fault log's \
                 time, to the first healthy probe"
            }
        }
    }
}
