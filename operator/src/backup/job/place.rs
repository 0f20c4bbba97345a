//! How a Job's command line says where its work is: the backups
//! ([`Place`]: whose, in the claim or an object store, up to which point)
//! and how it reaches a member over TLS ([`JobTls`]). Written by the
//! platform for a [`Location`], read back by the Job, checked.

use crate::backup::Location;
use crate::backup::object::ObjectLocation;
use crate::backup::point::PointInTime;

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

    /// The client TLS read from the folder (none without one): regular
    /// files, size-capped ([`crate::tls::ClientTls::from_files`]), read on
    /// a blocking thread, off the async workers.
    pub async fn load(&self) -> Result<Option<crate::tls::ClientTls>, String> {
        let Some(dir) = &self.tls_dir else {
            return Ok(None);
        };
        let dir = std::path::PathBuf::from(dir);
        let shown = dir.display().to_string();
        let read = tokio::task::spawn_blocking(move || {
            crate::tls::ClientTls::from_files(
                &dir.join("ca.crt"),
                &dir.join("tls.crt"),
                &dir.join("tls.key"),
            )
        })
        .await
        .map_err(|e| format!("reading the client certificate in {shown} failed: {e}"))?;
        let tls =
            read.map_err(|e| format!("cannot read the client certificate in {shown}: {e}"))?;
        Ok(Some(tls.with_server_name(self.server_name.clone())))
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
            service_account_name: None,
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
            service_account_name: Some("backup-writer".into()),
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
            // The Secret's name is the Job's environment and the service
            // account its pod's, not its command line.
            assert_eq!(back.object.as_mut().map(|o| o.secret.take()), Some(None));
            location.object.as_mut().map(|o| o.secret.take());
            let account = back.object.as_mut().map(|o| o.service_account.take());
            assert_eq!(account, Some(None));
            location.object.as_mut().map(|o| o.service_account.take());
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
}
