//! The rest of a TLS pass: the tools' client certificate (installed and
//! renewed like the members'), the CA rotation's stages, and the status
//! that says where TLS stands.

use std::time::SystemTime;

use super::super::Cluster;
use super::{Role, ca_end, provided, source};
use crate::crd::TlsStatus;
use crate::observe::Observation;
use crate::platform::Platform;
use crate::platform::tls_store::ClientFiles;
use crate::tls::inspect::{self, CertInfo};
use crate::tls::issue::{self, Usage};
use crate::tls::{CaState, ClientTls};
use crate::validate::{TlsPolicy, TlsSource};

impl<P: Platform> Cluster<P> {
    /// The tools' client certificate: installed while client TLS is on,
    /// renewed like the members'.
    pub(super) async fn tls_tools(
        &mut self,
        policy: &TlsPolicy,
        now: SystemTime,
        all_current: &mut bool,
    ) {
        let Some(src) = source(policy, Role::Client).cloned() else {
            return;
        };
        let have = self.tools_files().await;
        let want = match src {
            TlsSource::Provided { .. } => self.tls.provided.get("client").map(|p| ClientFiles {
                ca: p.ca.clone(),
                cert_key: p.cert_key.clone(),
            }),
            TlsSource::Auto => {
                let Some(ca) = self.tls.ca.clone() else {
                    return;
                };
                let fresh = have.clone().filter(|h| {
                    h.ca == ca.bundle()
                        && inspect::signed_by(&h.cert_key.cert, &ca.issuing.cert)
                        && CertInfo::parse("", &h.cert_key.cert).is_ok_and(|i| !i.renewal_due(now))
                });
                fresh.or_else(|| {
                    issue::issue(
                        &ca.issuing,
                        ca_end(&ca.issuing),
                        &format!("{}-client", self.name),
                        &[],
                        Usage::Client,
                        policy.certificate_validity,
                        now,
                    )
                    .ok()
                    .map(|cert_key| ClientFiles {
                        ca: ca.bundle(),
                        cert_key,
                    })
                })
            }
        };
        let Some(want) = want else { return };
        if have.as_ref() != Some(&want) {
            match self.platform.install_client_files(&self.name, &want).await {
                Ok(_) => self.tls.tools = Some(want.clone()),
                Err(e) => {
                    tracing::warn!(cluster = %self.name, "cannot install the client certificate for tools: {e}")
                }
            }
        }
        if let Some(ca) = &self.tls.ca {
            let tools_current = self
                .tls
                .tools
                .as_ref()
                .is_some_and(|t| inspect::signed_by(&t.cert_key.cert, &ca.issuing.cert));
            let operator_current = self
                .tls
                .operator
                .as_ref()
                .is_none_or(|o| inspect::signed_by(&o.cert_key.cert, &ca.issuing.cert));
            *all_current &= tools_current && operator_current;
        }
    }

    /// Moves a CA rotation on: the new CA issues once every member trusts
    /// it; the old one goes once nothing it signed is in use. Returns
    /// whether the trusted CAs changed.
    pub(super) async fn tls_rotate(&mut self, all_trust: bool, all_current: bool) -> bool {
        let Some(ca) = &mut self.tls.ca else {
            return false;
        };
        let mut trust_changed = false;
        if let Some(next) = ca.next.clone().filter(|_| all_trust) {
            ca.retiring = Some(std::mem::replace(&mut ca.issuing, next).cert);
            ca.next = None;
            tracing::info!(cluster = %self.name, "CA rotation: every member trusts the new CA; it issues from now on (certificates are renewed without restarts)");
        } else if ca.retiring.is_some() && ca.next.is_none() && all_trust && all_current {
            ca.retiring = None;
            trust_changed = true;
            tracing::info!(cluster = %self.name, "CA rotation: nothing signed by the old CA is in use; members stop trusting it (one restart each)");
        } else {
            return false;
        }
        let ca = ca.clone();
        if let Err(e) = self.platform.save_ca(&self.name, &ca).await {
            tracing::warn!(cluster = %self.name, "cannot save the cluster's CA: {e}");
        }
        trust_changed
    }

    pub(super) fn tls_status(&self, policy: &TlsPolicy, obs: &Observation) -> TlsStatus {
        let mode = |role| {
            source(policy, role)
                .map_or("Off", TlsSource::mode)
                .to_string()
        };
        let at = |t: SystemTime| humantime::format_rfc3339_seconds(t).to_string();
        let uses_tls = obs.platform.iter().any(|p| p.tls.peer || p.tls.client);
        let place = if policy.client.is_some() {
            self.platform.client_place(&self.name)
        } else {
            Default::default()
        };
        let ends = self
            .tls
            .installed
            .values()
            .flat_map(|f| [&f.peer, &f.client])
            .flatten()
            .filter_map(|r| CertInfo::parse("", &r.cert_key.cert).ok())
            .map(|i| i.not_after)
            .min();
        let change = match &self.tls.ca {
            Some(ca) if ca.next.is_some() => Some("CA rotation: trusting the new CA".to_string()),
            Some(ca) if ca.retiring.is_some() => {
                Some("CA rotation: issuing from the new CA".to_string())
            }
            _ if policy.any() != uses_tls => {
                Some("moving members to the spec's TLS one at a time".into())
            }
            _ => None,
        };
        TlsStatus {
            peer: mode(Role::Peer),
            client: mode(Role::Client),
            ca_file: place.ca_file,
            client_cert_file: place.cert_file,
            client_key_file: place.key_file,
            client_secret: place.secret,
            ca_not_after: self.tls.ca.as_ref().map(|c| at(ca_end(&c.issuing))),
            certificates_not_after: ends.map(at),
            change,
        }
    }
}

impl<P: Platform> Cluster<P> {
    /// The operator's own client certificate: issued from the cluster's CA,
    /// or the one a user provided for clients, or (while TLS is being
    /// turned off) the tools' certificate left installed.
    pub(super) async fn ensure_operator_identity(&mut self, policy: &TlsPolicy, now: SystemTime) {
        let ca_bundle = self.tls.ca.as_ref().map(CaState::bundle);
        let wanted = match source(policy, Role::Client) {
            Some(TlsSource::Provided { .. }) => {
                let settled = self.tls.trust_settled(policy);
                let current = self.tls.operator.as_ref().map(|o| &o.cert_key);
                self.tls.provided.get("client").map(|p| ClientTls {
                    ca: p.ca.clone(),
                    cert_key: provided::leaf(p, current, settled),
                    server_name: None,
                })
            }
            _ => match &self.tls.ca {
                Some(ca) => {
                    let current = self.tls.operator.as_ref().filter(|o| {
                        Some(&o.ca) == ca_bundle.as_ref()
                            && inspect::signed_by(&o.cert_key.cert, &ca.issuing.cert)
                            && CertInfo::parse("", &o.cert_key.cert)
                                .is_ok_and(|i| !i.renewal_due(now))
                    });
                    match current {
                        Some(c) => Some(c.clone()),
                        None => issue::issue(
                            &ca.issuing,
                            ca_end(&ca.issuing),
                            "etcd-operator",
                            &[],
                            Usage::Client,
                            policy.certificate_validity,
                            now,
                        )
                        .ok()
                        .map(|cert_key| ClientTls {
                            ca: ca.bundle(),
                            cert_key,
                            server_name: None,
                        }),
                    }
                }
                None => self.tools_files().await.map(|t| ClientTls {
                    ca: t.ca,
                    cert_key: t.cert_key,
                    server_name: None,
                }),
            },
        };
        if wanted.is_some() {
            self.tls.operator = wanted;
        }
    }
}
