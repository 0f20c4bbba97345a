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

use super::object::ObjectLocation;
use super::point::PointInTime;
use super::{BackupMeta, Location, Retained};

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

/// Where a Job or the follower mounts the cluster's client certificate
/// Secret (`CLUSTER-client-tls`: `ca.crt`, `tls.crt`, `tls.key`).
pub const TLS_MOUNT: &str = "/tls";

/// How a Job reaches a member whose clients use TLS: a folder with the
/// CAs and a client certificate (the mounted Secret) and the name to check
/// the member's certificate against when the URL names an IP.
#[derive(Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct JobTls {
    /// A folder with `ca.crt`, `tls.crt` and `tls.key`.
    #[arg(long)]
    pub tls_dir: Option<String>,
    /// The name the member's certificate is checked against.
    #[arg(long, requires = "tls_dir")]
    pub server_name: Option<String>,
}

impl JobTls {
    /// The Secret's mount, for `tls` (none: plain).
    pub fn of(tls: Option<&crate::tls::ClientTls>) -> Self {
        JobTls {
            tls_dir: tls.map(|_| TLS_MOUNT.to_string()),
            server_name: tls.and_then(|t| t.server_name.clone()),
        }
    }

    /// The command line.
    pub fn args(&self) -> Vec<String> {
        let flags = [
            ("--tls-dir", &self.tls_dir),
            ("--server-name", &self.server_name),
        ];
        flags
            .into_iter()
            .filter_map(|(flag, v)| v.as_ref().map(|v| [flag.to_string(), v.clone()]))
            .flatten()
            .collect()
    }

    /// The client TLS read from the folder (none without one).
    pub fn load(&self) -> Result<Option<crate::tls::ClientTls>, String> {
        let Some(dir) = &self.tls_dir else {
            return Ok(None);
        };
        let dir = std::path::Path::new(dir);
        let tls = crate::tls::ClientTls::from_files(
            &dir.join("ca.crt"),
            &dir.join("tls.crt"),
            &dir.join("tls.key"),
        )
        .map_err(|e| {
            format!(
                "cannot read the client certificate in {}: {e}",
                dir.display()
            )
        })?;
        Ok(Some(tls.with_server_name(self.server_name.clone())))
    }
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

/// The backups a Job works on, as its command line says: a cluster's (or
/// another's, for a restore), in the claim or in an object store, and
/// where a restore stops. [`Place::of`] writes it for a [`Location`],
/// [`Place::location`] reads it back, checked.
#[derive(Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct Place {
    /// The cluster whose backups are worked on.
    #[arg(long)]
    pub cluster: String,
    /// The cluster's uid: its backups carry it, and only backups carrying
    /// it (or written before backups carried one) are its own.
    #[arg(long)]
    pub uid: Option<String>,
    /// Work on the backups of this cluster instead (a restore of another
    /// cluster's backup into CLUSTER: `spec.restore.cluster`).
    #[arg(long)]
    pub source: Option<String>,
    /// Where the backups are, when not in the claim.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Replay a backup's chain up to exactly this revision
    /// (`spec.restore.toRevision`).
    #[arg(long)]
    pub to_revision: Option<i64>,
    /// Replay it up to the last revision known committed at or before
    /// this time, in ms since the Unix epoch (`spec.restore.toTime`).
    #[arg(long, conflicts_with = "to_revision")]
    pub to_unix_ms: Option<u64>,
}

/// The object store holding the backups of a Job or of the follower; the
/// claim is then their working space only (uploads staged, the copy set
/// aside for a restore, the follower's segments mirrored).
#[derive(Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct StoreArgs {
    /// The store: `s3://BUCKET/PREFIX`, `gs://BUCKET/PREFIX` or
    /// `az://CONTAINER/PREFIX` (`spec.backup.location.objectStore.url`);
    /// credentials come from the environment.
    #[arg(long)]
    pub object_store: Option<String>,
    /// Its endpoint (`objectStore.endpoint`).
    #[arg(long, requires = "object_store")]
    pub endpoint: Option<String>,
    /// Its region (`objectStore.region`).
    #[arg(long, requires = "object_store")]
    pub region: Option<String>,
}

impl StoreArgs {
    /// The arguments for `object`.
    pub fn of(object: Option<&ObjectLocation>) -> Self {
        StoreArgs {
            object_store: object.map(ObjectLocation::url),
            endpoint: object.and_then(|o| o.endpoint.clone()),
            region: object.and_then(|o| o.region.clone()),
        }
    }

    /// The command line.
    pub fn args(&self) -> Vec<String> {
        let flags = [
            ("--object-store", &self.object_store),
            ("--endpoint", &self.endpoint),
            ("--region", &self.region),
        ];
        flags
            .into_iter()
            .filter_map(|(flag, v)| v.as_ref().map(|v| [flag.to_string(), v.clone()]))
            .flatten()
            .collect()
    }

    /// The store, checked as the spec's field is.
    pub fn location(&self) -> Result<Option<ObjectLocation>, String> {
        let Some(url) = &self.object_store else {
            return Ok(None);
        };
        let spec = crate::crd::ObjectStoreSpec {
            url: url.clone(),
            endpoint: self.endpoint.clone(),
            region: self.region.clone(),
            credentials_secret: None,
        };
        ObjectLocation::parse(&spec, "--object-store")
            .map(Some)
            .map_err(|problems| {
                let said: Vec<String> = problems.iter().map(|(f, m)| format!("{f}: {m}")).collect();
                said.join("; ")
            })
    }
}

impl Place {
    /// The place of `location`'s backups.
    pub fn of(location: &Location) -> Self {
        let (to_revision, to_unix_ms) = match location.until {
            Some(PointInTime::Revision(r)) => (Some(r), None),
            Some(PointInTime::Time(ms)) => (None, Some(ms)),
            None => (None, None),
        };
        Place {
            cluster: location.cluster.clone(),
            uid: location.uid.clone(),
            source: location.source.clone(),
            store: StoreArgs::of(location.object.as_ref()),
            to_revision,
            to_unix_ms,
        }
    }

    /// The command line (before the op's).
    pub fn args(&self) -> Vec<String> {
        let mut out = vec!["--cluster".to_string(), self.cluster.clone()];
        let flags = [("--uid", &self.uid), ("--source", &self.source)];
        for (flag, v) in flags {
            if let Some(v) = v {
                out.extend([flag.to_string(), v.clone()]);
            }
        }
        out.extend(self.store.args());
        if let Some(r) = self.to_revision {
            out.extend(["--to-revision".to_string(), r.to_string()]);
        }
        if let Some(ms) = self.to_unix_ms {
            out.extend(["--to-unix-ms".to_string(), ms.to_string()]);
        }
        out
    }

    /// The location it names: cluster names and the store checked.
    pub fn location(&self) -> Result<Location, String> {
        for name in std::iter::once(&self.cluster).chain(&self.source) {
            crate::names::check_cluster_name(name).map_err(|e| e.to_string())?;
        }
        let mut loc = Location::of(&self.cluster, None).with_uid(self.uid.as_deref());
        loc.source = self.source.clone();
        loc.object = self.store.location()?;
        loc.until = match (self.to_revision, self.to_unix_ms) {
            (Some(r), _) => Some(PointInTime::Revision(r)),
            (None, Some(ms)) => Some(PointInTime::Time(ms)),
            (None, None) => None,
        };
        Ok(loc)
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

    #[test]
    fn a_place_is_read_back_from_its_command_line() {
        use clap::Parser;
        #[derive(Parser)]
        struct Line {
            #[command(flatten)]
            place: Place,
        }
        let store = crate::crd::ObjectStoreSpec {
            url: "s3://bkt/etcd/prod".into(),
            endpoint: Some("http://127.0.0.1:9000".into()),
            region: Some("eu-west-1".into()),
            credentials_secret: Some("s3-keys".into()),
        };
        let mut location = Location::of("demo", None).with_uid(Some("u-1"));
        location.source = Some("old".into());
        location.object = Some(ObjectLocation::parse(&store, "o").expect("a store"));
        for until in [
            None,
            Some(PointInTime::Revision(812)),
            Some(PointInTime::Time(1_700_000_000_123)),
        ] {
            location.until = until;
            let args = Place::of(&location).args();
            let line = Line::try_parse_from(std::iter::once("job".to_string()).chain(args))
                .expect("parses");
            let mut back = line.place.location().expect("checks");
            // The Secret's name is the Job's environment, not its command line.
            assert_eq!(back.object.as_mut().map(|o| o.secret.take()), Some(None));
            location.object.as_mut().map(|o| o.secret.take());
            assert_eq!(back, location);
            location.object = Some(ObjectLocation::parse(&store, "o").expect("a store"));
        }
        let plain = Place::of(&Location::of("demo", None)).args();
        assert_eq!(plain, ["--cluster", "demo"]);
        let bad = Place {
            cluster: "../x".into(),
            ..Place::default()
        };
        assert!(bad.location().is_err());
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
