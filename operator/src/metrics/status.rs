//! Metrics read off a cluster's published status, so that what an alert
//! fires on is what `status` says (the same words on both platforms):
//! whether a quorum serves, the Degraded condition with its reason, the
//! backup interval the spec asks for (to judge the backup's age), the last
//! restore check's result and when the TLS certificates end.
//!
//! | metric | more labels | what |
//! |---|---|---|
//! | `etcd_operator_cluster_available` | | 1 while a quorum serves (condition Available), else 0 |
//! | `etcd_operator_cluster_degraded` | reason | 1 while condition Degraded is true, with its reason |
//! | `etcd_operator_backup_interval_seconds` | | `spec.backup.interval`, while backups are on |
//! | `etcd_operator_last_restore_check` | result | 1 for the last restore check's result (`verified`, `mismatch`, `unverifiable`, `failed`) |
//! | `etcd_operator_tls_not_after_timestamp_seconds` | certificate | when the cluster's CA (`ca`) and the earliest member certificate (`member`) end |
//! | `etcd_operator_backup_chain_behind` | | with continuous backups: 1 while condition `BackupChainBehind` is true (the store lags the cluster, or the chain ended), else 0 |
//! | `etcd_operator_backup_chain_synced_timestamp_seconds` | | with continuous backups: when the store last held every change of the cluster (`status.backup.continuous.syncedTime`) |
//! | `etcd_operator_standby_behind` | | a standby: 1 while condition `StandbyBehind` is true (stopped, diverged, or lagging its source), else 0 |
//! | `etcd_operator_standby_lag_revisions` | | a standby: source revisions known and not applied yet |
//! | `etcd_operator_standby_lag_seconds` | | a standby: how long ago the source wrote the first revision not applied yet (0 when none) |

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, UNIX_EPOCH};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::{ClusterLabels, ClusterMetrics, Seconds};
use crate::crd::EtcdClusterStatus;

/// A cluster's Degraded series, by reason.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReasonLabels {
    namespace: String,
    cluster: String,
    reason: String,
}

/// A cluster's restore check series, by result.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CheckLabels {
    namespace: String,
    cluster: String,
    result: String,
}

/// A cluster's certificate series, by certificate.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CertLabels {
    namespace: String,
    cluster: String,
    certificate: &'static str,
}

/// The families filled from the status, and the label values shown last
/// (a Family cannot be listed, so a replaced reason is removed by name).
#[derive(Debug, Default)]
pub(super) struct StatusFamilies {
    pub(super) available: Family<ClusterLabels, Gauge>,
    pub(super) degraded: Family<ReasonLabels, Gauge>,
    pub(super) backup_interval: Family<ClusterLabels, Seconds>,
    pub(super) restore_check: Family<CheckLabels, Gauge>,
    pub(super) tls_not_after: Family<CertLabels, Seconds>,
    pub(super) chain_behind: Family<ClusterLabels, Gauge>,
    pub(super) chain_synced: Family<ClusterLabels, Seconds>,
    pub(super) standby_behind: Family<ClusterLabels, Gauge>,
    pub(super) standby_lag_revisions: Family<ClusterLabels, Gauge>,
    pub(super) standby_lag: Family<ClusterLabels, Seconds>,
    shown: Mutex<HashMap<ClusterLabels, Shown>>,
}

/// The reason and result a cluster's series carry now.
#[derive(Debug, Default)]
struct Shown {
    reason: Option<String>,
    result: Option<String>,
}

const CERTIFICATES: [&str; 2] = ["ca", "member"];

fn reason(l: &ClusterLabels, reason: String) -> ReasonLabels {
    ReasonLabels {
        namespace: l.namespace.clone(),
        cluster: l.cluster.clone(),
        reason,
    }
}

fn result(l: &ClusterLabels, result: String) -> CheckLabels {
    CheckLabels {
        namespace: l.namespace.clone(),
        cluster: l.cluster.clone(),
        result,
    }
}

fn cert(l: &ClusterLabels, certificate: &'static str) -> CertLabels {
    CertLabels {
        namespace: l.namespace.clone(),
        cluster: l.cluster.clone(),
        certificate,
    }
}

impl StatusFamilies {
    /// Drops every series of `l`'s cluster.
    pub(super) fn forget(&self, l: &ClusterLabels) {
        self.available.remove(l);
        self.backup_interval.remove(l);
        self.chain_behind.remove(l);
        self.chain_synced.remove(l);
        self.standby_behind.remove(l);
        self.standby_lag_revisions.remove(l);
        self.standby_lag.remove(l);
        let shown = self
            .shown
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(l);
        let shown = shown.unwrap_or_default();
        if let Some(r) = shown.reason {
            self.degraded.remove(&reason(l, r));
        }
        if let Some(r) = shown.result {
            self.restore_check.remove(&result(l, r));
        }
        for c in CERTIFICATES {
            self.tls_not_after.remove(&cert(l, c));
        }
    }
}

impl ClusterMetrics {
    /// Fills the status metrics from the status just built, and the
    /// backup interval the spec asks for (`None`: backups off).
    pub fn status(&self, status: &EtcdClusterStatus, backup_interval: Option<Duration>) {
        let f = &self.metrics.status;
        let l = &self.labels;
        let condition = |t: &str| status.conditions.iter().find(|c| c.type_ == t);
        let available = condition("Available").is_some_and(|c| c.status == "True");
        f.available.get_or_create(l).set(i64::from(available));
        match backup_interval {
            Some(i) => {
                f.backup_interval.get_or_create(l).set(i.as_secs_f64());
            }
            None => {
                f.backup_interval.remove(l);
            }
        }

        let mut shown = f.shown.lock().unwrap_or_else(|e| e.into_inner());
        let shown = shown.entry(l.clone()).or_default();
        let degraded = condition("Degraded")
            .filter(|c| c.status == "True")
            .map(|c| c.reason.clone());
        if shown.reason != degraded {
            if let Some(old) = shown.reason.take() {
                f.degraded.remove(&reason(l, old));
            }
            if let Some(now) = &degraded {
                f.degraded.get_or_create(&reason(l, now.clone())).set(1);
            }
            shown.reason = degraded;
        }
        let check = status
            .backup
            .as_ref()
            .and_then(|b| b.last_restore_check.as_ref());
        let check = check.map(|c| c.result.clone());
        if shown.result != check {
            if let Some(old) = shown.result.take() {
                f.restore_check.remove(&result(l, old));
            }
            if let Some(now) = &check {
                f.restore_check
                    .get_or_create(&result(l, now.clone()))
                    .set(1);
            }
            shown.result = check;
        }

        match condition("BackupChainBehind") {
            Some(c) => {
                f.chain_behind
                    .get_or_create(l)
                    .set(i64::from(c.status == "True"));
            }
            None => {
                f.chain_behind.remove(l);
            }
        }
        let synced = status
            .backup
            .as_ref()
            .and_then(|b| b.continuous.as_ref()?.synced_time.as_deref())
            .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok());
        match synced {
            Some(at) => {
                f.chain_synced.get_or_create(l).set(at.as_secs_f64());
            }
            None => {
                f.chain_synced.remove(l);
            }
        }

        match (condition("StandbyBehind"), status.standby.as_ref()) {
            (Some(c), Some(s)) => {
                f.standby_behind
                    .get_or_create(l)
                    .set(i64::from(c.status == "True"));
                f.standby_lag_revisions
                    .get_or_create(l)
                    .set(s.lag_revisions);
                f.standby_lag.get_or_create(l).set(s.lag_ms as f64 / 1000.0);
            }
            _ => {
                f.standby_behind.remove(l);
                f.standby_lag_revisions.remove(l);
                f.standby_lag.remove(l);
            }
        }

        let tls = status.tls.as_ref();
        for (name, at) in [
            ("ca", tls.and_then(|t| t.ca_not_after.as_deref())),
            (
                "member",
                tls.and_then(|t| t.certificates_not_after.as_deref()),
            ),
        ] {
            let secs = at
                .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok());
            match secs {
                Some(secs) => {
                    f.tls_not_after
                        .get_or_create(&cert(l, name))
                        .set(secs.as_secs_f64());
                }
                None => {
                    f.tls_not_after.remove(&cert(l, name));
                }
            }
        }
    }
}

/// A status with a series for every family above: Degraded, a restore
/// check, both certificate ends ([`super::family_names`]).
pub(super) fn everything() -> EtcdClusterStatus {
    let cond = |type_: &str, status: &str, reason: &str| crate::crd::Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: String::new(),
        last_transition_time: None,
    };
    EtcdClusterStatus {
        conditions: vec![
            cond("Available", "True", "QuorumAvailable"),
            cond("Degraded", "True", "NoSpaceAlarm"),
            cond("BackupChainBehind", "True", "StoreBehind"),
            cond("StandbyBehind", "True", "Lagging"),
        ],
        standby: Some(crate::crd::StandbyStatus {
            lag_revisions: 7,
            lag_ms: 90_000,
            ..Default::default()
        }),
        backup: Some(crate::crd::BackupStatus {
            last_restore_check: Some(crate::crd::RestoreCheckStatus {
                result: "mismatch".into(),
                ..Default::default()
            }),
            continuous: Some(crate::crd::ChainStatus {
                synced_time: Some("2030-01-01T00:00:00.000Z".into()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        tls: Some(crate::crd::TlsStatus {
            ca_not_after: Some("2030-01-01T00:00:00Z".into()),
            certificates_not_after: Some("2029-01-01T00:00:00Z".into()),
            ..Default::default()
        }),
        ..EtcdClusterStatus::default()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::metrics::Metrics;

    use super::*;

    #[test]
    fn the_status_is_exported_and_a_changed_reason_replaces_the_old_series() {
        let metrics = Arc::new(Metrics::new());
        let m = metrics.cluster("", "demo");
        let mut status = everything();
        m.status(&status, Some(Duration::from_secs(60)));
        let text = metrics.encode();
        for line in [
            r#"etcd_operator_cluster_available{namespace="",cluster="demo"} 1"#,
            r#"etcd_operator_cluster_degraded{namespace="",cluster="demo",reason="NoSpaceAlarm"} 1"#,
            r#"etcd_operator_backup_interval_seconds{namespace="",cluster="demo"} 60"#,
            r#"etcd_operator_last_restore_check{namespace="",cluster="demo",result="mismatch"} 1"#,
            r#"etcd_operator_tls_not_after_timestamp_seconds{namespace="",cluster="demo",certificate="ca"} 1893456000"#,
            r#"etcd_operator_backup_chain_behind{namespace="",cluster="demo"} 1"#,
            r#"etcd_operator_backup_chain_synced_timestamp_seconds{namespace="",cluster="demo"} 1893456000"#,
            r#"etcd_operator_standby_behind{namespace="",cluster="demo"} 1"#,
            r#"etcd_operator_standby_lag_revisions{namespace="",cluster="demo"} 7"#,
            r#"etcd_operator_standby_lag_seconds{namespace="",cluster="demo"} 90.0"#,
        ] {
            assert!(text.contains(line), "{line} missing in\n{text}");
        }
        status.conditions[1].status = "False".into();
        m.status(&status, None);
        let text = metrics.encode();
        assert!(!text.contains("NoSpaceAlarm"), "{text}");
        assert!(
            !text.contains("etcd_operator_backup_interval_seconds{"),
            "{text}"
        );
        m.forget();
        assert!(!metrics.encode().contains("cluster=\"demo\""));
    }
}

#[cfg(test)]
mod family_tests {
    #[test]
    fn family_names_lists_every_registered_family() {
        let names = crate::metrics::family_names();
        assert_eq!(names.len(), 22, "{names:?}");
        assert!(
            names
                .iter()
                .any(|n| n == "etcd_operator_tls_not_after_timestamp_seconds")
        );
    }
}
