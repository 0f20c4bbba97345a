//! etcd versions: parsing `MAJOR.MINOR.PATCH` and the upgrade path rules.

use std::fmt;
use std::str::FromStr;

/// An etcd release version such as 3.4.23.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// Major number (3 for every supported release).
    pub major: u32,
    /// Minor number.
    pub minor: u32,
    /// Patch number.
    pub patch: u32,
}

/// Why a version string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Not of the form MAJOR.MINOR.PATCH.
    #[error(
        "{0:?} is not a version of the form MAJOR.MINOR.PATCH, such as \"3.5.1\" (one leading \
         'v' is allowed, as in \"v3.5.1\"; no spaces)"
    )]
    Malformed(String),
}

impl Version {
    /// A version from its three numbers.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        Version {
            major,
            minor,
            patch,
        }
    }

    /// etcd 3.5.0 to 3.5.2 can skip an applied entry when killed under
    /// load and restarted (etcd issue 13766, fixed in 3.5.3).
    pub fn skips_entries_after_crash(self) -> bool {
        self >= Version::new(3, 5, 0) && self < Version::new(3, 5, 3)
    }

    /// Raft's pre-vote is off unless `--pre-vote` is given: etcd 3.4 (and
    /// older); 3.5 turned it on by default.
    pub fn pre_vote_off_by_default(self) -> bool {
        self < Version::new(3, 5, 0)
    }

    /// Whether a running member may move from `self` to `to` in one rolling
    /// step: same major, no downgrade of the minor, at most one minor ahead.
    pub fn can_upgrade_to(self, to: Version) -> bool {
        self.major == to.major && to.minor >= self.minor && to.minor <= self.minor + 1
    }
}

/// What [`Version::from_str`] reads, as a regular expression for the CRD's
/// schema (`pattern`); numbers too large for a `u32` pass it and are
/// refused by the operator.
pub const PATTERN: &str = r"^v?[0-9]+\.[0-9]+\.[0-9]+$";

impl FromStr for Version {
    type Err = Error;

    /// `MAJOR.MINOR.PATCH` in decimal digits, with at most one leading
    /// `v` (etcd's release tags and images are named `v3.5.1`), which is
    /// dropped: `"v3.5.1"` is the same version as `"3.5.1"`. Anything else,
    /// spaces included, is refused, on both platforms alike.
    fn from_str(s: &str) -> Result<Self, Error> {
        let trimmed = s.strip_prefix('v').unwrap_or(s);
        let mut parts = trimmed.split('.');
        let mut next = || -> Result<u32, Error> {
            parts
                .next()
                .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| Error::Malformed(s.to_string()))
        };
        let v = Version::new(next()?, next()?, next()?);
        if parts.next().is_some() {
            return Err(Error::Malformed(s.to_string()));
        }
        Ok(v)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl serde::Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Version {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let v: Version = "3.4.23".parse().expect("valid");
        assert_eq!(v, Version::new(3, 4, 23));
        assert_eq!(v.to_string(), "3.4.23");
        assert_eq!("v3.5.1".parse::<Version>(), Ok(Version::new(3, 5, 1)));
    }

    #[test]
    fn rejects_malformed() {
        for s in [
            "", "3", "3.4", "3.4.x", "3.4.23.1", "latest", "3..1", "-3.4.1", "3.4.23 ", " 3.4.23",
            "vv3.4.23", "V3.4.23", "3.4.+1",
        ] {
            assert!(s.parse::<Version>().is_err(), "{s} should be refused");
        }
    }

    #[test]
    fn upgrade_path_is_one_minor_forward() {
        let v34 = Version::new(3, 4, 23);
        assert!(v34.can_upgrade_to(Version::new(3, 5, 1)));
        assert!(v34.can_upgrade_to(Version::new(3, 4, 30)));
        assert!(!v34.can_upgrade_to(Version::new(3, 6, 0)));
        assert!(!Version::new(3, 5, 1).can_upgrade_to(v34));
    }
}
