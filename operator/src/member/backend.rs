//! etcd's backend settings from the spec: the quota (`spec.quotaBackendBytes`)
//! and auto-compaction (`spec.compaction`), checked, recorded in a member's
//! configuration ([`Backend`]) and turned into etcd flags; and the checked
//! defragmentation policy (`spec.defrag`), which the operator carries out
//! itself.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::crd::{CompactionMode, EtcdClusterSpec};
use crate::units::{FieldError, parse_duration, parse_interval};

/// etcd's own quota when `--quota-backend-bytes` is not given (2 GiB).
pub const DEFAULT_QUOTA: i64 = 2 << 30;
/// The smallest quota accepted: a fresh member's database alone takes
/// about 20 KiB, and etcd needs room to apply anything at all.
pub const MIN_QUOTA: i64 = 1 << 20;
/// The largest quota accepted: etcd's own recommended maximum (8 GiB);
/// above it etcd warns and may stall on defragmentation and snapshots.
pub const MAX_QUOTA: i64 = 8 << 30;
/// The shortest defragmentation interval.
pub const MIN_DEFRAG_INTERVAL: Duration = Duration::from_secs(60);
/// Least and greatest `defrag.fragmentationPercent`.
pub const FRAGMENTATION_PERCENT: std::ops::RangeInclusive<i64> = 1..=99;
/// Least revisions `compaction.retention` keeps in mode Revision.
pub const MIN_REVISION_RETENTION: u64 = 1;
/// Shortest `compaction.retention` in mode Periodic.
pub const MIN_PERIODIC_RETENTION: Duration = Duration::from_secs(1);
/// Most revisions `compaction.retention` keeps in mode Revision (a
/// billion: more history than any etcd database holds within its quota).
pub const MAX_REVISION_RETENTION: u64 = 1_000_000_000;

/// What a member's backend runs with. Absent from the recorded JSON when
/// nothing is set, so records and annotations written before these fields
/// existed read and re-serialize the same.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Backend {
    /// `--quota-backend-bytes`, when set (etcd's default otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_backend_bytes: Option<i64>,
    /// `--auto-compaction-mode` and `--auto-compaction-retention`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<Compaction>,
    /// A standby (`spec.standby`): each source revision is applied as one
    /// transaction, however large ([`crate::backup::replay::member_flags`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub standby: bool,
}

/// Auto-compaction as etcd takes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Compaction {
    /// `periodic` or `revision`.
    pub mode: CompactionMode,
    /// A Go duration (periodic) or a number of revisions (revision),
    /// surrounding spaces trimmed.
    pub retention: String,
}

impl Backend {
    /// Nothing set: etcd's defaults.
    pub fn is_default(&self) -> bool {
        *self == Backend::default()
    }

    /// The quota etcd enforces.
    pub fn quota(&self) -> i64 {
        self.quota_backend_bytes.unwrap_or(DEFAULT_QUOTA)
    }

    /// The etcd flags for these settings (none for what is not set).
    pub fn flags(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(q) = self.quota_backend_bytes {
            out.extend(["--quota-backend-bytes".to_string(), q.to_string()]);
        }
        if let Some(c) = &self.compaction {
            let mode = match c.mode {
                CompactionMode::Periodic => "periodic",
                CompactionMode::Revision => "revision",
            };
            out.extend([
                "--auto-compaction-mode".to_string(),
                mode.to_string(),
                "--auto-compaction-retention".to_string(),
                c.retention.clone(),
            ]);
        }
        if self.standby {
            out.extend(crate::backup::replay::member_flags());
        }
        out
    }
}

/// A checked `spec.defrag`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefragPolicy {
    /// Defragment every member once per interval.
    pub interval: Option<Duration>,
    /// Defragment a member whose reclaimable share of its database file
    /// reaches this percentage.
    pub fragmentation: Option<u8>,
}

/// Checks `spec.quotaBackendBytes`, `spec.compaction` and `spec.defrag`,
/// pushing one error per bad field into `errors`.
pub fn check(
    spec: &EtcdClusterSpec,
    errors: &mut Vec<FieldError>,
) -> (Backend, Option<DefragPolicy>) {
    let mut err = |field: &str, message: String| {
        errors.push(FieldError {
            field: field.to_string(),
            message,
        })
    };
    let mut backend = Backend {
        standby: spec.standby.is_some(),
        ..Backend::default()
    };
    if let Some(q) = spec.quota_backend_bytes {
        if (MIN_QUOTA..=MAX_QUOTA).contains(&q) {
            backend.quota_backend_bytes = Some(q);
        } else {
            err(
                "spec.quotaBackendBytes",
                format!(
                    "must be between {MIN_QUOTA} (1 MiB) and {MAX_QUOTA} (8 GiB, etcd's \
                     recommended maximum), got {q}; leave it out for etcd's default of 2 GiB"
                ),
            );
        }
    }
    if let Some(c) = &spec.compaction {
        let retention = crate::units::trim_spaces(&c.retention);
        let checked = match c.mode {
            CompactionMode::Periodic => match parse_duration(retention) {
                Ok(d) if d >= MIN_PERIODIC_RETENTION => Ok(retention.to_string()),
                Ok(_) => Err(format!(
                    "with mode Periodic, a duration of at least 1s such as \"1h\" or \"30m\", \
                     got {retention:?}"
                )),
                Err(m) => Err(format!("with mode Periodic, {m}")),
            },
            CompactionMode::Revision => match retention.parse::<u64>() {
                Ok(n) if (MIN_REVISION_RETENTION..=MAX_REVISION_RETENTION).contains(&n) => {
                    Ok(n.to_string())
                }
                _ => Err(format!(
                    "with mode Revision, the number of revisions to keep: a whole number \
                     from 1 to {MAX_REVISION_RETENTION}, such as \"10000\", got {retention:?}"
                )),
            },
        };
        match checked {
            Ok(retention) => {
                backend.compaction = Some(Compaction {
                    mode: c.mode,
                    retention,
                })
            }
            Err(m) => err("spec.compaction.retention", m),
        }
    }
    let defrag = spec.defrag.as_ref().and_then(|d| {
        let interval =
            d.interval
                .as_deref()
                .and_then(|i| match parse_interval(i, MIN_DEFRAG_INTERVAL) {
                    Ok(v) => Some(Some(v)),
                    Err(m) => {
                        err("spec.defrag.interval", m);
                        None
                    }
                });
        let fragmentation = d.fragmentation_percent.and_then(|p| match u8::try_from(p) {
            Ok(n) if FRAGMENTATION_PERCENT.contains(&p) => Some(Some(n)),
            _ => {
                err(
                    "spec.defrag.fragmentationPercent",
                    format!(
                        "must be between {} and {}, got {p}",
                        FRAGMENTATION_PERCENT.start(),
                        FRAGMENTATION_PERCENT.end()
                    ),
                );
                None
            }
        });
        if d.interval.is_none() && d.fragmentation_percent.is_none() {
            err(
                "spec.defrag",
                "set interval (such as \"24h\"), fragmentationPercent (such as 50), or both; \
                 leave spec.defrag out for no scheduled defragmentation"
                    .into(),
            );
            return None;
        }
        Some(DefragPolicy {
            interval: match d.interval {
                Some(_) => interval?,
                None => None,
            },
            fragmentation: match d.fragmentation_percent {
                Some(_) => fragmentation?,
                None => None,
            },
        })
    });
    (backend, defrag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{CompactionSpec, DefragSpec};

    fn spec() -> EtcdClusterSpec {
        serde_json::from_value(serde_json::json!({"size": 3, "version": "3.4.23"}))
            .expect("minimal spec")
    }

    fn fields(spec: &EtcdClusterSpec) -> Vec<String> {
        let mut errors = Vec::new();
        check(spec, &mut errors);
        errors.into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn nothing_set_is_etcds_defaults_and_no_flag() {
        let mut errors = Vec::new();
        let (b, d) = check(&spec(), &mut errors);
        assert!(errors.is_empty() && b.is_default() && d.is_none());
        assert!(b.flags().is_empty());
        assert_eq!(b.quota(), DEFAULT_QUOTA);
        assert_eq!(serde_json::to_string(&b).expect("json"), "{}");
    }

    #[test]
    fn quota_and_compaction_become_flags() {
        let mut s = spec();
        s.quota_backend_bytes = Some(64 << 20);
        s.compaction = Some(CompactionSpec {
            mode: CompactionMode::Periodic,
            retention: " 1h30m ".into(),
        });
        let mut errors = Vec::new();
        let (b, _) = check(&s, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            b.flags().join(" "),
            "--quota-backend-bytes 67108864 --auto-compaction-mode periodic \
             --auto-compaction-retention 1h30m"
        );
        s.compaction = Some(CompactionSpec {
            mode: CompactionMode::Revision,
            retention: "1000".into(),
        });
        let (b, _) = check(&s, &mut errors);
        assert!(
            b.flags()
                .join(" ")
                .ends_with("revision --auto-compaction-retention 1000")
        );
    }

    #[test]
    fn bad_values_name_their_field() {
        let mut s = spec();
        s.quota_backend_bytes = Some(1000);
        s.compaction = Some(CompactionSpec {
            mode: CompactionMode::Revision,
            retention: "1h".into(),
        });
        s.defrag = Some(DefragSpec {
            interval: Some("10s".into()),
            fragmentation_percent: Some(100),
        });
        assert_eq!(
            fields(&s),
            [
                "spec.quotaBackendBytes",
                "spec.compaction.retention",
                "spec.defrag.interval",
                "spec.defrag.fragmentationPercent"
            ]
        );
        s.quota_backend_bytes = Some(MAX_QUOTA + 1);
        s.compaction = Some(CompactionSpec {
            mode: CompactionMode::Periodic,
            retention: "1000".into(),
        });
        s.defrag = Some(DefragSpec {
            interval: None,
            fragmentation_percent: None,
        });
        assert_eq!(
            fields(&s),
            [
                "spec.quotaBackendBytes",
                "spec.compaction.retention",
                "spec.defrag"
            ]
        );
    }

    /// A defragmentation interval past a year and a day, or more
    /// revisions than etcd could hold, are refused naming the range.
    #[test]
    fn intervals_and_revision_counts_are_bounded() {
        let mut s = spec();
        s.compaction = Some(CompactionSpec {
            mode: CompactionMode::Revision,
            retention: (MAX_REVISION_RETENTION + 1).to_string(),
        });
        s.defrag = Some(DefragSpec {
            interval: Some("100000000h".into()),
            fragmentation_percent: None,
        });
        let mut errors = Vec::new();
        check(&s, &mut errors);
        let messages: Vec<String> = errors.iter().map(|e| e.message.clone()).collect();
        assert_eq!(
            fields(&s),
            ["spec.compaction.retention", "spec.defrag.interval"]
        );
        assert!(messages[0].contains("from 1 to 1000000000"), "{messages:?}");
        assert!(messages[1].contains("at most 8784h"), "{messages:?}");
        s.compaction = Some(CompactionSpec {
            mode: CompactionMode::Revision,
            retention: MAX_REVISION_RETENTION.to_string(),
        });
        s.defrag = Some(DefragSpec {
            interval: Some("8784h".into()),
            fragmentation_percent: None,
        });
        assert!(fields(&s).is_empty());
    }

    #[test]
    fn defrag_policy() {
        let mut s = spec();
        s.defrag = Some(DefragSpec {
            interval: Some("24h".into()),
            fragmentation_percent: Some(50),
        });
        let mut errors = Vec::new();
        let (_, d) = check(&s, &mut errors);
        assert_eq!(
            d,
            Some(DefragPolicy {
                interval: Some(Duration::from_secs(86400)),
                fragmentation: Some(50)
            })
        );
    }
}
