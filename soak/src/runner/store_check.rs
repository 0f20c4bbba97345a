//! At the end of a run with an object store and continuous backups, every
//! chain in the store is read back as a restore would read it (the
//! operator's own store code, from a folder of the runner's: nothing the
//! operator staged is used), so that a hole or a damaged segment in the
//! store fails the run even when status never said so.

use std::sync::Arc;

use etcd_operator::backup::object::ObjectLocation;
use etcd_operator::backup::object::client::StoreEnv;
use etcd_operator::backup::{BackupStore, Location};
use etcd_operator::platform::local::backups::LocalBackups;
use etcd_operator::platform::local::binaries::Binaries;

use super::store::Store;
use crate::data::StoreChains;
use crate::scenario::ClusterSpec;

/// The chains of `cluster`'s backups in `store` (`None` without continuous
/// backups).
pub async fn read_back(store: &Store, cluster: &ClusterSpec) -> Option<StoreChains> {
    let placed = store.place(cluster);
    let backup = placed.spec.backup.as_ref()?;
    backup.continuous.as_ref()?;
    let spec = backup.location.as_ref()?.object_store.as_ref()?;
    let mut out = StoreChains::default();
    let place = match ObjectLocation::parse(spec, "objectStore") {
        Ok(p) => p,
        Err(e) => {
            out.problems
                .push(format!("the run's store does not parse: {e:?}"));
            return Some(out);
        }
    };
    let Ok(dir) = tempfile::tempdir() else {
        out.problems
            .push("no temporary folder to read the store into".into());
        return Some(out);
    };
    let env = StoreEnv::new(
        store
            .credentials()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    let backups =
        LocalBackups::new(dir.path(), Arc::new(Binaries::new(Vec::new()))).with_store_env(env);
    let location = Location {
        object: Some(place),
        ..Location::of(&cluster.name, None)
    };
    let metas = match backups.list(&location).await {
        Ok(m) => m,
        Err(e) => {
            out.problems.push(format!("cannot list the store: {e}"));
            return Some(out);
        }
    };
    for meta in &metas {
        match backups.chain(&location, meta).await {
            Ok(chain) => {
                out.bases += 1;
                out.segments += chain.segments.len();
                if let Some(cut) = chain.cut {
                    out.problems.push(cut);
                }
            }
            // Deleted by retention while it was read: not a hole.
            Err(e)
                if backups
                    .list(&location)
                    .await
                    .is_ok_and(|l| !l.contains(meta)) =>
            {
                tracing::debug!("{} went while it was read: {e}", meta.name);
            }
            Err(e) => out
                .problems
                .push(format!("cannot read the chain of {}: {e}", meta.name)),
        }
    }
    Some(out)
}
