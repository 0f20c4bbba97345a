//! `backups` against an object store. Listing reads the bucket's listing
//! and the backups' metas only, and checks each snapshot's size against
//! its meta: nothing is downloaded but the delta segments of the chains it
//! shows (`check-backup` downloads and verifies a backup whole). It works
//! from a folder of its own, never the operator's state folder, so a
//! listing creates nothing there. With `--location` it needs no state
//! folder at all: a user who lost everything but the bucket lists every
//! cluster's backups there, with each backup's cluster identity, to pick
//! one to restore.

use std::path::PathBuf;
use std::sync::Arc;

use super::backup_table::Checked;
use crate::backup::object::ObjectLocation;
use crate::backup::object::client::{Bucket, StoreEnv};
use crate::backup::{self, BackupMeta, BackupStore, Location};
use crate::platform::local::backups::LocalBackups;
use crate::platform::local::binaries::Binaries;

/// Why a store could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store failed.
    #[error(transparent)]
    Backup(#[from] backup::Error),
    /// A name given is no cluster name.
    #[error(transparent)]
    Name(#[from] crate::names::NameError),
    /// Flags that do not name a store.
    #[error("{0}")]
    Flags(String),
}

/// A store given on the command line (`--location URL`, `--endpoint`,
/// `--region`), checked as the spec's `objectStore` is, its problems
/// naming the flags.
pub fn place_from_flags(
    url: &str,
    endpoint: Option<&str>,
    region: Option<&str>,
) -> Result<ObjectLocation, Error> {
    let spec = crate::crd::ObjectStoreSpec {
        url: url.to_string(),
        endpoint: endpoint.map(str::to_string),
        region: region.map(str::to_string),
        ..crate::crd::ObjectStoreSpec::default()
    };
    ObjectLocation::parse(&spec, "o").map_err(|problems| {
        let said: Vec<String> = problems
            .into_iter()
            .map(|(field, m)| {
                let flag = match field.as_str() {
                    "o.endpoint" => "--endpoint",
                    "o.region" => "--region",
                    _ => "--location",
                };
                format!("{flag}: {m}")
            })
            .collect();
        Error::Flags(said.join("; "))
    })
}

/// A runtime and a store of the command's own (its folder gone with it).
pub(super) struct Reader {
    pub(super) rt: tokio::runtime::Runtime,
    pub(super) store: LocalBackups,
    _dir: tempfile::TempDir,
}

impl Reader {
    pub(super) fn new() -> Result<Self, Error> {
        let dir = tempfile::tempdir().map_err(backup::io_err("cannot make a temporary folder"))?;
        let store = LocalBackups::new(dir.path(), Arc::new(Binaries::new(Vec::new())));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(backup::io_err("cannot start the async runtime"))?;
        Ok(Reader {
            rt,
            store,
            _dir: dir,
        })
    }

    /// The backups of `location` with their sizes checked.
    pub(super) fn list(&self, location: &Location) -> Result<Vec<Checked>, Error> {
        Ok(self.rt.block_on(self.store.list_sized(location))?)
    }

    /// The chains of `backups` (their segments downloaded into a folder
    /// of this reader's), as [`super::backup_table::chains`] says them.
    pub(super) fn chains(&self, location: &Location, backups: &[Checked]) -> String {
        let Ok(tmp) = tempfile::tempdir() else {
            return String::new();
        };
        for (m, _) in backups {
            if let Err(e) =
                self.rt
                    .block_on(self.store.object_segments_into(location, m, tmp.path()))
            {
                return format!("chains not read: {e}\n");
            }
        }
        super::backup_table::chains(tmp.path(), backups)
    }
}

/// `backups CLUSTER` for a cluster whose backups are in an object store:
/// its own backups, sizes checked; "folder" is the store's place.
pub(super) fn list_in_store(location: &Location) -> Result<(PathBuf, Vec<Checked>), Error> {
    let reader = Reader::new()?;
    let out = reader.list(location)?;
    Ok((PathBuf::from(reader.store.describe(location)), out))
}

/// The backups of one cluster identity in a store.
#[derive(Debug)]
pub struct Found {
    /// The cluster's name.
    pub cluster: String,
    /// Its uid, as its backups carry it (`None`: backups written before
    /// backups carried one).
    pub uid: Option<String>,
    /// Its backups, newest first, sizes checked.
    pub backups: Vec<Checked>,
    /// Its chains, in words.
    pub chains: String,
}

/// Every backup in `place` (of `cluster` only, when given), by cluster
/// identity: what `backups --location` prints.
pub fn list_location(place: &ObjectLocation, cluster: Option<&str>) -> Result<Vec<Found>, Error> {
    let reader = Reader::new()?;
    let clusters = match cluster {
        Some(c) => {
            crate::names::check_cluster_name(c)?;
            vec![c.to_string()]
        }
        None => {
            let bucket = reader
                .rt
                .block_on(Bucket::open(place, &StoreEnv::default()))?;
            let names = reader.rt.block_on(bucket.folders(&place.prefix))?;
            names
                .into_iter()
                .filter(|n| crate::names::check_cluster_name(n).is_ok())
                .collect()
        }
    };
    let mut out = Vec::new();
    for name in clusters {
        let location = Location {
            object: Some(place.clone()),
            // Any identity of that name: each is shown apart.
            source: Some(name.clone()),
            ..Location::of(&name, None)
        };
        let all = reader.list(&location)?;
        let mut uids: Vec<Option<String>> = all.iter().map(|(m, _)| m.uid.clone()).collect();
        uids.dedup();
        uids.sort();
        uids.dedup();
        for uid in uids {
            let backups: Vec<Checked> = all.iter().filter(|(m, _)| m.uid == uid).cloned().collect();
            let chains = reader.chains(&location, &backups);
            out.push(Found {
                cluster: name.clone(),
                uid,
                backups,
                chains,
            });
        }
    }
    Ok(out)
}

/// A heading for `found`: the cluster identity a restore names.
pub fn heading(found: &Found, place: &ObjectLocation) -> String {
    let uid = found
        .uid
        .as_deref()
        .map_or("no uid: written before backups carried one".into(), |u| {
            format!("uid {u}")
        });
    let newest: Option<&BackupMeta> = found.backups.first().map(|(m, _)| m);
    format!(
        "cluster {} ({uid}) in {place}: {} backups{}",
        found.cluster,
        found.backups.len(),
        newest.map_or(String::new(), |m| format!(", newest {}", m.name))
    )
}

/// What `backups --location` prints for `found` in `place`: per cluster
/// identity its heading, its backups and their chains, then how to
/// restore one.
pub fn render(found: &[Found], place: &ObjectLocation) -> String {
    let mut text = String::new();
    for f in found {
        text.push_str(&format!(
            "{}\n{}\n{}",
            heading(f, place),
            super::backup_table::table(&f.backups),
            f.chains
        ));
        text.push('\n');
    }
    text.push_str(
        "CHECK compares each snapshot's size with its meta; `check-backup` verifies one whole. \
         Restore one with spec.restore (backup: NAME, cluster: CLUSTER, location: this store).\n",
    );
    text
}
