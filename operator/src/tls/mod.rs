//! TLS for members and clients: the certificates the operator issues
//! ([`issue`]: a CA per cluster, ECDSA P-256, with rcgen), what it checks
//! of any certificate ([`inspect`]: validity, SANs, issuer, key), the files
//! a member's etcd reads ([`MemberFiles`]), and the client side every
//! program uses to reach a TLS cluster ([`ClientTls`]).
//!
//! Private keys never reach a log: the types holding them print no key in
//! `Debug`, and errors name files and fields, never their content.

pub mod inspect;
pub mod issue;

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Result of TLS calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What is wrong with a certificate, a key or the CA.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Generating a key or a certificate failed.
    #[error("cannot generate {what}: {message}")]
    Generate {
        /// What was being made.
        what: String,
        /// The cause.
        message: String,
    },
    /// A file or Secret key is missing or is no PEM certificate or key.
    #[error("{what}: {message}")]
    Unreadable {
        /// The file or Secret key.
        what: String,
        /// What is wrong.
        message: String,
    },
    /// The private key does not belong to the certificate.
    #[error("{what}: the certificate does not match its private key ({key})")]
    KeyMismatch {
        /// The certificate.
        what: String,
        /// The key.
        key: String,
    },
    /// The certificate expired, or is not valid yet.
    #[error("{what}: {message}")]
    Validity {
        /// The certificate.
        what: String,
        /// Since or until when.
        message: String,
    },
    /// The certificate's names (SANs) do not cover a member's address.
    #[error(
        "{what}: its subject alternative names ({sans}) do not cover member {member} at {host}; \
         add {host} to the certificate"
    )]
    NotCovered {
        /// The certificate.
        what: String,
        /// The member.
        member: String,
        /// The host its URLs name.
        host: String,
        /// The names the certificate has.
        sans: String,
    },
    /// The certificate is not signed by the CA it is given with.
    #[error("{what}: not signed by any CA in {ca}")]
    NotSigned {
        /// The certificate.
        what: String,
        /// The CA file or key.
        ca: String,
    },
    /// The certificate may not be used as it would be (client or server).
    #[error("{what}: {message}")]
    Usage {
        /// The certificate.
        what: String,
        /// What usage it lacks.
        message: String,
    },
}

impl Error {
    /// A short label for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Generate { .. } => "generate",
            Error::Unreadable { .. } => "unreadable",
            Error::KeyMismatch { .. } => "key_mismatch",
            Error::Validity { .. } => "validity",
            Error::NotCovered { .. } => "not_covered",
            Error::NotSigned { .. } => "not_signed",
            Error::Usage { .. } => "usage",
        }
    }
}

/// A certificate and its private key, both PEM. `Debug` prints no key.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertKey {
    /// The certificate (PEM).
    pub cert: String,
    /// Its private key (PEM).
    pub key: String,
}

impl fmt::Debug for CertKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertKey")
            .field("cert_bytes", &self.cert.len())
            .field("key", &"<redacted>")
            .finish()
    }
}

/// The CAs of a cluster whose certificates the operator issues: the one
/// it issues from, and during a rotation the one coming in (trusted, not
/// yet issuing) or the one going out (still trusted, no longer issuing).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaState {
    /// The CA new certificates are signed by.
    pub issuing: CertKey,
    /// A new CA members are being told to trust; it becomes `issuing`
    /// once every member trusts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<CertKey>,
    /// The previous CA's certificate, trusted until no certificate it
    /// signed is in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retiring: Option<String>,
}

impl fmt::Debug for CaState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaState")
            .field("issuing", &self.issuing)
            .field("next", &self.next.is_some())
            .field("retiring", &self.retiring.is_some())
            .finish()
    }
}

impl CaState {
    /// Every CA certificate trusted now, as one PEM bundle in a stable
    /// order (the same set gives the same bundle).
    pub fn bundle(&self) -> String {
        let certs = [
            Some(self.issuing.cert.as_str()),
            self.next.as_ref().map(|n| n.cert.as_str()),
            self.retiring.as_deref(),
        ];
        bundle(certs.into_iter().flatten())
    }
}

/// One PEM bundle of `certs`, sorted, each ending in a newline.
pub fn bundle<'a>(certs: impl Iterator<Item = &'a str>) -> String {
    let mut certs: Vec<String> = certs
        .map(|c| format!("{}\n", c.trim_end()))
        .filter(|c| !c.trim().is_empty())
        .collect();
    certs.sort();
    certs.dedup();
    certs.concat()
}

/// A short fingerprint of a CA bundle (the first 16 hex digits of its
/// SHA-256): members record the one they were started with, since etcd
/// reads its trusted CA file only at start.
pub fn trust_id(bundle: &str) -> String {
    let digest = Sha256::digest(bundle.trim().as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// One role's files of a member: its certificate and key, and the CAs it
/// trusts for the other side.
#[derive(Clone, PartialEq, Eq)]
pub struct RoleFiles {
    /// Certificate and key.
    pub cert_key: CertKey,
    /// Trusted CA bundle (PEM).
    pub ca: String,
}

impl fmt::Debug for RoleFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RoleFiles")
            .field("cert_key", &self.cert_key)
            .field("ca", &trust_id(&self.ca))
            .finish()
    }
}

/// Names of a member's TLS files, the same in its local folder and in its
/// Kubernetes Secret.
pub mod files {
    /// Peer certificate (also presented to peers as a client certificate).
    pub const PEER_CERT: &str = "peer.crt";
    /// Peer key.
    pub const PEER_KEY: &str = "peer.key";
    /// CAs trusted for peers.
    pub const PEER_CA: &str = "peer-ca.crt";
    /// Certificate served to clients.
    pub const SERVER_CERT: &str = "server.crt";
    /// Its key.
    pub const SERVER_KEY: &str = "server.key";
    /// CAs trusted for client certificates.
    pub const CLIENT_CA: &str = "client-ca.crt";
    /// Names of the private keys (written owner-only).
    pub const KEYS: [&str; 2] = [PEER_KEY, SERVER_KEY];
}

/// The TLS files of one member, as its etcd reads them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberFiles {
    /// Peer TLS, when on.
    pub peer: Option<RoleFiles>,
    /// Client TLS, when on.
    pub client: Option<RoleFiles>,
}

impl MemberFiles {
    /// The files by name ([`files`]).
    pub fn to_map(&self) -> Vec<(&'static str, &str)> {
        let mut out = Vec::new();
        if let Some(p) = &self.peer {
            out.push((files::PEER_CERT, p.cert_key.cert.as_str()));
            out.push((files::PEER_KEY, p.cert_key.key.as_str()));
            out.push((files::PEER_CA, p.ca.as_str()));
        }
        if let Some(c) = &self.client {
            out.push((files::SERVER_CERT, c.cert_key.cert.as_str()));
            out.push((files::SERVER_KEY, c.cert_key.key.as_str()));
            out.push((files::CLIENT_CA, c.ca.as_str()));
        }
        out
    }

    /// The files from a map of names to contents (a folder or a Secret);
    /// a role is there when all three of its files are.
    pub fn from_map(get: impl Fn(&str) -> Option<String>) -> Self {
        let role = |cert: &str, key: &str, ca: &str| {
            Some(RoleFiles {
                cert_key: CertKey {
                    cert: get(cert)?,
                    key: get(key)?,
                },
                ca: get(ca)?,
            })
        };
        MemberFiles {
            peer: role(files::PEER_CERT, files::PEER_KEY, files::PEER_CA),
            client: role(files::SERVER_CERT, files::SERVER_KEY, files::CLIENT_CA),
        }
    }
}

/// What a client needs to reach a TLS member: the CAs to trust and its
/// own certificate (etcd asks every client for one). `Debug` prints no key.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientTls {
    /// Trusted CA bundle (PEM).
    pub ca: String,
    /// Client certificate and key.
    pub cert_key: CertKey,
    /// The name to check the member's certificate against when the URL
    /// names another host (a pod's IP: its certificate names its DNS name).
    pub server_name: Option<String>,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls")
            .field("ca", &trust_id(&self.ca))
            .field("cert_key", &self.cert_key)
            .field("server_name", &self.server_name)
            .finish()
    }
}

impl ClientTls {
    /// Reads the three files `status.tls` names (CA, certificate, key).
    pub fn from_files(ca: &Path, cert: &Path, key: &Path) -> Result<Self> {
        // Files a status names, read by tools: capped and checked to be
        // regular files like every file a user names.
        let read = |p: &Path| {
            crate::userfile::read_blocking(p, crate::userfile::PEM_MAX_BYTES)
                .and_then(|b| {
                    String::from_utf8(b).map_err(|_| crate::userfile::Error::NotText {
                        path: p.to_path_buf(),
                    })
                })
                .map_err(|e| Error::Unreadable {
                    what: p.display().to_string(),
                    message: e.to_string(),
                })
        };
        Ok(ClientTls {
            ca: read(ca)?,
            cert_key: CertKey {
                cert: read(cert)?,
                key: read(key)?,
            },
            server_name: None,
        })
    }

    /// The client certificate a cluster's published status names (the
    /// files the local platform writes under the state folder), if its
    /// clients use TLS.
    pub fn from_status(status: Option<&crate::crd::EtcdClusterStatus>) -> Result<Option<Self>> {
        let Some(t) = status.and_then(|s| s.tls.as_ref()) else {
            return Ok(None);
        };
        let (Some(ca), Some(cert), Some(key)) =
            (&t.ca_file, &t.client_cert_file, &t.client_key_file)
        else {
            return Ok(None);
        };
        Self::from_files(Path::new(ca), Path::new(cert), Path::new(key)).map(Some)
    }

    /// The same, checking the server's certificate against `name`.
    pub fn with_server_name(&self, name: Option<String>) -> Self {
        ClientTls {
            server_name: name,
            ..self.clone()
        }
    }

    /// etcd-client's TLS options for these files.
    pub fn options(&self) -> etcd_client::TlsOptions {
        let identity = etcd_client::Identity::from_pem(&self.cert_key.cert, &self.cert_key.key);
        let tls = etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(&self.ca))
            .identity(identity);
        match &self.server_name {
            Some(name) => tls.domain_name(name.clone()),
            None => tls,
        }
    }

    /// A short fingerprint of what this TLS setting holds (a renewed client
    /// certificate or another CA gives another), so cached connections
    /// made with older files can be told apart.
    pub fn fingerprint(&self) -> String {
        let all = format!(
            "{}\0{}\0{}\0{:?}",
            self.ca, self.cert_key.cert, self.cert_key.key, self.server_name
        );
        trust_id(&all)
    }
}

/// The host a URL names (`https://HOST:PORT`, IPv6 in brackets), without
/// brackets.
pub fn url_host(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next()?;
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next();
    }
    authority
        .rsplit_once(':')
        .map_or(Some(authority), |(h, _)| Some(h))
}

/// Whether a URL uses TLS.
pub fn is_https(url: &str) -> bool {
    url.starts_with("https://")
}

/// Whether two URLs name the same host and port, whatever their schemes
/// (a member's peer URL while it moves between `http://` and `https://`).
pub fn same_endpoint(a: &str, b: &str) -> bool {
    let rest = |u: &str| {
        u.split_once("://")
            .map_or(u, |(_, r)| r)
            .trim_end_matches('/')
            .to_string()
    };
    rest(a) == rest(b)
}

/// `url` with its scheme set to `https` (`tls`) or `http`.
pub fn with_scheme(url: &str, tls: bool) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    format!("{}://{rest}", if tls { "https" } else { "http" })
}

/// Makes ring the process's TLS crypto provider. Two are linked (ring, which
/// kube and the etcd client use, and aws-lc-rs, which the object-store
/// client brings), and rustls then cannot pick one by itself: every program
/// calls this first. Calling it again does nothing.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_schemes() {
        assert_eq!(url_host("https://127.1.2.3:2379"), Some("127.1.2.3"));
        assert_eq!(url_host("http://[fd00::1]:2379"), Some("fd00::1"));
        assert_eq!(
            url_host("https://demo-0.demo.ns.svc:2380"),
            Some("demo-0.demo.ns.svc")
        );
        assert_eq!(
            with_scheme("http://127.1.2.3:2380", true),
            "https://127.1.2.3:2380"
        );
        assert_eq!(
            with_scheme("https://127.1.2.3:2380", false),
            "http://127.1.2.3:2380"
        );
        assert!(is_https("https://x:1") && !is_https("http://x:1"));
    }

    #[test]
    fn bundles_are_order_independent_and_keys_never_printed() {
        let a = "-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----";
        let b = "-----BEGIN CERTIFICATE-----\nB\n-----END CERTIFICATE-----\n";
        assert_eq!(bundle([a, b].into_iter()), bundle([b, a, a].into_iter()));
        assert_eq!(
            trust_id(&bundle([a, b].into_iter())),
            trust_id(&bundle([b, a].into_iter()))
        );
        let ck = CertKey {
            cert: a.into(),
            key: "SECRET-KEY-MATERIAL".into(),
        };
        let tls = ClientTls {
            ca: b.into(),
            cert_key: ck.clone(),
            server_name: None,
        };
        let state = CaState {
            issuing: ck.clone(),
            next: Some(ck.clone()),
            retiring: None,
        };
        for text in [
            format!("{ck:?}"),
            format!("{tls:?}"),
            format!("{state:?}"),
            format!(
                "{:?}",
                RoleFiles {
                    cert_key: ck.clone(),
                    ca: b.into()
                }
            ),
        ] {
            assert!(!text.contains("SECRET"), "{text}");
        }
    }
}
