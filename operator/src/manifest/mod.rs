//! Reading `EtcdCluster` manifests from a folder (the local platform's
//! stand-in for the Kubernetes API server).
//!
//! Each `*.yaml` / `*.yml` file holds one or more `EtcdCluster` documents.
//! A file that cannot be read as such is reported as a [`Problem`] naming the
//! file, the field and what is allowed; so is an entry that is no readable
//! file ([`files`]). Types are as strict as the CRD schema ([`crate::yaml`]),
//! so a manifest valid here is valid on Kubernetes, and back. A problem never reads as "this
//! cluster was deleted": the controller keeps the clusters a broken file
//! defined before, and takes no action on them until it is fixed.

mod cache;
mod files;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kube::core::ObjectMeta;
use serde::{Deserialize, Serialize};

pub use self::cache::{ParseCache, RACY};
pub use self::files::MAX_MANIFEST_BYTES;

use crate::crd::{API_VERSION, EtcdCluster, EtcdClusterSpec, KIND};
use crate::names::check_cluster_name;

/// The manifests of a folder.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Clusters read without a problem, by name.
    pub clusters: BTreeMap<String, Manifest>,
    /// Everything that could not be read, with the cluster it concerns when
    /// that is known.
    pub problems: Vec<Problem>,
}

/// One cluster read from a file.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The file it came from.
    pub file: PathBuf,
    /// The resource, with `metadata.name` set.
    pub cluster: EtcdCluster,
}

/// A manifest that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file at fault.
    pub file: PathBuf,
    /// Every cluster the file names, as far as the names could be read: a
    /// file with one bad document among several freezes them all, so none
    /// reads as deleted.
    pub clusters: Vec<String>,
    /// What is wrong, naming the field and what is allowed.
    pub message: String,
}

/// The shape of a manifest document, strict about unknown fields.
#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Doc {
    api_version: String,
    kind: String,
    metadata: Meta,
    spec: EtcdClusterSpec,
    #[serde(default, skip_serializing)]
    #[allow(dead_code)]
    status: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

/// Just enough of a broken document to learn which cluster it meant.
#[derive(Deserialize)]
struct Loose {
    #[serde(default)]
    metadata: Option<LooseMeta>,
}

#[derive(Deserialize)]
struct LooseMeta {
    #[serde(default)]
    name: Option<String>,
}

/// Reads every manifest file in `dir` (not recursive), in name order.
/// A missing folder reads as empty.
pub fn load_dir(dir: &Path) -> std::io::Result<Loaded> {
    load_dir_cached(dir, &mut ParseCache::default())
}

/// [`load_dir`], parsing again only the files that changed since `cache`
/// took their parse ([`ParseCache`]); a file that cannot be read is read
/// again every time.
pub fn load_dir_cached(dir: &Path, cache: &mut ParseCache) -> std::io::Result<Loaded> {
    load_at(dir, cache, std::time::SystemTime::now())
}

/// [`load_dir_cached`] at `now` (what "changed too recently to keep" is
/// measured from).
fn load_at(
    dir: &Path,
    cache: &mut ParseCache,
    now: std::time::SystemTime,
) -> std::io::Result<Loaded> {
    let mut loaded = Loaded::default();
    let mut seen: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    let entries = files::manifest_entries(dir)?;
    cache.retain(&entries);
    for file in entries {
        let stamp = cache::Stamp::of(&file);
        let parsed = match cache.get(&file, stamp) {
            Some(parsed) => parsed,
            None => {
                let text = match files::read(&file) {
                    Ok(t) => t,
                    Err(message) => {
                        cache.forget(&file);
                        loaded.problems.push(Problem {
                            file: file.clone(),
                            clusters: Vec::new(),
                            message,
                        });
                        continue;
                    }
                };
                let parsed =
                    parse(&text).map_err(|(names, m)| (names, files::unquoted(dir, &file, m)));
                cache.keep(&file, stamp, &parsed, now);
                parsed
            }
        };
        match parsed {
            Ok(clusters) => {
                for cluster in clusters {
                    let name = cluster.metadata.name.clone().unwrap_or_default();
                    seen.entry(name.clone()).or_default().push(file.clone());
                    loaded.clusters.insert(
                        name,
                        Manifest {
                            file: file.clone(),
                            cluster,
                        },
                    );
                }
            }
            Err((clusters, message)) => loaded.problems.push(Problem {
                file,
                clusters,
                message,
            }),
        }
    }
    for (name, files) in seen.into_iter().filter(|(_, f)| f.len() > 1) {
        loaded.clusters.remove(&name);
        let list: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        loaded.problems.push(Problem {
            file: files[0].clone(),
            clusters: vec![name.clone()],
            message: format!(
                "metadata.name: cluster {name:?} is defined {} times ({}); \
                 cluster names must be unique: rename or delete all but one",
                files.len(),
                list.join(", ")
            ),
        });
    }
    Ok(loaded)
}

/// Parses the documents of one file. On failure returns the names of the
/// clusters it names (as far as they can still be read) and the message.
pub fn parse(text: &str) -> Result<Vec<EtcdCluster>, (Vec<String>, String)> {
    // Only valid names: an invalid one must never name a cluster (it would
    // become part of a path).
    let names = || -> Vec<String> {
        serde_saphyr::from_multiple_with_options::<Loose>(text, crate::yaml::options())
            .map(|docs| {
                docs.into_iter()
                    .filter_map(|d| d.metadata?.name)
                    .filter(|n| check_cluster_name(n).is_ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let docs: Vec<Doc> = crate::yaml::from_multiple_bounded(text, crate::crd::field_bounds)
        .map_err(|e| (names(), e))?;
    if docs.is_empty() {
        return Err((Vec::new(), "the file holds no EtcdCluster document".into()));
    }
    docs.into_iter()
        .map(|d| {
            let name = || names();
            if d.api_version != API_VERSION {
                return Err((
                    name(),
                    format!(
                        "apiVersion: must be {API_VERSION:?}, got {:?}",
                        d.api_version
                    ),
                ));
            }
            if d.kind != KIND {
                return Err((name(), format!("kind: must be {KIND:?}, got {:?}", d.kind)));
            }
            if let Err(e) = check_cluster_name(&d.metadata.name) {
                return Err((name(), format!("metadata.name: {e}")));
            }
            let mut cluster = EtcdCluster::new(&d.metadata.name, d.spec);
            cluster.metadata = ObjectMeta {
                name: Some(d.metadata.name),
                namespace: d.metadata.namespace,
                labels: d.metadata.labels,
                annotations: d.metadata.annotations,
                ..ObjectMeta::default()
            };
            Ok(cluster)
        })
        .collect()
}

#[cfg(test)]
mod tests;
