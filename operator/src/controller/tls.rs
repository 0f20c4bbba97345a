//! The controller's side of TLS: the cluster's CA (made, rotated), the
//! certificates a user provides (read and checked), which members need new
//! certificates, the files installed for members and for tools (through
//! the platform's [`TlsStore`]), and the operator's own client certificate.
//!
//! A CA rotation moves in three stages, each finished before the next:
//! a new CA is trusted beside the old one (members restart to read it),
//! then it issues every certificate (renewed in place, no restart), then
//! the old one is dropped (members restart again).

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use super::{Cluster, SpecState};
use crate::crd::TlsStatus;
use crate::member::MemberAddr;
use crate::observe::Observation;
use crate::plan::{TlsState, TlsWanted};
use crate::platform::Platform;
use crate::platform::tls_store::{ClientFiles, Provided};
use crate::tls::inspect::{self, CertInfo};
use crate::tls::issue::{self, Usage};
use crate::tls::{CaState, CertKey, ClientTls, MemberFiles, RoleFiles, bundle, trust_id};
use crate::validate::{TlsPolicy, TlsSource, ValidSpec};

mod lifecycle;
mod provided;

use provided::check_provided;

/// How often certificates a user provides are read again (to notice a
/// renewal, by cert-manager for example).
const PROVIDED_REFRESH: Duration = Duration::from_secs(10);

/// Peer or client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Peer,
    Client,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Peer => "peer",
            Role::Client => "client",
        }
    }
}

/// What the controller keeps about a cluster's TLS between passes.
#[derive(Debug, Default)]
pub(super) struct Tls {
    ca: Option<CaState>,
    ca_loaded: bool,
    provided: HashMap<&'static str, Provided>,
    provided_at: Option<Instant>,
    /// What is installed for each member, as last written or read.
    installed: HashMap<String, MemberFiles>,
    /// The tools' client files, as last written or read.
    tools: Option<ClientFiles>,
    tools_loaded: bool,
    /// The operator's own client certificate.
    operator: Option<ClientTls>,
    /// What keeps TLS from working (a user's certificate that does not
    /// fit): nothing is acted on while set.
    pub(super) problem: Option<String>,
    pub(super) status: Option<TlsStatus>,
    /// What the spec asks for, as the plan last saw it.
    pub(super) wanted: TlsWanted,
    /// A member used TLS at the last observation (so its CAs and client
    /// certificate are needed, even with spec.tls gone).
    members_use_tls: bool,
    /// The trust (fingerprint of the CAs) every member was last seen
    /// running with: until the trust the spec asks for is settled so,
    /// provided leaf certificates stay as installed ([`provided`]).
    settled_trust: Option<String>,
}

fn source(policy: &TlsPolicy, role: Role) -> Option<&TlsSource> {
    match role {
        Role::Peer => policy.peer.as_ref(),
        Role::Client => policy.client.as_ref(),
    }
}

fn ca_end(ca: &CertKey) -> SystemTime {
    CertInfo::parse("the cluster's CA", &ca.cert)
        .map(|i| i.not_after)
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

impl Tls {
    /// The CA bundle a role's members trust, and whether it comes from the
    /// operator's CA.
    fn trust_bundle(&self, policy: &TlsPolicy, role: Role) -> Option<String> {
        match source(policy, role)? {
            TlsSource::Auto => self.ca.as_ref().map(CaState::bundle),
            TlsSource::Provided { .. } => self
                .provided
                .get(role.name())
                .map(|p| bundle([p.ca.as_str()].into_iter())),
        }
    }

    /// The fingerprint of every CA members must trust.
    pub(super) fn trust(&self, policy: &TlsPolicy) -> String {
        if !policy.any() {
            return String::new();
        }
        let peer = self.trust_bundle(policy, Role::Peer).unwrap_or_default();
        let client = self.trust_bundle(policy, Role::Client).unwrap_or_default();
        trust_id(&format!("{peer}|{client}"))
    }

    /// Whether every member runs trusting the CAs `policy` asks for.
    fn trust_settled(&self, policy: &TlsPolicy) -> bool {
        self.settled_trust.as_deref() == Some(self.trust(policy).as_str())
    }

    /// The operator's client certificate, for https members.
    pub(super) fn client(&self) -> Option<&ClientTls> {
        self.operator.as_ref()
    }
}

impl<P: Platform> Cluster<P> {
    fn policy(&self) -> Option<TlsPolicy> {
        match &self.spec {
            SpecState::Valid { spec, .. } => Some(spec.tls.clone()),
            SpecState::Invalid { .. } => None,
        }
    }

    /// Before observing: loads or makes the CA, reads and checks provided
    /// certificates, starts a CA rotation when due, and readies the
    /// operator's client certificate. A problem is kept in `tls.problem`.
    pub(super) async fn tls_prepare(&mut self, spec: &ValidSpec) {
        let now = SystemTime::now();
        let policy = &spec.tls;
        self.tls.problem = None;
        let result = self.tls_prepare_inner(policy, now).await;
        if let Err(message) = result {
            if self.tls.problem.as_deref() != Some(message.as_str()) {
                tracing::error!(cluster = %self.name, "TLS: {message}");
            }
            self.tls.problem = Some(message);
        }
    }

    async fn tls_prepare_inner(
        &mut self,
        policy: &TlsPolicy,
        now: SystemTime,
    ) -> Result<(), String> {
        let auto = [Role::Peer, Role::Client]
            .iter()
            .any(|r| source(policy, *r) == Some(&TlsSource::Auto));
        if !policy.any() && !self.tls.members_use_tls {
            // No TLS anywhere: nothing to read.
            return Ok(());
        }
        if !self.tls.ca_loaded {
            self.tls.ca = self
                .platform
                .load_ca(&self.name)
                .await
                .map_err(|e| format!("cannot read the cluster's CA: {e}"))?;
            self.tls.ca_loaded = true;
        }
        if auto {
            self.ensure_ca(policy, now).await?;
        }
        let stale = self
            .tls
            .provided_at
            .is_none_or(|t| t.elapsed() >= PROVIDED_REFRESH);
        if stale {
            self.tls.provided.clear();
            for role in [Role::Peer, Role::Client] {
                let Some(TlsSource::Provided { path, secret_name }) = source(policy, role) else {
                    continue;
                };
                let field = format!("spec.tls.{}", role.name());
                let from = path
                    .as_deref()
                    .or(secret_name.as_deref())
                    .unwrap_or_default();
                let p = self
                    .platform
                    .provided(&self.name, from)
                    .await
                    .map_err(|e| format!("{field}: {e}"))?;
                check_provided(&p, role, now).map_err(|e| format!("{field}: {e}"))?;
                self.tls.provided.insert(role.name(), p);
            }
            self.tls.provided_at = Some(Instant::now());
        }
        // The names of every member (and every member about to be
        // created) must be covered by provided certificates.
        for addr in self.known_addrs().await {
            if let Some(message) = self.uncovered(&addr) {
                return Err(message);
            }
        }
        self.ensure_operator_identity(policy, now).await;
        Ok(())
    }

    /// Members on the platform and those the record will bootstrap.
    async fn known_addrs(&self) -> Vec<MemberAddr> {
        let mut out: Vec<MemberAddr> = self.record.initial.clone();
        if let Ok(members) = self.platform.members(&self.name).await {
            for m in members {
                if !out.iter().any(|a| a.name == m.addr.name) {
                    out.push(m.addr);
                }
            }
        }
        out
    }

    /// Makes the CA if there is none; brings in a new one when two thirds
    /// of the issuing CA's validity passed.
    async fn ensure_ca(&mut self, policy: &TlsPolicy, now: SystemTime) -> Result<(), String> {
        let fresh =
            |name: &str| issue::new_ca(name, policy.ca_validity, now).map_err(|e| e.to_string());
        let mut changed = false;
        match &mut self.tls.ca {
            None => {
                self.tls.ca = Some(CaState {
                    issuing: fresh(&self.name)?,
                    next: None,
                    retiring: None,
                });
                tracing::info!(cluster = %self.name, "created the cluster's CA");
                changed = true;
            }
            Some(ca) if ca.next.is_none() && ca.retiring.is_none() => {
                let info = CertInfo::parse("the cluster's CA", &ca.issuing.cert)
                    .map_err(|e| e.to_string())?;
                if info.renewal_due(now) {
                    ca.next = Some(fresh(&self.name)?);
                    tracing::info!(
                        cluster = %self.name,
                        "CA rotation: a new CA is trusted beside the current one (members restart \
                         one at a time to read it)"
                    );
                    changed = true;
                }
            }
            Some(_) => {}
        }
        if changed && let Some(ca) = &self.tls.ca {
            self.platform
                .save_ca(&self.name, ca)
                .await
                .map_err(|e| format!("cannot save the cluster's CA: {e}"))?;
        }
        Ok(())
    }

    async fn tools_files(&mut self) -> Option<ClientFiles> {
        if !self.tls.tools_loaded {
            self.tls.tools = self.platform.client_files(&self.name).await.ok().flatten();
            self.tls.tools_loaded = true;
        }
        self.tls.tools.clone()
    }

    async fn installed(&mut self, member: &str) -> Option<MemberFiles> {
        if !self.tls.installed.contains_key(member)
            && let Ok(Some(f)) = self.platform.member_files(&self.name, member).await
        {
            self.tls.installed.insert(member.to_string(), f);
        }
        self.tls.installed.get(member).cloned()
    }

    /// The files a member with `state` (its current or next TLS) should
    /// have now. Roles the spec no longer asks for keep what is installed.
    fn wanted_files(
        &self,
        policy: &TlsPolicy,
        addr: &MemberAddr,
        state: &TlsState,
        installed: Option<&MemberFiles>,
        now: SystemTime,
    ) -> Result<MemberFiles, String> {
        let mut out = MemberFiles::default();
        for role in [Role::Peer, Role::Client] {
            let uses = match role {
                Role::Peer => state.files.peer,
                Role::Client => state.files.client,
            };
            if !uses {
                continue;
            }
            let have = installed.and_then(|i| match role {
                Role::Peer => i.peer.clone(),
                Role::Client => i.client.clone(),
            });
            let files = match source(policy, role) {
                None => have,
                Some(TlsSource::Provided { .. }) => {
                    let settled = self.tls.trust_settled(policy);
                    self.tls.provided.get(role.name()).map(|p| RoleFiles {
                        cert_key: provided::leaf(p, have.as_ref().map(|h| &h.cert_key), settled),
                        ca: bundle([p.ca.as_str()].into_iter()),
                    })
                }
                Some(TlsSource::Auto) => {
                    let ca = self.tls.ca.as_ref().ok_or("the cluster has no CA yet")?;
                    let names = self.platform.member_names(&self.name, addr);
                    let fresh = have.filter(|h| {
                        h.ca == ca.bundle()
                            && inspect::signed_by(&h.cert_key.cert, &ca.issuing.cert)
                            && CertInfo::parse("", &h.cert_key.cert).is_ok_and(|i| {
                                !i.renewal_due(now) && names.iter().all(|n| i.covers(n))
                            })
                    });
                    match fresh {
                        Some(f) => Some(f),
                        None => Some(RoleFiles {
                            cert_key: issue::issue(
                                &ca.issuing,
                                ca_end(&ca.issuing),
                                &addr.name,
                                &names,
                                Usage::Member,
                                policy.certificate_validity,
                                now,
                            )
                            .map_err(|e| e.to_string())?,
                            ca: ca.bundle(),
                        }),
                    }
                }
            };
            match role {
                Role::Peer => out.peer = files,
                Role::Client => out.client = files,
            }
        }
        Ok(out)
    }

    /// Installs (when they differ) the files a member with `state` needs.
    pub(super) async fn tls_install(
        &mut self,
        addr: &MemberAddr,
        state: &TlsState,
    ) -> Result<(), crate::platform::Error> {
        let Some(policy) = self.policy() else {
            return Ok(());
        };
        if !(state.files.peer || state.files.client) {
            // No TLS files for this state; files left from an earlier one
            // are harmless (etcd is not told of them).
            return Ok(());
        }
        let installed = self.installed(&addr.name).await;
        let now = SystemTime::now();
        let want = self
            .wanted_files(&policy, addr, state, installed.as_ref(), now)
            .map_err(|e| {
                crate::platform::Error::Version(format!("TLS files of {}: {e}", addr.name))
            })?;
        if want == MemberFiles::default() && installed.is_none() {
            return Ok(());
        }
        if installed.as_ref() != Some(&want) {
            self.platform
                .install_member_files(&self.name, &addr.name, &want)
                .await?;
            tracing::info!(cluster = %self.name, member = %addr.name, "installed TLS files");
            self.tls.installed.insert(addr.name.clone(), want);
        }
        Ok(())
    }

    /// After observing: which members need new certificates, the next CA
    /// rotation stage, the tools' client certificate, and the status.
    pub(super) async fn tls_observed(
        &mut self,
        obs: &mut Observation,
        spec: &ValidSpec,
    ) -> TlsWanted {
        let policy = &spec.tls;
        let now = SystemTime::now();
        self.tls.members_use_tls = obs
            .platform
            .iter()
            .any(|p| p.tls.peer || p.tls.client || crate::tls::is_https(&p.addr.client_url));
        let mut wanted = TlsWanted {
            peer: policy.peer.is_some(),
            client: policy.client.is_some(),
            trust: self.tls.trust(policy),
        };
        if self.tls.problem.is_some() || !(policy.any() || self.tls.members_use_tls) {
            // While a provided certificate is unusable the status still says
            // what the spec asks for and what runs.
            let shown = self.tls.problem.is_some() && (policy.any() || self.tls.members_use_tls);
            self.tls.status = shown.then(|| self.tls_status(policy, obs));
            self.tls.wanted = wanted.clone();
            return wanted;
        }
        let mut all_current = true;
        let all_trust = !obs.observed.members.is_empty()
            && obs
                .observed
                .members
                .iter()
                .filter_map(|m| m.platform.as_ref())
                .all(|p| {
                    p.tls.files.trust == wanted.trust || !(p.tls.files.peer || p.tls.files.client)
                });
        if all_trust {
            self.tls.settled_trust = Some(wanted.trust.clone());
        }
        for m in &mut obs.observed.members {
            let Some(p) = m.platform.as_mut() else {
                continue;
            };
            let Some(addr) = obs
                .platform
                .iter()
                .find(|x| x.addr.name == m.name)
                .map(|x| x.addr.clone())
            else {
                continue;
            };
            let installed = self.installed(&m.name).await;
            let want = self.wanted_files(policy, &addr, &p.tls, installed.as_ref(), now);
            p.certs_due = match &want {
                Ok(w) => *w != MemberFiles::default() && installed.as_ref() != Some(w),
                Err(_) => false,
            };
            if let (Some(ca), Some(i)) = (&self.tls.ca, &installed) {
                let signed = [&i.peer, &i.client]
                    .into_iter()
                    .flatten()
                    .all(|r| inspect::signed_by(&r.cert_key.cert, &ca.issuing.cert));
                all_current &= signed;
            }
        }
        self.tls_tools(policy, now, &mut all_current).await;
        if self.tls_rotate(all_trust, all_current).await {
            wanted.trust = self.tls.trust(policy);
        }
        self.tls.status = Some(self.tls_status(policy, obs));
        self.tls.wanted = wanted.clone();
        wanted
    }
}
