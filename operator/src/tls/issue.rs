//! Issuing certificates (rcgen, ECDSA P-256): a CA per cluster, and
//! certificates it signs for members (server and client use, for the
//! member's names and addresses) and for clients (client use only).

use std::net::IpAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};

use super::{CertKey, Error, Result};

/// How a certificate may be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Usage {
    /// A member: serves TLS and dials its peers with the same certificate.
    Member,
    /// A client of etcd (the operator, tools, users).
    Client,
}

/// How far back a new certificate's validity starts: a tenth of its
/// validity, at most 5 minutes, so a clock a little behind still accepts
/// it.
pub fn backdate(validity: Duration) -> Duration {
    (validity / 10).min(Duration::from_secs(300))
}

fn time(t: SystemTime) -> time::OffsetDateTime {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
        .try_into()
        .unwrap_or(i64::MAX);
    time::OffsetDateTime::from_unix_timestamp(secs).unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

fn fail(what: &str) -> impl FnOnce(rcgen::Error) -> Error + '_ {
    move |e| Error::Generate {
        what: what.to_string(),
        message: e.to_string(),
    }
}

fn serial() -> SerialNumber {
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] &= 0x7f; // a positive number
    SerialNumber::from_slice(&bytes)
}

fn name(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "etcd-operator");
    dn.push(DnType::CommonName, common_name);
    dn
}

/// A new self-signed CA for `cluster`, valid for `validity` from `now`.
pub fn new_ca(cluster: &str, validity: Duration, now: SystemTime) -> Result<CertKey> {
    let what = format!("the CA of cluster {cluster}");
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(fail(&what))?;
    let mut params = CertificateParams::default();
    params.distinguished_name = name(&format!("etcd-operator CA for {cluster}"));
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.serial_number = Some(serial());
    params.not_before = time(now - backdate(validity));
    params.not_after = time(now + validity);
    let cert = params.self_signed(&key).map_err(fail(&what))?;
    Ok(CertKey {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// A certificate for `subject` with these names (DNS names or IP
/// addresses), signed by `ca`, valid for `validity` from `now` but not
/// beyond the CA's own end (`ca_not_after`).
pub fn issue(
    ca: &CertKey,
    ca_not_after: SystemTime,
    subject: &str,
    names: &[String],
    usage: Usage,
    validity: Duration,
    now: SystemTime,
) -> Result<CertKey> {
    let what = format!("a certificate for {subject}");
    let ca_key = KeyPair::from_pem(&ca.key).map_err(fail(&what))?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert, ca_key).map_err(fail(&what))?;
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(fail(&what))?;
    let mut params = CertificateParams::default();
    params.distinguished_name = name(subject);
    let mut sans = Vec::new();
    for n in names {
        let san = match n.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(n.clone().try_into().map_err(fail(&what))?),
        };
        if !sans.contains(&san) {
            sans.push(san);
        }
    }
    params.subject_alt_names = sans;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = match usage {
        Usage::Member => vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        Usage::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
    };
    params.use_authority_key_identifier_extension = true;
    params.serial_number = Some(serial());
    params.not_before = time(now - backdate(validity));
    params.not_after = time((now + validity).min(ca_not_after));
    let cert = params.signed_by(&key, &issuer).map_err(fail(&what))?;
    Ok(CertKey {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::inspect::{self, CertInfo};

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn a_member_certificate_names_its_hosts_and_is_signed_by_its_ca() {
        let now = SystemTime::now();
        let ca = new_ca("demo", 10 * DAY, now).expect("ca");
        let ca_info = CertInfo::parse("ca", &ca.cert).expect("parse ca");
        assert!(ca_info.is_ca);
        let names = vec!["127.1.2.3".to_string(), "demo-0".to_string()];
        let leaf = issue(
            &ca,
            ca_info.not_after,
            "demo-0",
            &names,
            Usage::Member,
            DAY,
            now,
        )
        .expect("leaf");
        let info = CertInfo::parse("leaf", &leaf.cert).expect("parse leaf");
        assert!(!info.is_ca && info.server_auth && info.client_auth);
        assert!(info.covers("127.1.2.3") && info.covers("demo-0"));
        assert!(!info.covers("127.1.2.4"));
        assert!(inspect::signed_by(&leaf.cert, &ca.cert));
        let other = new_ca("other", DAY, now).expect("ca");
        assert!(!inspect::signed_by(&leaf.cert, &other.cert));
        inspect::key_matches("leaf", &leaf).expect("its own key");
        let wrong = CertKey {
            cert: leaf.cert.clone(),
            key: other.key.clone(),
        };
        assert!(matches!(
            inspect::key_matches("leaf", &wrong),
            Err(Error::KeyMismatch { .. })
        ));
        // Valid for a day from now, started a little before.
        let life = info
            .not_after
            .duration_since(info.not_before)
            .expect("ordered");
        assert_eq!(life, DAY + backdate(DAY));
    }

    #[test]
    fn a_certificate_never_outlives_its_ca_and_clients_only_authenticate() {
        let now = SystemTime::now();
        let ca = new_ca("demo", DAY, now).expect("ca");
        let ca_end = CertInfo::parse("ca", &ca.cert).expect("ca").not_after;
        let leaf = issue(&ca, ca_end, "tool", &[], Usage::Client, 30 * DAY, now).expect("leaf");
        let info = CertInfo::parse("leaf", &leaf.cert).expect("parse");
        assert_eq!(info.not_after, ca_end);
        assert!(info.client_auth && !info.server_auth);
    }
}
