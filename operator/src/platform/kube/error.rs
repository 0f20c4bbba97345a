//! What goes wrong on the Kubernetes platform. It reaches the controller
//! whole, as [`crate::platform::Error::Kube`]: category, message and source
//! kept.

/// A failed Kubernetes platform call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or could not be reached.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: ::kube::Error,
    },
    /// The controller has not handed the platform the cluster's resource,
    /// so it knows neither its owner (uid) nor its storage policy.
    #[error(
        "cluster {0} is not registered with the Kubernetes platform; \
         Platform::prepare must be called with its EtcdCluster first"
    )]
    Unregistered(String),
    /// A member's recorded config (an annotation) cannot be read.
    #[error("{object}: unreadable member config: {message}")]
    Config {
        /// The object (`pods/NAME` or `persistentvolumeclaims/NAME`).
        object: String,
        /// What is wrong.
        message: String,
    },
    /// An object in the way is going away (terminating, or left by an
    /// earlier resource of the same name); the call is retried later.
    #[error("{0}")]
    Busy(String),
    /// Something the local platform can do but this one cannot yet.
    #[error("{0}")]
    Unsupported(String),
    /// No such member.
    #[error("cluster {cluster} has no member {member}")]
    NoMember {
        /// Cluster name.
        cluster: String,
        /// Member name.
        member: String,
    },
}

impl Error {
    /// A short label for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Api { .. } => "kube_api",
            Error::Unregistered(_) => "unregistered",
            Error::Config { .. } => "config",
            Error::Busy(_) => "busy",
            Error::Unsupported(_) => "unsupported",
            Error::NoMember { .. } => "no_member",
        }
    }

    /// An API error, with what was being done.
    pub(crate) fn api(what: impl Into<String>) -> impl FnOnce(::kube::Error) -> Error {
        let what = what.into();
        move |source| Error::Api { what, source }
    }
}

/// Whether an API error is a 404.
pub(crate) fn is_not_found(e: &::kube::Error) -> bool {
    matches!(e, ::kube::Error::Api(s) if s.is_not_found())
}

impl From<crate::fence::Deposed> for Error {
    fn from(e: crate::fence::Deposed) -> Self {
        Error::Busy(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform;

    #[test]
    fn reaches_the_controller_with_its_category_message_and_source() {
        let p: platform::Error = Error::Busy("pod demo-0 is terminating".into()).into();
        assert_eq!(p.category(), "busy");
        assert_eq!(p.to_string(), "pod demo-0 is terminating");
        assert!(matches!(p, platform::Error::Kube(Error::Busy(_))));
        let cfg: platform::Error = Error::Config {
            object: "pods/demo-0".into(),
            message: "bad json".into(),
        }
        .into();
        assert_eq!(cfg.category(), "config");
        assert_eq!(
            cfg.to_string(),
            "pods/demo-0: unreadable member config: bad json"
        );
        let status = ::kube::core::Status::failure("pods is forbidden", "Forbidden");
        let refused = ::kube::Error::Api(status.with_code(403).boxed());
        let api: platform::Error = Error::api("cannot list the pods of demo")(refused).into();
        assert_eq!(api.category(), "kube_api");
        let source = std::error::Error::source(&api).expect("the API error");
        assert!(source.to_string().contains("forbidden"), "{source}");
    }
}
