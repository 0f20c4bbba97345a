//! A member's config as recorded on its objects: the [`MemberConfig`] it
//! was created with, as JSON in the annotation [`ANNOTATION_CONFIG`] of its
//! volume claim (persistent storage: the claim outlives the pod, so a
//! deleted pod is re-created from it) and of its pod (which runs it).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Error;
use crate::platform::{InitialState, MemberAddr, MemberConfig};
use crate::version::Version;

/// Annotation holding a member's [`StoredConfig`] as JSON.
pub const ANNOTATION_CONFIG: &str = "etcdoperator.dev/member-config";
/// Annotation set (to the RFC 3339 time) once the member was first seen
/// ready: from then on its volume holds etcd data worth restarting with.
pub const ANNOTATION_STARTED: &str = "etcdoperator.dev/started";

/// What a member is run with; [`MemberConfig`] without the local-only
/// snapshot path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredConfig {
    /// Name and URLs.
    pub addr: MemberAddr,
    /// Version to run.
    pub version: Version,
    /// `--initial-cluster`.
    pub initial_cluster: String,
    /// `--initial-cluster-state`.
    pub initial_state: InitialState,
    /// `--initial-cluster-token`.
    pub token: String,
    /// One of the bootstrap members.
    pub bootstrap: bool,
}

impl StoredConfig {
    /// The config to record for `config`; restoring from a snapshot is not
    /// supported on Kubernetes yet.
    pub fn from_config(config: &MemberConfig) -> Result<Self, Error> {
        if let Some(path) = &config.restore_from {
            return Err(Error::Unsupported(format!(
                "member {}: restoring from a snapshot ({}) is not supported on the Kubernetes \
                 platform yet",
                config.addr.name,
                path.display()
            )));
        }
        Ok(StoredConfig {
            addr: config.addr.clone(),
            version: config.version,
            initial_cluster: config.initial_cluster.clone(),
            initial_state: config.initial_state,
            token: config.token.clone(),
            bootstrap: config.bootstrap,
        })
    }

    /// The annotation value.
    pub fn to_json(&self) -> String {
        // A struct of strings and enums always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The config recorded in `annotations` of `object` (`kind/name`, for
    /// errors); `None` when there is none.
    pub fn read(
        object: &str,
        annotations: Option<&BTreeMap<String, String>>,
    ) -> Result<Option<Self>, Error> {
        let Some(json) = annotations.and_then(|a| a.get(ANNOTATION_CONFIG)) else {
            return Ok(None);
        };
        serde_json::from_str(json)
            .map(Some)
            .map_err(|e| Error::Config {
                object: object.to_string(),
                message: format!("annotation {ANNOTATION_CONFIG}: {e}"),
            })
    }
}

/// Whether `annotations` carry the started mark.
pub fn started(annotations: Option<&BTreeMap<String, String>>) -> bool {
    annotations.is_some_and(|a| a.contains_key(ANNOTATION_STARTED))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> MemberConfig {
        MemberConfig {
            addr: MemberAddr {
                name: "demo-0".into(),
                peer_url: "http://demo-0.demo.default.svc:2380".into(),
                client_url: "http://demo-0.demo.default.svc:2379".into(),
            },
            version: Version::new(3, 5, 1),
            initial_cluster: "demo-0=http://demo-0.demo.default.svc:2380".into(),
            initial_state: InitialState::New,
            token: "demo-1".into(),
            bootstrap: true,
            restore_from: None,
        }
    }

    #[test]
    fn round_trips_through_an_annotation() {
        let stored = StoredConfig::from_config(&config()).expect("no snapshot");
        let annotations = BTreeMap::from([(ANNOTATION_CONFIG.to_string(), stored.to_json())]);
        let back = StoredConfig::read("pods/demo-0", Some(&annotations)).expect("readable");
        assert_eq!(back, Some(stored));
        assert_eq!(StoredConfig::read("pods/demo-0", None).expect("none"), None);
        assert!(!started(Some(&annotations)));
    }

    #[test]
    fn a_snapshot_or_bad_json_is_refused() {
        let mut c = config();
        c.restore_from = Some("/backups/x.db".into());
        let e = StoredConfig::from_config(&c).expect_err("unsupported");
        assert!(e.to_string().contains("not supported"), "{e}");
        let bad = BTreeMap::from([(ANNOTATION_CONFIG.to_string(), "{".to_string())]);
        let e = StoredConfig::read("persistentvolumeclaims/demo-0-data", Some(&bad))
            .expect_err("unreadable");
        assert_eq!(e.category(), "config");
        assert!(
            e.to_string()
                .starts_with("persistentvolumeclaims/demo-0-data:"),
            "{e}"
        );
    }
}
