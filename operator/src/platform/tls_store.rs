//! The TLS port: where a platform keeps a cluster's CAs, a member's
//! certificate files and the client certificate for tools, and where it
//! reads certificates a user provides. Locally these are files under the
//! state folder (keys owner-only, mode 0600); on Kubernetes, Secrets (a
//! member's is mounted in its pod).

use std::future::Future;

use super::Result;
use crate::member::MemberAddr;
use crate::tls::{CaState, CertKey, MemberFiles};

/// Certificates a user provides (`mode: Provided`): a CA bundle and one
/// certificate with its key, used by every member (and by the operator as
/// its client certificate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provided {
    /// `ca.crt`: the CAs to trust.
    pub ca: String,
    /// `tls.crt` and `tls.key`.
    pub cert_key: CertKey,
    /// Where they came from (a folder, or `secret NAMESPACE/NAME`), for
    /// messages: `FILE in WHERE`.
    pub place: String,
}

impl Provided {
    /// How a message names one of its files (`tls.crt in /certs`).
    pub fn what(&self, file: &str) -> String {
        format!("{file} in {}", self.place)
    }
}

/// A client certificate for tools and users (etcdctl, `etcd-operator
/// backup`, the chaos monkey, the soak runner) and the CAs to trust.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientFiles {
    /// The CA bundle that signed the members' certificates.
    pub ca: String,
    /// Certificate and key.
    pub cert_key: CertKey,
}

/// Where the client certificate for tools was put, for the status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientPlace {
    /// The CA file (local platform).
    pub ca_file: Option<String>,
    /// The certificate file (local platform).
    pub cert_file: Option<String>,
    /// The key file (local platform).
    pub key_file: Option<String>,
    /// A `kubernetes.io/tls` Secret with `ca.crt` (Kubernetes).
    pub secret: Option<String>,
}

/// Where a platform keeps TLS material. Every call names its cluster; a
/// write replaces what was there at once (a reader sees the old files or
/// the new ones, never half of each).
pub trait TlsStore: Send + Sync {
    /// The cluster's CAs (issued by the operator), if made yet.
    fn load_ca(&self, cluster: &str) -> impl Future<Output = Result<Option<CaState>>> + Send;
    /// Saves the cluster's CAs.
    fn save_ca(&self, cluster: &str, ca: &CaState) -> impl Future<Output = Result<()>> + Send;
    /// The TLS files installed for a member, if any.
    fn member_files(
        &self,
        cluster: &str,
        member: &str,
    ) -> impl Future<Output = Result<Option<MemberFiles>>> + Send;
    /// Installs a member's TLS files where its etcd reads them (a folder
    /// beside its data locally; a Secret mounted in its pod on
    /// Kubernetes). A running etcd reads new certificates on its next
    /// connection; CAs only when it starts.
    fn install_member_files(
        &self,
        cluster: &str,
        member: &str,
        files: &MemberFiles,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Reads certificates a user provides: `ca.crt`, `tls.crt` and
    /// `tls.key` from `source` (a folder locally; the name of a
    /// `kubernetes.io/tls` Secret on Kubernetes).
    fn provided(
        &self,
        cluster: &str,
        source: &str,
    ) -> impl Future<Output = Result<Provided>> + Send;
    /// The client certificate for tools installed now, if any.
    fn client_files(
        &self,
        cluster: &str,
    ) -> impl Future<Output = Result<Option<ClientFiles>>> + Send;
    /// Installs the client certificate for tools and users; says where.
    fn install_client_files(
        &self,
        cluster: &str,
        files: &ClientFiles,
    ) -> impl Future<Output = Result<ClientPlace>> + Send;
    /// Where the client certificate for tools is (whether installed or not).
    fn client_place(&self, cluster: &str) -> ClientPlace;
    /// The names (DNS names and IP addresses) a member's certificate must
    /// cover: the hosts of its URLs and the other names clients reach it
    /// by on this platform.
    fn member_names(&self, cluster: &str, addr: &MemberAddr) -> Vec<String>;
    /// Addresses a member dials its peers from, which a peer certificate
    /// must name besides the member's own host (etcd checks a peer's
    /// certificate against the address it connects from). None by
    /// default: the member's own name covers it.
    fn peer_source_names(&self) -> Vec<String> {
        Vec::new()
    }
    /// The password of `user` of a standby's etcd auth
    /// ([`crate::standby::auth`]), made at random and kept the first time
    /// it is asked for, and where a user reads it (a file locally, a
    /// Secret on Kubernetes).
    fn standby_password(
        &self,
        cluster: &str,
        user: &str,
    ) -> impl Future<Output = Result<(String, crate::standby::auth::PasswordPlace)>> + Send {
        let what = format!("no password for {user} of the standby {cluster}");
        async move {
            Err(crate::platform::Error::Io {
                what,
                source: std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "this platform keeps no standby passwords",
                ),
            })
        }
    }
}
