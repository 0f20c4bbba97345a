//! What a member's pod runs with beyond etcd's command line: the image
//! repository (`spec.image.repository`) and the pod settings
//! (`spec.pod`). Part of a member's recorded config and of the
//! [`super::Settings`] a planned restart changes, so a change rolls
//! through the members one at a time as an upgrade does, and a pod is
//! always re-created with what its member last ran. Kubernetes only: the
//! local platform refuses both fields, so its members keep the default.

use serde::{Deserialize, Serialize};

use crate::crd::MemberPodSpec;

/// A member's image repository and pod settings; both `None` (the
/// operator's defaults) for members recorded before they existed, which
/// read and write the same as before.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSettings {
    /// The image repository (`None`: the operator's `--etcd-image`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// `spec.pod` (`None`: the operator's defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<Box<MemberPodSpec>>,
}

impl PodSettings {
    /// The operator's defaults: nothing set.
    pub fn is_default(&self) -> bool {
        *self == PodSettings::default()
    }

    /// The repository to run: this one's, else `default`.
    pub fn repository_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.repository.as_deref().unwrap_or(default)
    }
}
