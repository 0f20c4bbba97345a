//! What a Kubernetes backup Job does, and how it reports: the protocol
//! between the operator and `etcd-operator backup-job`, which runs in a
//! short-lived Job from the operator's own image with the backup claim
//! mounted at [`STATE_MOUNT`]. There the claim is the state folder of the
//! local platform's folder store, so the same code saves, verifies,
//! retains and sets aside snapshots on both platforms (the runner is
//! `platform::local::backup_job`; the Kubernetes store that starts the Jobs
//! and reads their reports is `platform::kube::backups`).
//!
//! The Job prints one [`Report`] as JSON on a line of its own, after
//! [`REPORT_MARK`], as its last line of output (logs go to stderr); the
//! operator reads it from the pod's log.

use serde::{Deserialize, Serialize};

use super::{BackupMeta, Retained};

mod place;
pub use place::{JobTls, Place, StoreArgs, TLS_MOUNT};

/// Where the backup claim is mounted in a backup Job: the state folder of
/// the folder store (backups in `backups/CLUSTER/`, the copy set aside for
/// a restore in `clusters/CLUSTER/restore.db`).
pub const STATE_MOUNT: &str = "/state";
/// What precedes the report on its line.
pub const REPORT_MARK: &str = "etcd-operator-backup-job-report: ";

/// One piece of work of a backup Job, on one cluster's backups.
#[derive(Clone, Debug, PartialEq, Eq, clap::Subcommand)]
pub enum Op {
    /// Take a backup from a member and verify it.
    Save {
        /// The member's name.
        #[arg(long)]
        member: String,
        /// Its client URL.
        #[arg(long)]
        url: String,
        /// How to reach an `https://` URL.
        #[command(flatten)]
        tls: JobTls,
    },
    /// List the backups.
    List,
    /// Keep the newest KEEP backups that check out, delete older ones.
    Retain {
        /// How many good backups to keep.
        #[arg(long)]
        keep: usize,
    },
    /// Find the newest backup that checks out.
    NewestGood,
    /// Check a backup (by name, looked up in every cluster's folder).
    Check {
        /// The backup's name.
        #[arg(long)]
        backup: String,
    },
    /// Delete a backup.
    Delete {
        /// The backup's name.
        #[arg(long)]
        backup: String,
    },
    /// Check a backup and set a copy aside for the cluster's bootstrap.
    Open {
        /// The backup's name.
        #[arg(long)]
        backup: String,
    },
    /// Set a backup aside as Open does, with the delta segments of its
    /// chain (continuous backups) replayed into the copy.
    OpenChain {
        /// The backup's name.
        #[arg(long)]
        backup: String,
    },
    /// Drop the copy set aside.
    Close,
    /// Restore a backup into a scratch member in the Job's pod and compare
    /// its KV hash with a live member's at the backup's revision (a
    /// restore check, [`super::proof`]); the result goes into the backup's
    /// meta and the report.
    Prove {
        /// The backup's name.
        #[arg(long)]
        backup: String,
        /// The live member's name.
        #[arg(long)]
        member: String,
        /// Its client URL.
        #[arg(long)]
        url: String,
        /// How to reach an `https://` URL.
        #[command(flatten)]
        tls: JobTls,
    },
}

impl Op {
    /// The command line of the Job's container after `backup-job
    /// --cluster NAME`.
    pub fn args(&self) -> Vec<String> {
        let mut out = vec![self.word().to_string()];
        let pair = |flag: &str, value: &str| [flag.to_string(), value.to_string()];
        match self {
            Op::Save { member, url, tls } => {
                out.extend(pair("--member", member));
                out.extend(pair("--url", url));
                out.extend(tls.args());
            }
            Op::Retain { keep } => out.extend(pair("--keep", &keep.to_string())),
            Op::Check { backup }
            | Op::Delete { backup }
            | Op::Open { backup }
            | Op::OpenChain { backup } => {
                out.extend(pair("--backup", backup));
            }
            Op::Prove {
                backup,
                member,
                url,
                tls,
            } => {
                out.extend(pair("--backup", backup));
                out.extend(pair("--member", member));
                out.extend(pair("--url", url));
                out.extend(tls.args());
            }
            Op::List | Op::NewestGood | Op::Close => {}
        }
        out
    }

    /// How it reaches a member over TLS, when it does.
    pub fn tls(&self) -> Option<&JobTls> {
        match self {
            Op::Save { tls, .. } | Op::Prove { tls, .. } => tls.tls_dir.as_ref().map(|_| tls),
            _ => None,
        }
    }

    /// A short word for it (the subcommand, and part of the Job's name).
    pub fn word(&self) -> &'static str {
        match self {
            Op::Save { .. } => "save",
            Op::List => "list",
            Op::Retain { .. } => "retain",
            Op::NewestGood => "newest-good",
            Op::Check { .. } => "check",
            Op::Delete { .. } => "delete",
            Op::Open { .. } => "open",
            Op::OpenChain { .. } => "open-chain",
            Op::Close => "close",
            Op::Prove { .. } => "prove",
        }
    }
}

/// What a backup Job did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Why the work could not be done (`None`: it was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The cluster's backups afterwards, newest first.
    #[serde(default)]
    pub backups: Vec<BackupMeta>,
    /// The backup taken (save).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved: Option<BackupMeta>,
    /// What retention did (retain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retained: Option<Retained>,
    /// The newest backup that checks out (newest-good).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest: Option<BackupMeta>,
    /// Damaged backups newer than it, and why (newest-good).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// The copy set aside, relative to the claim's root (open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// What the restore check found (prove): the restored backup's and
    /// the live member's KV hashes at the backup's revision, and the
    /// verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_check: Option<super::proof::RestoreCheck>,
    /// What replaying the chain into the copy did (open-chain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replayed: Option<super::replay::Replayed>,
    /// Why segments after the replayed ones were not used (open-chain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_problem: Option<String>,
}

impl Report {
    /// The report's line.
    pub fn line(&self) -> String {
        // A struct of strings, numbers and lists always serializes.
        format!(
            "{REPORT_MARK}{}",
            serde_json::to_string(self).unwrap_or_default()
        )
    }

    /// The last report in a log, if any; a report line that does not
    /// parse is an error naming what was found.
    pub fn find(log: &str) -> Result<Option<Report>, String> {
        let Some(line) = log
            .lines()
            .rev()
            .find_map(|l| l.trim().strip_prefix(REPORT_MARK))
        else {
            return Ok(None);
        };
        serde_json::from_str(line).map(Some).map_err(|e| {
            format!(
                "an unreadable report ({e}): {}",
                crate::names::quote(line, 200)
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_report_is_found_after_other_output() {
        let report = Report {
            error: Some("no ready member".into()),
            skipped: vec!["b2: damaged".into()],
            ..Report::default()
        };
        let log = format!(
            "2026-01-01 INFO starting\n{}\nwarning: late line\n",
            report.line()
        );
        assert_eq!(Report::find(&log), Ok(Some(report)));
        assert_eq!(Report::find("nothing here"), Ok(None));
        let bad = format!("{REPORT_MARK}{{not json");
        assert!(Report::find(&bad).is_err());
    }

    #[test]
    fn each_op_has_its_arguments() {
        let save = Op::Save {
            member: "demo-1".into(),
            url: "http://demo-1.demo.ns.svc:2379".into(),
            tls: JobTls::default(),
        };
        assert_eq!(
            save.args(),
            [
                "save",
                "--member",
                "demo-1",
                "--url",
                "http://demo-1.demo.ns.svc:2379"
            ]
        );
        assert_eq!(Op::Retain { keep: 3 }.args(), ["retain", "--keep", "3"]);
        assert_eq!(Op::Close.args(), ["close"]);
        let prove = Op::Prove {
            backup: "b1".into(),
            member: "demo-0".into(),
            url: "https://10.0.0.7:2379".into(),
            tls: JobTls {
                tls_dir: Some(TLS_MOUNT.into()),
                server_name: Some("demo-0.demo.ns.svc".into()),
            },
        };
        assert_eq!(
            prove.args(),
            [
                "prove",
                "--backup",
                "b1",
                "--member",
                "demo-0",
                "--url",
                "https://10.0.0.7:2379",
                "--tls-dir",
                "/tls",
                "--server-name",
                "demo-0.demo.ns.svc"
            ]
        );
        assert!(prove.tls().is_some() && save.tls().is_none());
    }

    proptest! {
        #[test]
        fn any_log_is_read_without_panicking(log in "\\PC{0,400}") {
            let _ = Report::find(&log);
            let with_mark = format!("{REPORT_MARK}{log}");
            let _ = Report::find(&with_mark);
        }
    }
}
