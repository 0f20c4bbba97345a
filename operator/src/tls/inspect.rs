//! What the operator checks of a certificate, its own or a user's:
//! validity, the names it covers, its use, who signed it, and that its key
//! belongs to it. Every error names the certificate (`what`: a file or a
//! Secret key), never its content.

use std::net::IpAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::pem::Pem;

use super::{CertKey, Error, Result};

/// What the operator reads from a certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertInfo {
    /// Start of validity.
    pub not_before: SystemTime,
    /// End of validity.
    pub not_after: SystemTime,
    /// DNS names among its SANs.
    pub dns: Vec<String>,
    /// IP addresses among its SANs.
    pub ips: Vec<IpAddr>,
    /// A CA certificate.
    pub is_ca: bool,
    /// May serve TLS (no extended key usage counts as any).
    pub server_auth: bool,
    /// May authenticate a client.
    pub client_auth: bool,
}

fn to_time(ts: i64) -> SystemTime {
    match u64::try_from(ts) {
        Ok(s) => UNIX_EPOCH + Duration::from_secs(s),
        Err(_) => UNIX_EPOCH,
    }
}

fn pems(what: &str, text: &str) -> Result<Vec<Pem>> {
    let unreadable = |message: String| Error::Unreadable {
        what: what.to_string(),
        message,
    };
    let mut out = Vec::new();
    for pem in Pem::iter_from_buffer(text.as_bytes()) {
        let pem = pem.map_err(|e| unreadable(format!("not PEM: {e}")))?;
        if pem.label == "CERTIFICATE" {
            out.push(pem);
        }
    }
    if out.is_empty() {
        return Err(unreadable("holds no PEM certificate".into()));
    }
    Ok(out)
}

fn parse<'a>(what: &str, pem: &'a Pem) -> Result<X509Certificate<'a>> {
    pem.parse_x509().map_err(|e| Error::Unreadable {
        what: what.to_string(),
        message: format!("not an X.509 certificate: {e}"),
    })
}

impl CertInfo {
    /// The first certificate of a PEM text.
    pub fn parse(what: &str, pem: &str) -> Result<Self> {
        let all = pems(what, pem)?;
        Self::of(&parse(what, &all[0])?)
    }

    /// Every certificate of a PEM bundle.
    pub fn parse_all(what: &str, pem: &str) -> Result<Vec<Self>> {
        pems(what, pem)?
            .iter()
            .map(|p| Self::of(&parse(what, p)?))
            .collect()
    }

    fn of(cert: &X509Certificate<'_>) -> Result<Self> {
        let mut dns = Vec::new();
        let mut ips = Vec::new();
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::DNSName(d) => dns.push(d.to_string()),
                    GeneralName::IPAddress(b) => {
                        if let Ok(v4) = <[u8; 4]>::try_from(*b) {
                            ips.push(IpAddr::from(v4));
                        } else if let Ok(v6) = <[u8; 16]>::try_from(*b) {
                            ips.push(IpAddr::from(v6));
                        }
                    }
                    _ => {}
                }
            }
        }
        let (server_auth, client_auth) = match cert.extended_key_usage() {
            Ok(Some(e)) => (
                e.value.any || e.value.server_auth,
                e.value.any || e.value.client_auth,
            ),
            _ => (true, true),
        };
        Ok(CertInfo {
            not_before: to_time(cert.validity().not_before.timestamp()),
            not_after: to_time(cert.validity().not_after.timestamp()),
            dns,
            ips,
            is_ca: cert.is_ca(),
            server_auth,
            client_auth,
        })
    }

    /// Whether a TLS client dialling `host` accepts this certificate's
    /// names: an IP address among its IP SANs, a name among its DNS SANs
    /// (a `*.` wildcard covering one label).
    pub fn covers(&self, host: &str) -> bool {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return self.ips.contains(&ip);
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.dns.iter().any(|d| {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            match d.strip_prefix("*.") {
                Some(suffix) => host
                    .split_once('.')
                    .is_some_and(|(first, rest)| !first.is_empty() && rest == suffix),
                None => d == host,
            }
        })
    }

    /// The names it covers, for messages.
    pub fn names(&self) -> String {
        let all: Vec<String> = self
            .dns
            .iter()
            .cloned()
            .chain(self.ips.iter().map(IpAddr::to_string))
            .collect();
        if all.is_empty() {
            "none".into()
        } else {
            all.join(", ")
        }
    }

    /// Whether two thirds of its validity have passed at `now`: time to
    /// renew it.
    pub fn renewal_due(&self, now: SystemTime) -> bool {
        now >= self.renew_at()
    }

    /// When two thirds of its validity have passed.
    pub fn renew_at(&self) -> SystemTime {
        let life = self
            .not_after
            .duration_since(self.not_before)
            .unwrap_or_default();
        self.not_before + life * 2 / 3
    }

    /// Fails when `now` is outside its validity.
    pub fn check_valid(&self, what: &str, now: SystemTime) -> Result<()> {
        let at = |t: SystemTime| humantime::format_rfc3339_seconds(t).to_string();
        if now >= self.not_after {
            return Err(Error::Validity {
                what: what.to_string(),
                message: format!("expired at {}", at(self.not_after)),
            });
        }
        if now < self.not_before {
            return Err(Error::Validity {
                what: what.to_string(),
                message: format!("not valid before {}", at(self.not_before)),
            });
        }
        Ok(())
    }
}

/// Whether `cert` (PEM) is signed by a CA of `bundle` (PEM).
pub fn signed_by(cert: &str, bundle: &str) -> bool {
    let (Ok(leaf), Ok(cas)) = (pems("", cert), pems("", bundle)) else {
        return false;
    };
    let Ok(leaf) = leaf[0].parse_x509() else {
        return false;
    };
    cas.iter().any(|ca| {
        ca.parse_x509().is_ok_and(|ca| {
            leaf.issuer() == ca.subject() && leaf.verify_signature(Some(ca.public_key())).is_ok()
        })
    })
}

/// Fails unless `pair.key` is the private key of `pair.cert` (RSA,
/// ECDSA or Ed25519; PKCS#1, SEC1 or PKCS#8 PEM).
pub fn key_matches(what: &str, pair: &CertKey) -> Result<()> {
    let key_what = format!("the key of {what}");
    if pair.key.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----")
        || pair.key.contains("Proc-Type: 4,ENCRYPTED")
    {
        return Err(Error::Unreadable {
            what: key_what,
            message: "the private key is encrypted (a passphrase protects it); etcd needs an \
                      unencrypted key: write it out with `openssl pkey -in KEY -out tls.key`"
                .into(),
        });
    }
    let key =
        PrivateKeyDer::from_pem_slice(pair.key.as_bytes()).map_err(|e| Error::Unreadable {
            what: key_what.clone(),
            message: format!("no PEM private key: {e}"),
        })?;
    let signer =
        rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| Error::Unreadable {
            what: key_what.clone(),
            message: format!("unsupported private key: {e}"),
        })?;
    let cert_pems = pems(what, &pair.cert)?;
    let cert = parse(what, &cert_pems[0])?;
    let matches = signer
        .public_key()
        .is_some_and(|spki| spki.as_ref() == cert.public_key().raw);
    if matches {
        Ok(())
    } else {
        Err(Error::KeyMismatch {
            what: what.to_string(),
            key: key_what,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(dns: &[&str], ips: &[&str]) -> CertInfo {
        CertInfo {
            not_before: UNIX_EPOCH,
            not_after: UNIX_EPOCH + Duration::from_secs(300),
            dns: dns.iter().map(|s| s.to_string()).collect(),
            ips: ips.iter().map(|s| s.parse().expect("ip")).collect(),
            is_ca: false,
            server_auth: true,
            client_auth: true,
        }
    }

    #[test]
    fn an_encrypted_key_is_named_as_such() {
        let pair = CertKey {
            cert: String::new(),
            key:
                "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"
                    .into(),
        };
        let e = key_matches("tls.crt in /certs", &pair).expect_err("refused");
        assert!(
            e.to_string().contains("the private key is encrypted"),
            "{e}"
        );
    }

    #[test]
    fn names_and_wildcards_cover_like_a_tls_client_checks() {
        let c = info(&["*.demo.ns.svc", "demo-client"], &["127.1.2.3"]);
        assert!(c.covers("demo-0.demo.ns.svc"));
        assert!(c.covers("DEMO-1.demo.ns.svc."));
        assert!(!c.covers("a.b.demo.ns.svc"), "one label only");
        assert!(!c.covers("demo.ns.svc"));
        assert!(c.covers("demo-client"));
        assert!(c.covers("127.1.2.3"));
        assert!(!c.covers("127.1.2.4"));
        assert_eq!(c.names(), "*.demo.ns.svc, demo-client, 127.1.2.3");
    }

    #[test]
    fn renewal_at_two_thirds_and_validity_bounds() {
        let c = info(&[], &[]);
        let at = |s| UNIX_EPOCH + Duration::from_secs(s);
        assert!(!c.renewal_due(at(199)));
        assert!(c.renewal_due(at(200)));
        assert!(c.check_valid("x", at(299)).is_ok());
        let e = c.check_valid("peer.crt", at(300)).expect_err("expired");
        assert!(
            e.to_string().starts_with("peer.crt: expired at 1970"),
            "{e}"
        );
    }

    #[test]
    fn garbage_is_named_not_quoted() {
        let e = CertInfo::parse("tls.crt in /x", "SECRET-GARBAGE").expect_err("no pem");
        assert!(e.to_string().starts_with("tls.crt in /x:"), "{e}");
        assert!(!e.to_string().contains("SECRET"), "{e}");
        let pair = CertKey {
            cert: "x".into(),
            key: "SECRET-KEY".into(),
        };
        let e = key_matches("tls.crt", &pair).expect_err("no key");
        assert!(!e.to_string().contains("SECRET"), "{e}");
    }
}
