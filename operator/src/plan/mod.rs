//! The plan: a pure function from (desired spec, observed state) to the one
//! next step. No I/O, no clock: everything it needs is in its arguments, so
//! it is tested exhaustively (see `props/mod.rs`).
//!
//! Rules it keeps whatever it observes:
//! * it never takes a step that loses quorum by its own hand: a step that
//!   makes a voting member unavailable is taken only when the healthy voters
//!   left still form a quorum of the voters left;
//! * one membership change per step, and a new change (add, promote, or
//!   removing a healthy member) only once every member is healthy;
//! * it never removes a healthy member while another member is unhealthy;
//! * a member whose data survived is restarted in place; one whose data is
//!   gone is replaced (removed, then a new one added as a learner, started,
//!   and promoted once it has caught up);
//! * a TLS change or a new trusted CA restarts one member at a time, only
//!   when every member is healthy and a voter can be spared, and never
//!   gives a member an `https://` peer URL while a peer cannot dial it
//!   (see [`tls`]); renewing certificates restarts nothing;
//! * when quorum is lost it only restarts members whose data survived,
//!   and rebuilds only when quorum is lost for good (the rules are in
//!   [`lost`]): from the most advanced survivor, or from a backup;
//! * it never restarts or removes the leader while another healthy voter
//!   can take over: it hands the leadership over first
//!   ([`Step::MoveLeader`]), to the most caught-up healthy voter that the
//!   next steps leave alone;
//! * volumes grow to `spec.storage.size` one member at a time, in place
//!   (a restart only where the filesystem grows offline), and never shrink:
//!   a smaller size adds no member and is reported; a member whose volume
//!   is of another class than `spec.storage.storageClassName` is replaced,
//!   one at a time, a new member added (and promoted) before the old one
//!   is removed, so the cluster never has fewer voters than its size (see
//!   [`volumes`]);
//! * a scale-down removes the newest followers and keeps the leader, so
//!   it changes no leadership (without the handover, the newest go, the
//!   leader among them); a rolling upgrade, restart or TLS change goes
//!   followers first, the leader last.

mod describe;
pub mod lost;
mod maintenance;
#[cfg(test)]
pub(crate) mod props;
mod roll;
mod step;
#[cfg(test)]
mod tests;
pub mod tls;
mod types;
mod view;
mod volumes;

pub use maintenance::{DISARM_BELOW, MIN_RECLAIM, room_again, running_quota};
pub use step::*;
pub use types::*;
use view::View;

/// Votes needed for quorum among `voters`.
pub fn quorum(voters: usize) -> usize {
    voters / 2 + 1
}

/// The next step towards `desired` from `observed`.
pub fn plan(desired: &Desired, observed: &Observed) -> Step {
    if desired.paused {
        return Step::Wait(Wait::Paused);
    }
    // New certificates restart nothing and are needed whatever else is
    // going on (a member whose certificate expired cannot rejoin).
    if let Some(m) = observed
        .members
        .iter()
        .filter(|m| m.platform.as_ref().is_some_and(|p| p.certs_due))
        .min_by(|a, b| member_order(&a.name, &b.name))
    {
        return Step::RenewCertificates {
            member: m.name.clone(),
        };
    }
    if !observed.bootstrapped {
        return plan_bootstrap(observed);
    }
    let view = View::new(desired, observed);
    if !observed.membership_known {
        return view.without_quorum(desired, observed);
    }
    let step = view.with_quorum(desired, observed);
    let step = if desired.handover {
        view.hand_over_first(desired, step)
    } else {
        step
    };
    respect_readiness(observed, step)
}

/// A planned disruption (a restart for an upgrade, settings or TLS, a
/// scale-down's removal) waits while another member is not serving in the
/// platform's eyes (a pod not Ready yet after its own restart): etcd may
/// call that member healthy a moment before Kubernetes does, and two
/// members out at once break the cluster's PodDisruptionBudget. Repairs
/// (starting, replacing or removing dead members) never wait for it.
fn respect_readiness(o: &Observed, step: Step) -> Step {
    let planned =
        step.is_planned_restart() || matches!(step, Step::Remove { why, .. } if why.planned());
    if !planned {
        return step;
    }
    let target = step.disrupts();
    match o.not_serving.iter().find(|m| Some(m.as_str()) != target) {
        Some(m) => Step::Wait(Wait::MemberNotReady { member: m.clone() }),
        None => step,
    }
}

/// Before the cluster first formed: (re)start the initial members.
fn plan_bootstrap(o: &Observed) -> Step {
    let initial: Vec<&Runtime> = o
        .members
        .iter()
        .filter_map(|m| m.platform.as_ref().filter(|p| p.bootstrap))
        .collect();
    if initial.is_empty() || initial.iter().any(|p| !p.running) {
        Step::Bootstrap
    } else {
        Step::Wait(Wait::Forming)
    }
}

/// Orders member names by their numeric suffix ("demo-10" after "demo-9").
pub fn member_order(a: &str, b: &str) -> std::cmp::Ordering {
    let key = |s: &str| {
        let n = s
            .rsplit_once('-')
            .and_then(|(_, n)| n.parse::<u64>().ok())
            .unwrap_or(0);
        (n, s.to_string())
    };
    key(a).cmp(&key(b))
}
