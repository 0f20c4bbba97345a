//! `spec.tls`: which sides use TLS, where their certificates come from,
//! and how long the ones the operator issues last.

use std::time::Duration;

use super::{DEFAULT_CA_VALIDITY, DEFAULT_CERT_VALIDITY, MIN_TLS_VALIDITY, parse_duration};
use crate::crd::{EtcdClusterSpec, TlsEndpoint, TlsMode};

/// Checked TLS settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsPolicy {
    /// Peer TLS, when on.
    pub peer: Option<TlsSource>,
    /// Client TLS, when on.
    pub client: Option<TlsSource>,
    /// Validity of the certificates the operator issues.
    pub certificate_validity: Duration,
    /// Validity of the CA the operator creates.
    pub ca_validity: Duration,
}

impl Default for TlsPolicy {
    fn default() -> Self {
        TlsPolicy {
            peer: None,
            client: None,
            certificate_validity: DEFAULT_CERT_VALIDITY,
            ca_validity: DEFAULT_CA_VALIDITY,
        }
    }
}

impl TlsPolicy {
    /// Whether either side uses TLS.
    pub fn any(&self) -> bool {
        self.peer.is_some() || self.client.is_some()
    }
}

/// Where one side's certificates come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TlsSource {
    /// The operator issues them from the cluster's CA.
    Auto,
    /// The user provides them.
    Provided {
        /// A folder (local platform).
        path: Option<String>,
        /// A Secret (Kubernetes).
        secret_name: Option<String>,
    },
}

impl TlsSource {
    /// `Auto` or `Provided`, as in the spec.
    pub fn mode(&self) -> &'static str {
        match self {
            TlsSource::Auto => "Auto",
            TlsSource::Provided { .. } => "Provided",
        }
    }
}

/// `spec.tls`: modes with what they need, validities within bounds.
pub(super) fn check_tls(spec: &EtcdClusterSpec, err: &mut impl FnMut(&str, String)) -> TlsPolicy {
    let mut policy = TlsPolicy::default();
    let Some(tls) = &spec.tls else {
        return policy;
    };
    let mut side = |name: &str, e: &Option<TlsEndpoint>| {
        let e = e.as_ref()?;
        let field = format!("spec.tls.{name}");
        let blank = |v: &Option<String>| v.as_deref().is_some_and(|p| p.trim().is_empty());
        match e.mode {
            TlsMode::Auto => {
                if e.path.is_some() || e.secret_name.is_some() {
                    err(
                        &field,
                        "path and secretName name certificates you provide: use them with \
                         mode: Provided, or leave them out for mode: Auto"
                            .into(),
                    );
                }
                Some(TlsSource::Auto)
            }
            TlsMode::Provided => {
                if e.path.is_none() && e.secret_name.is_none() || blank(&e.path) {
                    err(
                        &field,
                        "mode: Provided needs path (a folder with ca.crt, tls.crt and tls.key; \
                         local platform) or secretName (a kubernetes.io/tls Secret with ca.crt; \
                         Kubernetes)"
                            .into(),
                    );
                }
                if let Some(s) = &e.secret_name
                    && check_secret_name(s).is_err()
                {
                    err(
                        &format!("{field}.secretName"),
                        format!(
                            "{s:?} is not a Secret name (lowercase letters, digits, '-' and '.')"
                        ),
                    );
                }
                Some(TlsSource::Provided {
                    path: e.path.clone(),
                    secret_name: e.secret_name.clone(),
                })
            }
        }
    };
    policy.peer = side("peer", &tls.peer);
    policy.client = side("client", &tls.client);
    for (field, value, slot) in [
        (
            "spec.tls.certificateValidity",
            &tls.certificate_validity,
            &mut policy.certificate_validity,
        ),
        (
            "spec.tls.caValidity",
            &tls.ca_validity,
            &mut policy.ca_validity,
        ),
    ] {
        let Some(v) = value else { continue };
        match parse_duration(v) {
            Ok(d) if d >= MIN_TLS_VALIDITY => *slot = d,
            Ok(d) => err(field, format!("must be at least 1m, got {d:?}")),
            Err(m) => err(field, m),
        }
    }
    policy
}

/// What a `secretName` may be ([`check_secret_name`]; at most 253
/// characters), as a regular expression.
pub const SECRET_NAME_PATTERN: &str = "^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$";
/// Longest `secretName`.
pub const MAX_SECRET_NAME_LEN: usize = 253;

/// A Kubernetes object name (DNS subdomain): lowercase letters, digits,
/// '-' and '.', at most 253 characters, starting and ending alphanumeric.
fn check_secret_name(name: &str) -> Result<(), ()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_SECRET_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric());
    if ok { Ok(()) } else { Err(()) }
}
