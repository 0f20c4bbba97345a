//! A standby on Kubernetes (`spec.standby`, [`crate::standby`]): the same
//! applier as on the local platform, in the operator's process, with what
//! this platform keeps for it:
//!
//! * `CLUSTER-standby-auth`, an Opaque Secret owned by the cluster and made
//!   once (never changed after: a member's tokens and the applier's login
//!   depend on it): `root.password` (the applier's), `reader.password`
//!   (clients', as `status.standby.readPasswordSecret` says) and the
//!   members' token signing key `jwt.key` with its public half `jwt.pub`.
//!   A standby member's pod mounts those two keys only, at [`AUTH_MOUNT`],
//!   and signs its tokens with them ([`crate::standby::auth::token_flag`]);
//! * the source's backups, read in the operator's process several times a
//!   second (a Job per read would take seconds): the local platform's
//!   store ([`LocalBackups`]) over the operator's scratch folder
//!   (`--state-dir`, an emptyDir in deploy/base/operator.yaml), its bucket
//!   opened with the location's credentials Secret as the environment, the
//!   variables a backup Job gets from it through `envFrom`.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::core::v1::{KeyToPath, SecretVolumeSource, Volume, VolumeMount};
use kube::api::PostParams;
use rand::Rng;
use rand::distr::Alphanumeric;

use super::objects::{cluster_labels, meta};
use super::{Error, FIELD_MANAGER, KubePlatform};
use crate::backup::Location;
use crate::backup::object::client::StoreEnv;
use crate::crd::SecretKey;
use crate::platform::local::backups::LocalBackups;
use crate::platform::local::binaries::Binaries;
use crate::standby::auth::PasswordPlace;

/// Where a standby member's pod finds its token signing key.
pub const AUTH_MOUNT: &str = "/etc/etcd/standby-auth";
/// The pod's volume of it.
pub const AUTH_VOLUME: &str = "standby-auth";
/// The keys of the signing key and its public half in the Secret.
const JWT_KEY: &str = "jwt.key";
const JWT_PUB: &str = "jwt.pub";
/// Characters of a new password.
const LENGTH: usize = 32;

/// The Secret of a standby's auth.
pub fn auth_secret_name(cluster: &str) -> String {
    format!("{cluster}-standby-auth")
}

/// The key of `user`'s password in it.
pub fn password_key(user: &str) -> String {
    format!("{user}.password")
}

/// The `--auth-token` flag of a standby member's pod.
pub fn token_flag() -> [String; 2] {
    crate::standby::auth::token_flag(
        &format!("{AUTH_MOUNT}/{JWT_PUB}"),
        &format!("{AUTH_MOUNT}/{JWT_KEY}"),
    )
}

/// The volume of a standby member's pod: the signing key pair alone (not
/// the passwords), readable by the pod's group only.
pub fn auth_volume(cluster: &str) -> Volume {
    let item = |key: &str| KeyToPath {
        key: key.into(),
        path: key.into(),
        ..KeyToPath::default()
    };
    Volume {
        name: AUTH_VOLUME.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(auth_secret_name(cluster)),
            items: Some(vec![item(JWT_KEY), item(JWT_PUB)]),
            default_mode: Some(0o440),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// Its mount in the etcd container.
pub fn auth_mount() -> VolumeMount {
    VolumeMount {
        name: AUTH_VOLUME.into(),
        mount_path: AUTH_MOUNT.into(),
        read_only: Some(true),
        ..VolumeMount::default()
    }
}

/// A new random password.
fn password() -> String {
    rand::rng()
        .sample_iter(&Alphanumeric)
        .take(LENGTH)
        .map(char::from)
        .collect()
}

/// The data of a new auth Secret: both passwords and a new key pair.
fn new_data(users: &[&str]) -> Result<BTreeMap<String, ByteString>, String> {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(|e| format!("cannot make the members' token signing key: {e}"))?;
    let mut data: BTreeMap<String, ByteString> = users
        .iter()
        .map(|u| (password_key(u), ByteString(password().into_bytes())))
        .collect();
    data.insert(
        JWT_KEY.into(),
        ByteString(pair.serialize_pem().into_bytes()),
    );
    data.insert(
        JWT_PUB.into(),
        ByteString(pair.public_key_pem().into_bytes()),
    );
    Ok(data)
}

/// The text of `key` in `secret`.
fn text(secret: &Secret, key: &str) -> Option<String> {
    let data = secret.data.as_ref()?.get(key)?;
    String::from_utf8(data.0.clone()).ok()
}

/// The stores standbys read through, one per credentials Secret (`None`:
/// the operator's own environment), with the Secret's resourceVersion it
/// was made from: a Secret changed gives a new store in its place.
pub(super) type Readers = Mutex<HashMap<Option<String>, (Option<String>, Arc<LocalBackups>)>>;

impl KubePlatform {
    /// The cluster's standby auth Secret, made the first time (with the
    /// cluster's resource as its owner). An existing one is never
    /// rewritten: a create that meets one reads it.
    pub(super) async fn standby_auth(&self, cluster: &str) -> Result<Secret, Error> {
        let reg = self.registration(cluster)?;
        let name = auth_secret_name(cluster);
        if let Some(s) = self.get::<Secret>(&name).await? {
            Self::ours(&reg, &s.metadata, &format!("secret {name}"))?;
            return Ok(s);
        }
        let data = new_data(&[crate::standby::auth::ROOT, crate::standby::auth::READER])
            .map_err(Error::Unsupported)?;
        let secret = Secret {
            metadata: meta(name.clone(), cluster_labels(cluster), &reg.owner),
            type_: Some("Opaque".into()),
            data: Some(data),
            ..Secret::default()
        };
        crate::fence::check()?;
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        match self.api::<Secret>().create(&params, &secret).await {
            Ok(made) => {
                tracing::info!(%cluster, secret = %name, "the standby's auth Secret is made");
                Ok(made)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => self
                .get::<Secret>(&name)
                .await?
                .ok_or_else(|| Error::Busy(format!("secret {name} went as it was made"))),
            Err(e) => Err(Error::api(format!("cannot create secret {name}"))(e)),
        }
    }

    /// `user`'s password of the standby `cluster`, and the Secret key a
    /// user reads it from.
    pub(super) async fn standby_secret_password(
        &self,
        cluster: &str,
        user: &str,
    ) -> Result<(String, PasswordPlace), Error> {
        let secret = self.standby_auth(cluster).await?;
        let name = auth_secret_name(cluster);
        let key = password_key(user);
        let password = text(&secret, &key)
            .filter(|p| !p.is_empty())
            .ok_or_else(|| Error::Config {
                object: format!("secrets/{name}"),
                message: format!(
                    "no key {key}; the operator made this Secret and never changes it: \
                     delete it only with the cluster"
                ),
            })?;
        Ok((password, PasswordPlace::Secret(SecretKey { name, key })))
    }

    /// The store the applier of `cluster` reads `location` (its source's
    /// backups) through: the bucket opened with the location's
    /// credentials Secret, staged in the scratch folder.
    pub(super) async fn standby_store(
        &self,
        cluster: &str,
        location: &Location,
    ) -> Result<Arc<LocalBackups>, Error> {
        let Some(scratch) = self.scratch.clone() else {
            return Err(Error::Unsupported(format!(
                "{cluster}: a standby reads its source's bucket in the operator's process and \
                 stages what it reads in a folder: start the operator with --state-dir (a \
                 writable folder; deploy/base/operator.yaml mounts an emptyDir there)"
            )));
        };
        let Some(object) = location.object.as_ref() else {
            return Err(Error::Unsupported(format!(
                "{cluster}: on Kubernetes a standby follows its source through an object \
                 store (spec.standby.location.objectStore)"
            )));
        };
        let (vars, version) = match &object.secret {
            None => (Vec::new(), None),
            Some(name) => {
                let s = self
                    .get::<Secret>(name)
                    .await?
                    .ok_or_else(|| Error::Config {
                        object: format!("secrets/{name}"),
                        message: format!(
                            "not in namespace {}: spec.standby.location.objectStore.\
                         credentialsSecret names the Secret with the bucket's credentials",
                            self.namespace
                        ),
                    })?;
                let vars = s
                    .data
                    .iter()
                    .flatten()
                    .filter_map(|(k, v)| Some((k.clone(), String::from_utf8(v.0.clone()).ok()?)))
                    .collect();
                (vars, s.metadata.resource_version.clone())
            }
        };
        let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((seen, store)) = readers.get(&object.secret)
            && *seen == version
        {
            return Ok(store.clone());
        }
        let dir: PathBuf = scratch.join("standby").join(&self.namespace);
        let store = Arc::new(
            LocalBackups::new(dir, Arc::new(Binaries::new(Vec::new())))
                .with_store_env(StoreEnv::new(vars)),
        );
        readers.insert(object.secret.clone(), (version, store.clone()));
        Ok(store)
    }
}
