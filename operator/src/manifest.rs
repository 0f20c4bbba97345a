//! Reading `EtcdCluster` manifests from a folder (the local platform's
//! stand-in for the Kubernetes API server).
//!
//! Each `*.yaml` / `*.yml` file holds one or more `EtcdCluster` documents.
//! A file that cannot be read as such is reported as a [`Problem`] naming the
//! file, the field and what is allowed. A problem never reads as "this
//! cluster was deleted": the controller keeps the clusters a broken file
//! defined before, and takes no action on them until it is fixed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kube::core::ObjectMeta;
use serde::Deserialize;

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
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Doc {
    api_version: String,
    kind: String,
    metadata: Meta,
    spec: EtcdClusterSpec,
    #[serde(default)]
    #[allow(dead_code)]
    status: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
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
    let mut files = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            for entry in entries {
                let path = entry?.path();
                let is_yaml = path
                    .extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| e == "yaml" || e == "yml");
                if is_yaml && path.is_file() {
                    files.push(path);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    files.sort();
    let mut loaded = Loaded::default();
    let mut seen: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for file in files {
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) => {
                loaded.problems.push(Problem {
                    file: file.clone(),
                    clusters: Vec::new(),
                    message: format!("cannot read the file: {e}"),
                });
                continue;
            }
        };
        match parse(&text) {
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
        serde_saphyr::from_multiple::<Loose>(text)
            .map(|docs| {
                docs.into_iter()
                    .filter_map(|d| d.metadata?.name)
                    .filter(|n| check_cluster_name(n).is_ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let docs: Vec<Doc> =
        serde_saphyr::from_multiple(text).map_err(|e| (names(), describe(&e, text)))?;
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

/// The first line of a parse error ("line 5 column 3: unknown field ..."),
/// without the source snippet the YAML parser appends, and the source line
/// it points at, so a bare "invalid i64" still shows the field.
fn describe(e: &serde_saphyr::Error, source: &str) -> String {
    let text = e.to_string();
    let line = text.lines().next().unwrap_or_default().trim();
    let line = line.strip_prefix("error: ").unwrap_or(line);
    if line.is_empty() {
        return "not a valid EtcdCluster manifest".into();
    }
    let at = line
        .strip_prefix("line ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| source.lines().nth(n.checked_sub(1)?))
        .map(str::trim)
        .filter(|l| !l.is_empty());
    match at {
        Some(at) => format!("{line} (at `{at}`)"),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEMO: &str = "apiVersion: etcdoperator.dev/v1alpha1\nkind: EtcdCluster\n\
                        metadata: {name: demo}\nspec: {size: 3, version: \"3.4.23\"}\n";

    fn problem(text: &str) -> (Vec<String>, String) {
        parse(text).expect_err("should not parse")
    }

    #[test]
    fn parses_the_readme_example() {
        let c = parse(DEMO).expect("parses");
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].metadata.name.as_deref(), Some("demo"));
        assert_eq!(c[0].spec.size, 3);
        assert_eq!(c[0].spec.version, "3.4.23");
    }

    #[test]
    fn several_documents() {
        let two = format!("{DEMO}---\n{}", DEMO.replace("demo", "other"));
        assert_eq!(parse(&two).expect("parses").len(), 2);
    }

    #[test]
    fn unknown_spec_field_is_named_with_the_allowed_ones() {
        let (names, msg) = problem(&DEMO.replace("size: 3", "sise: 3"));
        assert_eq!(names, ["demo"]);
        assert!(msg.contains("sise"), "{msg}");
        assert!(msg.contains("size"), "{msg}");
        assert!(msg.starts_with("line 4 column 8: unknown field"), "{msg}");
    }

    #[test]
    fn one_bad_document_names_every_cluster_of_the_file() {
        let other = DEMO.replace("demo", "other");
        let (names, msg) = problem(&format!(
            "{DEMO}---\n{}",
            other.replace("size: 3", "size: x")
        ));
        assert_eq!(names, ["demo", "other"]);
        assert!(msg.contains("size"), "{msg}");
        let (names, msg) = problem(&format!(
            "{DEMO}---\n{}",
            other.replace("EtcdCluster", "Pod")
        ));
        assert_eq!(names, ["demo", "other"]);
        assert!(msg.starts_with("kind:"), "{msg}");
    }

    #[test]
    fn unknown_top_level_and_metadata_fields() {
        let (_, msg) = problem(&format!("{DEMO}extra: 1\n"));
        assert!(msg.contains("extra"), "{msg}");
        let (_, msg) = problem(&DEMO.replace("{name: demo}", "{name: demo, uid: x}"));
        assert!(msg.contains("uid"), "{msg}");
    }

    #[test]
    fn malformed_yaml() {
        let (names, msg) = problem("apiVersion: [unclosed\n");
        assert!(names.is_empty());
        assert!(!msg.is_empty());
    }

    #[test]
    fn wrong_kind_or_api_version() {
        let (_, msg) = problem(&DEMO.replace("kind: EtcdCluster", "kind: Pod"));
        assert!(msg.starts_with("kind:"), "{msg}");
        let (_, msg) = problem(&DEMO.replace("v1alpha1", "v1"));
        assert!(msg.starts_with("apiVersion:"), "{msg}");
    }

    #[test]
    fn duplicate_names_across_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.yaml"), DEMO).expect("write");
        std::fs::write(dir.path().join("b.yml"), DEMO).expect("write");
        std::fs::write(dir.path().join("notes.txt"), "ignored").expect("write");
        let loaded = load_dir(dir.path()).expect("load");
        assert!(loaded.clusters.is_empty());
        assert_eq!(loaded.problems.len(), 1);
        assert_eq!(loaded.problems[0].clusters, ["demo"]);
        assert!(loaded.problems[0].message.contains("2 times"));
    }

    #[test]
    fn missing_folder_is_empty() {
        let loaded = load_dir(Path::new("/nonexistent/etcd-operator")).expect("load");
        assert!(loaded.clusters.is_empty() && loaded.problems.is_empty());
    }
}
