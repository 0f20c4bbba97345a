//! A scenario's `standby` section: a second cluster kept up from the
//! scenario's cluster (the primary) by the operator's `spec.standby`, under
//! the same chaos, with its lag bounded and its data compared with the
//! primary's at the end. Local platform only.
//!
//! With `losePrimaryAt` the primary's place is destroyed at that time and
//! the standby promoted (scenarios `lose-primary`, `lose-primary-store`);
//! `bounds.lostOnPromotion` ([`LostOnPromotion`]) bounds what the
//! promotion loses.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Dur;

/// `standby`: a standby of the scenario's cluster, `CLUSTER-standby`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Standby {
    /// Members of the standby (1 to 9); default 1.
    #[serde(default = "one")]
    pub size: i64,
    /// Follow the primary's members live (`spec.standby.stream` with their
    /// client URLs); false: from the primary's backups in the store only.
    #[serde(default)]
    pub stream: bool,
    /// The most `status.standby.lagMs` may reach in any sample once the
    /// standby follows (the max of the samples, not a percentile).
    pub max_lag: Dur,
    /// Longest the standby gets at the end, once the primary stopped
    /// changing, to apply the primary's last revision; default 60s.
    #[serde(default = "default_catch_up")]
    pub catch_up: Dur,
    /// Whether the scenario's chaos hits the standby too (a second
    /// chaos-monkey on `CLUSTER-standby`, with the same options and a
    /// fault log of its own). Default: yes when there is a `chaos`
    /// section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chaos: Option<bool>,
    /// When (from the start of the run) the primary's place is destroyed:
    /// every primary member SIGKILLed at once, its data removed, the
    /// primary's monkey stopped, nothing bringing it back; then the standby
    /// is promoted and the load moves to it. Unset: the primary lives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lose_primary_at: Option<Dur>,
}

/// `bounds.lostOnPromotion`: how many writes the primary acknowledged past
/// the promoted standby's last applied revision may be lost. A number
/// (`0`: none, what a live standby must manage), or `lastSegment`: at most
/// what the primary acknowledged in the last `segmentInterval` before the
/// loss (a standby following the store is at best a segment behind),
/// counted from the run's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostOnPromotion {
    /// At most this many writes.
    Writes(u64),
    /// At most the writes acknowledged in the last segment interval.
    LastSegment,
}

impl std::fmt::Display for LostOnPromotion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LostOnPromotion::Writes(n) => write!(f, "{n}"),
            LostOnPromotion::LastSegment => f.write_str("lastSegment"),
        }
    }
}

impl Serialize for LostOnPromotion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            LostOnPromotion::Writes(n) => s.serialize_u64(*n),
            LostOnPromotion::LastSegment => s.serialize_str("lastSegment"),
        }
    }
}

impl<'de> Deserialize<'de> for LostOnPromotion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{self, Visitor};
        struct V;
        impl Visitor<'_> for V {
            type Value = LostOnPromotion;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number of writes (0, say) or lastSegment")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LostOnPromotion, E> {
                Ok(LostOnPromotion::Writes(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<LostOnPromotion, E> {
                u64::try_from(v)
                    .map(LostOnPromotion::Writes)
                    .map_err(|_| E::custom(format!("must not be negative, got {v}")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LostOnPromotion, E> {
                match v {
                    "lastSegment" => Ok(LostOnPromotion::LastSegment),
                    _ => Err(E::custom(format!(
                        "{v:?} is neither a number of writes (0, say, unquoted) nor lastSegment"
                    ))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

fn one() -> i64 {
    1
}

fn default_catch_up() -> Dur {
    Dur(Duration::from_secs(60))
}

impl Standby {
    /// The standby's cluster name for the primary `primary`.
    pub fn name(primary: &str) -> String {
        format!("{primary}-standby")
    }

    /// Whether a second monkey hits the standby, given the scenario's
    /// chaos section.
    pub fn chaos_on(&self, has_chaos: bool) -> bool {
        self.chaos.unwrap_or(has_chaos) && has_chaos
    }

    /// Number of members.
    pub fn members(&self) -> usize {
        usize::try_from(self.size).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests;
