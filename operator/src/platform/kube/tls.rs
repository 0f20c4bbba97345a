//! The Kubernetes platform's TLS material, in Secrets owned by the
//! cluster's resource (deleted with it):
//!
//! * `CLUSTER-etcd-ca`: the CAs the operator issues from (`ca.json`, keys
//!   included);
//! * `MEMBER-tls`: a member's files (`peer.crt`, `peer.key`, ...), mounted
//!   in its pod at [`super::pod::TLS_DIR`]; the kubelet updates the files when the
//!   Secret changes, and etcd reads certificates on each new connection;
//! * `CLUSTER-client-tls`: a `kubernetes.io/tls` Secret with `ca.crt`, a
//!   client certificate for tools and users;
//! * a user's own `kubernetes.io/tls` Secret (`mode: Provided`) is read,
//!   never written.
//!
//! Restarting a member with a changed configuration ([`KubePlatform::reconfigure_member`])
//! is here too: a TLS change is what asks for it.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::Patch;

use super::config::{self, ANNOTATION_CONFIG};
use super::members::owned_by;
use super::objects::{
    claim_name, client_service_name, cluster_labels, member_labels, meta, peer_service_name,
};
use super::pod::{member_pod, tls_secret_name};
use super::{Error, KubePlatform};
use crate::crd::StoragePolicy;
use crate::member::{MemberAddr, MemberConfig, MemberTls};
use crate::platform::Result;
use crate::platform::tls_store::{ClientFiles, ClientPlace, Provided, TlsStore};
use crate::tls::{CaState, CertKey, MemberFiles};

/// Key of the CA state in the CA Secret.
const CA_KEY: &str = "ca.json";

/// Name of the Secret holding a cluster's CAs.
pub fn ca_secret_name(cluster: &str) -> String {
    format!("{cluster}-etcd-ca")
}

/// Name of the Secret with a client certificate for tools and users.
pub fn client_secret_name(cluster: &str) -> String {
    format!("{cluster}-client-tls")
}

fn text(secret: &Secret, key: &str) -> Option<String> {
    let data = secret.data.as_ref()?.get(key)?;
    String::from_utf8(data.0.clone()).ok()
}

fn secret(
    name: String,
    labels: BTreeMap<String, String>,
    owner: &OwnerReference,
    type_: &str,
    data: &[(&str, &str)],
) -> Secret {
    Secret {
        metadata: meta(name, labels, owner),
        type_: Some(type_.into()),
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    }
}

/// The Secret holding a cluster's CAs (`CLUSTER-etcd-ca`, keys included).
pub fn ca_secret(cluster: &str, ca: &CaState, owner: &OwnerReference) -> Secret {
    let json = serde_json::to_string(ca).unwrap_or_default();
    secret(
        ca_secret_name(cluster),
        cluster_labels(cluster),
        owner,
        "Opaque",
        &[(CA_KEY, &json)],
    )
}

/// A member's TLS Secret (`MEMBER-tls`), mounted in its pod.
pub fn member_secret(
    cluster: &str,
    member: &str,
    files: &MemberFiles,
    owner: &OwnerReference,
) -> Secret {
    secret(
        tls_secret_name(member),
        member_labels(cluster, member),
        owner,
        "Opaque",
        &files.to_map(),
    )
}

/// The `kubernetes.io/tls` Secret with a client certificate for tools and
/// users (`CLUSTER-client-tls`, with `ca.crt`).
pub fn client_secret(cluster: &str, files: &ClientFiles, owner: &OwnerReference) -> Secret {
    secret(
        client_secret_name(cluster),
        cluster_labels(cluster),
        owner,
        "kubernetes.io/tls",
        &[
            ("ca.crt", &files.ca),
            ("tls.crt", &files.cert_key.cert),
            ("tls.key", &files.cert_key.key),
        ],
    )
}

impl KubePlatform {
    /// A Secret of this cluster's resource, if there.
    async fn own_secret(&self, cluster: &str, name: &str) -> Result<Option<Secret>, Error> {
        let reg = self.registration(cluster)?;
        let found = self.get::<Secret>(name).await?;
        Ok(found.filter(|s| owned_by(&s.metadata, &reg.owner.uid)))
    }

    /// Stops a member and starts it with these URLs and TLS settings: the
    /// claim records the new config first (so a restart cut short finishes
    /// with it), then the pod is re-created. A member without a claim
    /// keeps its data only in its pod: the pod goes, and the plan replaces
    /// the member.
    pub(super) async fn reconfigure_member(
        &self,
        cluster: &str,
        member: &str,
        addr: &MemberAddr,
        tls: &MemberTls,
    ) -> Result<(), Error> {
        let reg = self.registration(cluster)?;
        let claim = claim_name(member);
        let found = self.get::<PersistentVolumeClaim>(&claim).await?;
        let found = found.filter(|c| owned_by(&c.metadata, &reg.owner.uid));
        let pod = self.get::<Pod>(member).await?;
        let pod = pod.filter(|p| owned_by(&p.metadata, &reg.owner.uid));
        if found.is_none() {
            tracing::warn!(
                %cluster, %member,
                "a member without a volume claim cannot keep its data through a restart: \
                 deleting its pod, it will be replaced"
            );
            if let Some(p) = &pod {
                self.clear_pod(p).await?;
            }
            return Ok(());
        }
        let object = format!("persistentvolumeclaims/{claim}");
        let recorded = match &found {
            Some(c) => config::read(&object, c.annotations().into())?,
            None => None,
        };
        let mut config: MemberConfig = recorded.ok_or_else(|| Error::Config {
            object,
            message: format!("no annotation {ANNOTATION_CONFIG}"),
        })?;
        config.addr = addr.clone();
        config.tls = tls.clone();
        let config = &config;
        let annotations = serde_json::json!({ANNOTATION_CONFIG: config::to_json(config)});
        let patch = serde_json::json!({"metadata": {"annotations": annotations}});
        self.merge::<PersistentVolumeClaim>(&claim, Patch::Merge(patch))
            .await?;
        if let Some(p) = &pod {
            self.clear_pod(p).await?;
        }
        let pod = member_pod(
            cluster,
            config,
            StoragePolicy::Persistent,
            &self.image,
            &reg.owner,
        );
        self.apply(member, &pod).await
    }
}

impl TlsStore for KubePlatform {
    async fn load_ca(&self, cluster: &str) -> Result<Option<CaState>> {
        let name = ca_secret_name(cluster);
        let Some(s) = self.own_secret(cluster, &name).await? else {
            return Ok(None);
        };
        let Some(json) = text(&s, CA_KEY) else {
            return Ok(None);
        };
        let state = serde_json::from_str(&json).map_err(|e| Error::Config {
            object: format!("secrets/{name}"),
            message: format!("{CA_KEY}: {e}"),
        })?;
        Ok(Some(state))
    }

    async fn save_ca(&self, cluster: &str, ca: &CaState) -> Result<()> {
        let reg = self.registration(cluster)?;
        let s = ca_secret(cluster, ca, &reg.owner);
        Ok(self.apply(&ca_secret_name(cluster), &s).await?)
    }

    async fn member_files(&self, cluster: &str, member: &str) -> Result<Option<MemberFiles>> {
        let name = tls_secret_name(member);
        let Some(s) = self.own_secret(cluster, &name).await? else {
            return Ok(None);
        };
        Ok(Some(MemberFiles::from_map(|k| text(&s, k))))
    }

    async fn install_member_files(
        &self,
        cluster: &str,
        member: &str,
        files: &MemberFiles,
    ) -> Result<()> {
        let reg = self.registration(cluster)?;
        let s = member_secret(cluster, member, files, &reg.owner);
        // Apply keeps keys no longer listed only if another manager owns
        // them; this manager owns all, so dropped roles go.
        Ok(self.apply(&tls_secret_name(member), &s).await?)
    }

    /// In the cluster's `CLUSTER-standby-auth` Secret ([`super::standby`]).
    async fn standby_password(
        &self,
        cluster: &str,
        user: &str,
    ) -> Result<(String, crate::standby::auth::PasswordPlace)> {
        Ok(self.standby_secret_password(cluster, user).await?)
    }

    async fn provided(&self, _cluster: &str, source: &str) -> Result<Provided> {
        let place = format!("secret {}/{source}", self.namespace);
        let s = self.get::<Secret>(source).await?.ok_or_else(|| {
            Error::Unsupported(format!(
                "{place} does not exist (mode: Provided needs a kubernetes.io/tls Secret with \
                 ca.crt, tls.crt and tls.key)"
            ))
        })?;
        let key = |k: &str| {
            text(&s, k).ok_or_else(|| {
                Error::Unsupported(format!(
                    "{place} has no {k} (mode: Provided needs ca.crt, tls.crt and tls.key)"
                ))
            })
        };
        Ok(Provided {
            ca: key("ca.crt")?,
            cert_key: CertKey {
                cert: key("tls.crt")?,
                key: key("tls.key")?,
            },
            place,
        })
    }

    async fn client_files(&self, cluster: &str) -> Result<Option<ClientFiles>> {
        let name = client_secret_name(cluster);
        let Some(s) = self.own_secret(cluster, &name).await? else {
            return Ok(None);
        };
        let (Some(ca), Some(cert), Some(key)) =
            (text(&s, "ca.crt"), text(&s, "tls.crt"), text(&s, "tls.key"))
        else {
            return Ok(None);
        };
        Ok(Some(ClientFiles {
            ca,
            cert_key: CertKey { cert, key },
        }))
    }

    async fn install_client_files(
        &self,
        cluster: &str,
        files: &ClientFiles,
    ) -> Result<ClientPlace> {
        let reg = self.registration(cluster)?;
        let s = client_secret(cluster, files, &reg.owner);
        self.apply(&client_secret_name(cluster), &s).await?;
        Ok(self.client_place(cluster))
    }

    fn client_place(&self, cluster: &str) -> ClientPlace {
        ClientPlace {
            secret: Some(client_secret_name(cluster)),
            ..ClientPlace::default()
        }
    }

    /// Its DNS names through the headless Service (short and long forms),
    /// the client Service's names, and localhost. Pod IPs are not known
    /// when a pod's certificate is made (it is mounted before the pod has
    /// an IP): the operator reaches a pod at its IP but checks its
    /// certificate against its DNS name.
    fn member_names(&self, cluster: &str, addr: &MemberAddr) -> Vec<String> {
        let ns = &self.namespace;
        let peers = peer_service_name(cluster);
        let client = client_service_name(cluster);
        let member = &addr.name;
        let mut names = vec![
            format!("{member}.{peers}.{ns}.svc"),
            format!("{member}.{peers}.{ns}.svc.cluster.local"),
            format!("{member}.{peers}.{ns}"),
            format!("{member}.{peers}"),
            client.clone(),
            format!("{client}.{ns}"),
            format!("{client}.{ns}.svc"),
            format!("{client}.{ns}.svc.cluster.local"),
            "localhost".into(),
            "127.0.0.1".into(),
        ];
        for u in [&addr.peer_url, &addr.client_url] {
            if let Some(h) = crate::tls::url_host(u)
                && !names.iter().any(|n| n == h)
            {
                names.push(h.to_string());
            }
        }
        names
    }
}
