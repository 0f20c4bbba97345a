//! What goes wrong on the Kubernetes platform, and how it reaches the
//! controller as a [`crate::platform::Error`].

use std::path::PathBuf;

use crate::platform;

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
    /// The controller has not registered the cluster's resource, so the
    /// platform does not know its owner (uid) nor its storage policy.
    #[error(
        "cluster {0} is not registered with the Kubernetes platform; \
         KubePlatform::register must be called with its EtcdCluster first"
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

/// `platform::Error` has no Kubernetes variant (the trait is shared with
/// the local platform), so API and busy errors travel as `Io` errors whose
/// source is this error (`std::error::Error::source` then downcasts to it).
impl From<Error> for platform::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Config { object, message } => platform::Error::Record {
                path: PathBuf::from(object),
                message,
            },
            Error::NoMember { cluster, member } => platform::Error::NoMember { cluster, member },
            Error::Unsupported(m) => platform::Error::Restore(m),
            Error::Api { what, source } => platform::Error::Io {
                what,
                source: std::io::Error::other(source),
            },
            e @ (Error::Unregistered(_) | Error::Busy(_)) => platform::Error::Io {
                what: format!("kubernetes platform ({})", e.category()),
                source: std::io::Error::other(e),
            },
        }
    }
}

/// Whether an API error is a 404.
pub(crate) fn is_not_found(e: &::kube::Error) -> bool {
    matches!(e, ::kube::Error::Api(s) if s.is_not_found())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_with_a_readable_message() {
        let busy = Error::Busy("pod demo-0 is terminating".into());
        assert_eq!(busy.category(), "busy");
        let p: platform::Error = busy.into();
        assert_eq!(p.category(), "io");
        assert_eq!(
            p.to_string(),
            "kubernetes platform (busy): pod demo-0 is terminating"
        );
        let cfg: platform::Error = Error::Config {
            object: "pods/demo-0".into(),
            message: "bad json".into(),
        }
        .into();
        assert_eq!(cfg.category(), "record");
        assert_eq!(cfg.to_string(), "pods/demo-0: unreadable record: bad json");
    }
}
