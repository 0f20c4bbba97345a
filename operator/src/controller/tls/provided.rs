//! Certificates a user provides (`mode: Provided`), checked before members
//! are given them: valid, usable, covering every member's address (also of
//! a member about to be added), and brought in trust first: a new CA bundle
//! reaches every member (a rolling restart) before a leaf it signs does.

use std::time::SystemTime;

use super::{Cluster, Role};
use crate::member::MemberAddr;
use crate::platform::Platform;
use crate::platform::tls_store::Provided;
use crate::tls::CertKey;
use crate::tls::inspect::{self, CertInfo};

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

/// The leaf to install (or to present as the operator) for a provided set
/// `p`, where `current` is the one in use. While members do not all trust
/// the provided CA bundle yet (`settled` false), a new leaf signed by a new
/// CA would be refused by the members that still trust only the old one:
/// the current leaf stays while the new bundle still trusts it, and the new
/// one follows once the bundle reached every member. A current leaf the new
/// bundle does not trust (the old CA dropped at once) cannot stay.
pub(super) fn leaf(p: &Provided, current: Option<&CertKey>, settled: bool) -> CertKey {
    match current {
        Some(c) if !settled && *c != p.cert_key && inspect::signed_by(&c.cert, &p.ca) => c.clone(),
        _ => p.cert_key.clone(),
    }
}

impl<P: Platform> Cluster<P> {
    /// Why the provided certificates cannot serve the member at `addr`
    /// (its host is not among their names), in words naming the field,
    /// the file and the address to add; `None` when they can (or nothing
    /// is provided).
    pub(in crate::controller) fn uncovered(&self, addr: &MemberAddr) -> Option<String> {
        for role in [Role::Peer, Role::Client] {
            let Some(p) = self.tls.provided.get(role.name()) else {
                continue;
            };
            let Ok(info) = CertInfo::parse(&p.what("tls.crt"), &p.cert_key.cert) else {
                continue;
            };
            let extra = match role {
                Role::Peer => self.platform.peer_source_names(),
                Role::Client => Vec::new(),
            };
            let url = match role {
                Role::Peer => &addr.peer_url,
                Role::Client => &addr.client_url,
            };
            let host = crate::tls::url_host(url).unwrap_or_default().to_string();
            let missing = std::iter::once(host)
                .chain(extra.iter().cloned())
                .find(|h| !h.is_empty() && !info.covers(h));
            if let Some(host) = missing {
                return Some(format!(
                    "spec.tls.{}: {}",
                    role.name(),
                    crate::tls::Error::NotCovered {
                        what: p.what("tls.crt"),
                        member: addr.name.clone(),
                        host,
                        sans: info.names(),
                    }
                ));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::tls::issue::{self, Usage};

    fn provided(ca: &str, leaf: &CertKey) -> Provided {
        Provided {
            ca: ca.to_string(),
            cert_key: leaf.clone(),
            place: "certs".into(),
        }
    }

    #[test]
    fn a_new_leaf_waits_for_the_new_trust_and_an_untrusted_old_one_cannot_stay() {
        let now = SystemTime::now();
        let day = Duration::from_secs(86_400);
        let old_ca = issue::new_ca("old", day, now).expect("ca");
        let new_ca = issue::new_ca("new", day, now).expect("ca");
        let names = ["127.0.0.1".to_string()];
        let old =
            issue::issue(&old_ca, now + day, "m", &names, Usage::Member, day, now).expect("leaf");
        let new =
            issue::issue(&new_ca, now + day, "m", &names, Usage::Member, day, now).expect("leaf");
        let both = provided(&format!("{}{}", new_ca.cert, old_ca.cert), &new);
        // Members do not all trust the new bundle yet: the old leaf stays.
        assert_eq!(leaf(&both, Some(&old), false), old);
        // They do: the new leaf goes in.
        assert_eq!(leaf(&both, Some(&old), true), new);
        // Nothing installed yet: the provided leaf.
        assert_eq!(leaf(&both, None, false), new);
        // The old CA dropped at once: the old leaf cannot stay.
        let only_new = provided(&new_ca.cert, &new);
        assert_eq!(leaf(&only_new, Some(&old), false), new);
    }
}
