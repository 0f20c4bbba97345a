//! Durations in scenarios: strings such as "90s", "1h", "1m30s", "200ms".

use std::fmt;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration written as text in a scenario.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub Duration);

impl Dur {
    /// The duration.
    pub fn get(self) -> Duration {
        self.0
    }

    /// `d` cut to whole milliseconds, as runs print and pass durations.
    pub fn whole_millis(d: Duration) -> Dur {
        Dur(Duration::from_millis(
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
        ))
    }

    /// As milliseconds, the form passed to other programs' flags ("1500ms").
    pub fn flag(self) -> String {
        format!("{}ms", self.0.as_millis())
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl std::str::FromStr for Dur {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if let Some(rest) = t.strip_prefix('-') {
            return Err(format!("must not be negative, got -{rest}"));
        }
        humantime::parse_duration(t).map(Dur).map_err(|e| {
            format!("{s:?} is not a duration such as \"90s\", \"1m30s\", \"1h\" or \"200ms\" ({e})")
        })
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"90s\", \"1m30s\", \"1h\" or \"200ms\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Dur, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "{v} has no unit: write \"{v}s\" or \"{v}ms\""
                )))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "{v} has no unit: write a duration such as \"10s\""
                )))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "{v} has no unit: write a duration such as \"1500ms\""
                )))
            }
        }
        d.deserialize_any(V)
    }
}
