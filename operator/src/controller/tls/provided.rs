//! Certificates a user provides (`mode: Provided`), checked before members
//! are given them.

use std::time::SystemTime;

use super::Role;
use crate::tls::inspect::{self, CertInfo};
use crate::tls::store::Provided;

/// Checks certificates a user provides: readable, the key is the
/// certificate's, valid now, signed by the given CA, usable by members
/// (server and client authentication).
pub(super) fn check_provided(
    p: &Provided,
    role: Role,
    now: SystemTime,
) -> Result<(), crate::tls::Error> {
    let cert = p.what("tls.crt");
    CertInfo::parse_all(&p.what("ca.crt"), &p.ca)?;
    let info = CertInfo::parse(&cert, &p.cert_key.cert)?;
    inspect::key_matches(&cert, &p.cert_key)?;
    info.check_valid(&cert, now)?;
    if !inspect::signed_by(&p.cert_key.cert, &p.ca) {
        return Err(crate::tls::Error::NotSigned {
            what: cert,
            ca: p.what("ca.crt"),
        });
    }
    let needs_client = true; // peers dial each other; the operator is a client
    if !info.server_auth || (needs_client && !info.client_auth) {
        return Err(crate::tls::Error::Usage {
            what: cert,
            message: format!(
                "its extended key usage must allow server and client authentication ({} \
                 certificates are served by members and presented by them and by the operator)",
                role.name()
            ),
        });
    }
    Ok(())
}
