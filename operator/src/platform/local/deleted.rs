//! Deleted clusters, kept aside: a cluster whose manifest was removed is
//! not erased but moved whole (records, members' data, logs, TLS files and
//! its last manifest) to `STATE/deleted/NAME-STAMP/`, where it stays for
//! the time the operator is told to keep it (`run --keep-deleted`), so a
//! deletion nobody meant (a manifest removed by mistake, a sync tool that
//! emptied the folder) costs nothing: `etcd-operator undelete` puts it back
//! and the operator adopts it with its data.
//!
//! ```text
//! STATE/deleted/NAME-20261205T044501Z/          the cluster's folder as it was
//! STATE/deleted/NAME-20261205T044501Z/deleted.json   when, and until when it is kept
//! STATE/deleted/NAME-20261205T044501Z/manifest.yaml  its last manifest
//! ```
//!
//! Every path is built from a checked entry name ([`entry_name`]: a valid
//! cluster name, `-`, a UTC stamp, an optional `-N`) directly under
//! `STATE/deleted`, never followed through a symlink, so a purge cannot
//! reach outside that folder whatever it is given.

use std::io;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::layout::{Layout, read_json, write_json};
use crate::names::{check_cluster_name, quote};

/// The file in a kept cluster's folder that says when it was deleted.
pub const META: &str = "deleted.json";
/// Its last manifest, as the operator last read it.
pub const MANIFEST: &str = "manifest.yaml";

/// Why a kept cluster could not be set aside, listed, purged or put back.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The name given is no kept cluster's entry name.
    #[error(
        "{} is not a deleted cluster's name (NAME-YYYYMMDDTHHMMSSZ, as `etcd-operator deleted` \
         lists them)",
        quote(.0, 80)
    )]
    BadName(String),
    /// No such entry.
    #[error("no deleted cluster {0} in {1} (`etcd-operator deleted` lists them)")]
    NotFound(String, PathBuf),
    /// A cluster of that name exists again.
    #[error(
        "cluster {0} exists again in the state folder: delete its manifest first (it is kept \
         aside too), or undelete into a fresh state folder"
    )]
    Exists(String),
    /// The entry is a symlink or no folder.
    #[error("{} is not a folder the operator set aside (a symlink or a file): left alone", .0.display())]
    NotOurs(PathBuf),
    /// A file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: io::Error,
    },
}

type Result<T, E = Error> = std::result::Result<T, E>;

fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// What `deleted.json` says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// The cluster's name.
    pub cluster: String,
    /// When it was deleted (RFC 3339).
    pub deleted_at: String,
    /// Until when it is kept (RFC 3339); purged after.
    pub keep_until: String,
}

/// One kept cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kept {
    /// Its entry name under `STATE/deleted` (what `undelete` and `purge` take).
    pub entry: String,
    /// Its folder.
    pub path: PathBuf,
    /// What its `deleted.json` says, when it could be read.
    pub meta: Option<Meta>,
}

/// `STATE/deleted`.
pub fn dir(layout: &Layout) -> PathBuf {
    layout.root().join("deleted")
}

/// The stamp of `t`: `YYYYMMDDTHHMMSSZ`.
fn stamp(t: SystemTime) -> String {
    let rfc = humantime::format_rfc3339_seconds(t).to_string();
    rfc.chars().filter(|c| c.is_ascii_alphanumeric()).collect()
}

/// Checks an entry name: `CLUSTER-YYYYMMDDTHHMMSSZ` or with `-N` after;
/// returns the cluster's name.
pub fn entry_name(entry: &str) -> Result<&str> {
    let bad = || Error::BadName(entry.to_string());
    let counted = entry
        .rsplit_once('-')
        .filter(|(_, n)| (1..=4).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()));
    let head = counted.map_or(entry, |(head, _)| head);
    let (cluster, stamp) = head.rsplit_once('-').ok_or_else(bad)?;
    let b = stamp.as_bytes();
    let stamp_ok = b.len() == 16
        && b[8] == b'T'
        && b[15] == b'Z'
        && b[..8].iter().chain(&b[9..15]).all(u8::is_ascii_digit);
    if !stamp_ok || check_cluster_name(cluster).is_err() {
        return Err(bad());
    }
    Ok(cluster)
}

/// The folder of `entry`, checked: a plain folder directly under
/// `STATE/deleted` (not a symlink).
fn entry_path(layout: &Layout, entry: &str) -> Result<PathBuf> {
    entry_name(entry)?;
    let path = dir(layout).join(entry);
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_dir() => Ok(path),
        Ok(_) => Err(Error::NotOurs(path)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Err(Error::NotFound(entry.to_string(), dir(layout)))
        }
        Err(e) => Err(io(format!("cannot look at {}", path.display()))(e)),
    }
}

/// Moves the folder of `cluster` (its members stopped) to
/// `STATE/deleted/CLUSTER-STAMP`, with `manifest` (its last manifest, when
/// known) and a `deleted.json` saying it is kept for `keep`; returns where.
pub fn set_aside(
    layout: &Layout,
    cluster: &str,
    manifest: Option<&str>,
    keep: Duration,
    now: SystemTime,
) -> Result<PathBuf> {
    let from = super::safe_path::cluster_path(&layout.clusters_dir(), cluster, &[])
        .map_err(|e| io(format!("cannot set cluster {cluster} aside"))(e.into_io()))?;
    let into = dir(layout);
    std::fs::create_dir_all(&into).map_err(io(format!("cannot create {}", into.display())))?;
    let base = format!("{cluster}-{}", stamp(now));
    let mut entry = base.clone();
    let mut n = 1;
    while std::fs::symlink_metadata(into.join(&entry)).is_ok() {
        n += 1;
        entry = format!("{base}-{n}");
    }
    let to = into.join(&entry);
    std::fs::rename(&from, &to).map_err(io(format!(
        "cannot move {} to {}",
        from.display(),
        to.display()
    )))?;
    let until = now.checked_add(keep).unwrap_or(now);
    let meta = Meta {
        cluster: cluster.to_string(),
        deleted_at: humantime::format_rfc3339_seconds(now).to_string(),
        keep_until: humantime::format_rfc3339_seconds(until).to_string(),
    };
    write_json(&to.join(META), &meta).map_err(io(format!("cannot write {META}")))?;
    if let Some(m) = manifest {
        std::fs::write(to.join(MANIFEST), m).map_err(io(format!("cannot write {MANIFEST}")))?;
    }
    Ok(to)
}

/// The kept clusters, oldest first. Entries whose name is not one this
/// module makes are not listed (nor ever purged).
pub fn list(layout: &Layout) -> Result<Vec<Kept>> {
    let dir = dir(layout);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(format!("cannot read {}", dir.display()))(e)),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let Ok(path) = entry_path(layout, &name) else {
            continue;
        };
        let meta = read_json::<Meta>(&path.join(META)).ok().flatten();
        out.push(Kept {
            entry: name,
            path,
            meta,
        });
    }
    out.sort_by(|a, b| {
        let at = |k: &Kept| k.meta.as_ref().map(|m| m.deleted_at.clone());
        at(a).cmp(&at(b)).then(a.entry.cmp(&b.entry))
    });
    Ok(out)
}

/// Deletes the kept cluster `entry` for good.
pub fn purge(layout: &Layout, entry: &str) -> Result<PathBuf> {
    let path = entry_path(layout, entry)?;
    std::fs::remove_dir_all(&path).map_err(io(format!("cannot delete {}", path.display())))?;
    Ok(path)
}

/// Purges every kept cluster whose time ran out at `now`; returns what
/// was purged. One that cannot be read says nothing about its time: kept.
pub fn sweep(layout: &Layout, now: SystemTime) -> Vec<PathBuf> {
    let mut purged = Vec::new();
    for kept in list(layout).unwrap_or_default() {
        let until = kept
            .meta
            .as_ref()
            .and_then(|m| humantime::parse_rfc3339_weak(&m.keep_until).ok());
        if until.is_some_and(|u| u <= now)
            && let Ok(p) = purge(layout, &kept.entry)
        {
            purged.push(p);
        }
    }
    purged
}

/// Moves the kept cluster `entry` back to `STATE/clusters/NAME`; returns
/// the cluster's name and its last manifest (when kept). Refused while a
/// cluster of that name exists.
pub fn undelete(layout: &Layout, entry: &str) -> Result<(String, Option<String>)> {
    let cluster = entry_name(entry)?.to_string();
    let path = entry_path(layout, entry)?;
    let to = layout.cluster_dir(&cluster);
    if std::fs::symlink_metadata(&to).is_ok() {
        return Err(Error::Exists(cluster));
    }
    let manifest = std::fs::read_to_string(path.join(MANIFEST)).ok();
    std::fs::create_dir_all(layout.clusters_dir()).map_err(io(format!(
        "cannot create {}",
        layout.clusters_dir().display()
    )))?;
    std::fs::rename(&path, &to).map_err(io(format!(
        "cannot move {} back to {}",
        path.display(),
        to.display()
    )))?;
    for file in [META, MANIFEST] {
        let _ = std::fs::remove_file(to.join(file));
    }
    Ok((cluster, manifest))
}

#[cfg(test)]
mod tests;
