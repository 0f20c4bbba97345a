//! A member's config as recorded on its objects: its [`MemberConfig`], as
//! JSON in the annotation [`ANNOTATION_CONFIG`] of its volume claim
//! (persistent storage: the claim outlives the pod, so a deleted pod is
//! re-created from it) and of its pod (which runs it).

use std::collections::BTreeMap;

use super::Error;
use crate::member::MemberConfig;

/// Annotation holding a member's [`MemberConfig`] as JSON.
pub const ANNOTATION_CONFIG: &str = "etcdoperator.dev/member-config";
/// Annotation set (to the RFC 3339 time) once the member was first seen
/// ready: from then on its volume holds etcd data worth restarting with.
pub const ANNOTATION_STARTED: &str = "etcdoperator.dev/started";

/// The annotation value of `config`.
pub fn to_json(config: &MemberConfig) -> String {
    // A struct of strings and enums always serializes.
    serde_json::to_string(config).unwrap_or_default()
}

/// The config recorded in `annotations` of `object` (`kind/name`, for
/// errors); `None` when there is none.
pub fn read(
    object: &str,
    annotations: Option<&BTreeMap<String, String>>,
) -> Result<Option<MemberConfig>, Error> {
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

/// Whether `annotations` carry the started mark.
pub fn started(annotations: Option<&BTreeMap<String, String>>) -> bool {
    annotations.is_some_and(|a| a.contains_key(ANNOTATION_STARTED))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::MemberAddr;
    use crate::testing::bootstrap_config;
    use crate::version::Version;

    fn config() -> MemberConfig {
        let addr = MemberAddr {
            name: "demo-0".into(),
            peer_url: "http://demo-0.demo.default.svc:2380".into(),
            client_url: "http://demo-0.demo.default.svc:2379".into(),
        };
        let initial = "demo-0=http://demo-0.demo.default.svc:2380";
        bootstrap_config(addr, Version::new(3, 5, 1), initial, "demo-1")
    }

    /// The annotation as the operator wrote it on pods and claims before
    /// the member's config became one type (then `StoredConfig`).
    const OLD_ANNOTATION: &str = concat!(
        r#"{"addr":{"name":"demo-0","peerUrl":"http://demo-0.demo.default.svc:2380","#,
        r#""clientUrl":"http://demo-0.demo.default.svc:2379"},"version":"3.5.1","#,
        r#""initialCluster":"demo-0=http://demo-0.demo.default.svc:2380","#,
        r#""initialState":"new","token":"demo-1","bootstrap":true}"#
    );

    #[test]
    fn round_trips_through_an_annotation() {
        let annotations = BTreeMap::from([(ANNOTATION_CONFIG.to_string(), to_json(&config()))]);
        let back = read("pods/demo-0", Some(&annotations)).expect("readable");
        assert_eq!(back, Some(config()));
        assert_eq!(read("pods/demo-0", None).expect("none"), None);
        assert!(!started(Some(&annotations)));
    }

    #[test]
    fn annotations_on_existing_pods_still_load_and_are_written_the_same() {
        let annotations =
            BTreeMap::from([(ANNOTATION_CONFIG.to_string(), OLD_ANNOTATION.to_string())]);
        let old = read("pods/demo-0", Some(&annotations)).expect("readable");
        assert_eq!(old, Some(config()));
        // Byte for byte: re-applied pods and claims do not change.
        assert_eq!(to_json(&config()), OLD_ANNOTATION);
    }

    #[test]
    fn bad_json_is_refused_naming_the_object() {
        let bad = BTreeMap::from([(ANNOTATION_CONFIG.to_string(), "{".to_string())]);
        let e = read("persistentvolumeclaims/demo-0-data", Some(&bad)).expect_err("unreadable");
        assert_eq!(e.category(), "config");
        assert!(
            e.to_string()
                .starts_with("persistentvolumeclaims/demo-0-data:"),
            "{e}"
        );
    }
}
