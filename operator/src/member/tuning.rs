//! etcd's raft timing (`--heartbeat-interval`, `--election-timeout`): the
//! member's [`Tuning`], and `spec.tuning` checked as etcd checks its flags
//! ([`check_tuning`]), so a member never fails to start on its timing.

use serde::{Deserialize, Serialize};

use crate::crd::TuningSpec;
use crate::units::parse_duration;

/// Longest election timeout etcd accepts (`maxElectionMs`), in ms.
pub const MAX_ELECTION_MS: u32 = 50_000;
/// Longest heartbeat interval: etcd needs an election timeout of at least
/// 5 heartbeats, and at most [`MAX_ELECTION_MS`].
pub const MAX_HEARTBEAT_MS: u32 = MAX_ELECTION_MS / 5;

/// etcd's raft timing of a member: both in milliseconds, `None` for etcd's
/// default (heartbeat 100 ms, election 1000 ms, the same in 3.4 and 3.5).
/// Kept normalized ([`Tuning::new`]): a value equal to etcd's default is
/// `None`, so writing the default explicitly restarts nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tuning {
    /// `--heartbeat-interval` in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_ms: Option<u32>,
    /// `--election-timeout` in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub election_ms: Option<u32>,
}

impl Tuning {
    /// etcd's default heartbeat interval, in ms.
    pub const DEFAULT_HEARTBEAT_MS: u32 = 100;
    /// etcd's default election timeout, in ms.
    pub const DEFAULT_ELECTION_MS: u32 = 1000;

    /// Timing with these values (etcd's defaults become `None`).
    pub fn new(heartbeat_ms: Option<u32>, election_ms: Option<u32>) -> Self {
        Tuning {
            heartbeat_ms: heartbeat_ms.filter(|&h| h != Self::DEFAULT_HEARTBEAT_MS),
            election_ms: election_ms.filter(|&e| e != Self::DEFAULT_ELECTION_MS),
        }
    }

    /// Both at etcd's defaults.
    pub fn is_default(&self) -> bool {
        *self == Tuning::default()
    }

    /// The heartbeat interval etcd runs with, in ms.
    pub fn heartbeat(&self) -> u32 {
        self.heartbeat_ms.unwrap_or(Self::DEFAULT_HEARTBEAT_MS)
    }

    /// The election timeout etcd runs with, in ms.
    pub fn election(&self) -> u32 {
        self.election_ms.unwrap_or(Self::DEFAULT_ELECTION_MS)
    }
}

/// `spec.tuning` as etcd takes it (whole milliseconds, a heartbeat of at
/// least 1 ms, an election timeout of at least 5 heartbeats and at most
/// [`MAX_ELECTION_MS`]; an unset field counts at etcd's default), or the
/// problems, each with its field.
pub fn check_tuning(t: &TuningSpec) -> Result<Tuning, Vec<(&'static str, String)>> {
    let mut problems = Vec::new();
    let mut ms = |field: &'static str, value: &Option<String>, max: u32| {
        let text = value.as_deref()?;
        let d = match parse_duration(text) {
            Ok(d) => d,
            Err(m) => {
                problems.push((field, m));
                return None;
            }
        };
        let whole = d.subsec_nanos() % 1_000_000 == 0;
        match u32::try_from(d.as_millis()) {
            Ok(n) if whole && (1..=max).contains(&n) => Some(n),
            _ if !whole => {
                problems.push((
                    field,
                    format!("etcd takes whole milliseconds, got {text:?}; write e.g. \"25ms\""),
                ));
                None
            }
            _ => {
                problems.push((
                    field,
                    format!("must be between 1ms and {max}ms, got {text:?}"),
                ));
                None
            }
        }
    };
    let heartbeat = ms(
        "spec.tuning.heartbeatInterval",
        &t.heartbeat_interval,
        MAX_HEARTBEAT_MS,
    );
    let election = ms(
        "spec.tuning.electionTimeout",
        &t.election_timeout,
        MAX_ELECTION_MS,
    );
    let broken = (t.heartbeat_interval.is_some() && heartbeat.is_none())
        || (t.election_timeout.is_some() && election.is_none());
    if broken {
        return Err(problems);
    }
    let tuning = Tuning::new(heartbeat, election);
    if tuning.election() < 5 * tuning.heartbeat() {
        let (h, e) = (tuning.heartbeat(), tuning.election());
        let which = match (heartbeat, election) {
            (Some(_), None) => format!(" (the default election timeout is {e}ms)"),
            (None, Some(_)) => format!(" (the default heartbeat interval is {h}ms)"),
            _ => String::new(),
        };
        problems.push((
            "spec.tuning.electionTimeout",
            format!(
                "must be at least 5 times the heartbeat interval, as etcd requires: {e}ms < \
                 5 x {h}ms{which}; raise electionTimeout to at least {}ms or lower \
                 heartbeatInterval",
                5 * h
            ),
        ));
        return Err(problems);
    }
    Ok(tuning)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuning(heartbeat: Option<&str>, election: Option<&str>) -> TuningSpec {
        TuningSpec {
            heartbeat_interval: heartbeat.map(str::to_string),
            election_timeout: election.map(str::to_string),
        }
    }

    #[test]
    fn tuning_is_checked_as_etcd_checks_it() {
        let ok = |h, e| check_tuning(&tuning(h, e)).expect("valid tuning");
        assert_eq!(ok(None, None), Tuning::default());
        assert_eq!(
            ok(Some("25ms"), Some("250ms")),
            Tuning::new(Some(25), Some(250))
        );
        assert_eq!(ok(Some("100ms"), Some("1s")), Tuning::default());
        assert_eq!(ok(None, Some("50s")), Tuning::new(None, Some(50_000)));
        assert_eq!(ok(Some("10s"), Some("50s")).heartbeat(), 10_000);
        let bad = |h, e| {
            check_tuning(&tuning(h, e))
                .expect_err("invalid tuning")
                .into_iter()
                .map(|(f, m)| format!("{f}: {m}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        // Election shorter than 5 heartbeats, also against a default.
        let e = bad(Some("25ms"), Some("100ms"));
        assert!(
            e.starts_with("spec.tuning.electionTimeout: must be at least 5 times"),
            "{e}"
        );
        assert!(e.contains("at least 125ms"), "{e}");
        let e = bad(None, Some("250ms"));
        assert!(e.contains("the default heartbeat interval is 100ms"), "{e}");
        let e = bad(Some("300ms"), None);
        assert!(e.contains("the default election timeout is 1000ms"), "{e}");
        // Units, bounds, syntax.
        assert!(bad(Some("1500us"), None).contains("whole milliseconds"));
        assert!(bad(Some("0s"), None).contains("between 1ms and 10000ms"));
        assert!(bad(None, Some("51s")).contains("between 1ms and 50000ms"));
        assert!(bad(Some("11s"), Some("50s")).starts_with("spec.tuning.heartbeatInterval"));
        assert!(bad(Some("fast"), None).contains("is not a duration"));
        assert!(bad(Some("-5ms"), None).contains("must not be negative"));
    }
}
