//! A member whatever runs it: its etcd configuration ([`MemberConfig`],
//! the one type the local platform's member record, the Kubernetes pod
//! annotation and the etcd command line are built from), etcd's standard
//! ports, the command line itself ([`flags`]) and why etcd failed, read
//! from its log ([`hints`]), and the settings a planned restart changes
//! ([`Settings`]: version, election timing, quota and compaction, and on
//! Kubernetes the pod's image and settings, [`pod`]). Neither platform owns this
//! module; both use it.

pub mod backend;
pub mod crash;
pub mod flags;
pub mod hints;
pub mod metrics;
pub mod pod;
pub mod tuning;
pub mod volume;

use serde::{Deserialize, Serialize};

pub use self::backend::Backend;
pub use self::pod::PodSettings;
pub use self::tuning::Tuning;
pub use self::volume::Volume;
use crate::version::Version;

/// etcd's client port.
pub const CLIENT_PORT: u16 = 2379;
/// etcd's peer port.
pub const PEER_PORT: u16 = 2380;

/// A member's place in the network.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberAddr {
    /// Member name (etcd `--name`).
    pub name: String,
    /// URL peers use.
    pub peer_url: String,
    /// URL clients use.
    pub client_url: String,
}

/// How a member joins its cluster the first time it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InitialState {
    /// Part of a static bootstrap.
    New,
    /// Added to a running cluster.
    Existing,
}

/// What a member is created and run with: everything etcd's command line
/// says about it. Recorded as JSON (camelCase, fields in this order) in the
/// local platform's `member.json` and in the Kubernetes annotation
/// `etcdoperator.dev/member-config`; records written before this type
/// existed have the same fields and still load.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberConfig {
    /// Name and URLs (from [`crate::platform::Platform::allocate`]).
    pub addr: MemberAddr,
    /// Version to run.
    pub version: Version,
    /// `--initial-cluster`: `name=peerURL` for every member.
    pub initial_cluster: String,
    /// `--initial-cluster-state`.
    pub initial_state: InitialState,
    /// `--initial-cluster-token`.
    pub token: String,
    /// One of the bootstrap members.
    pub bootstrap: bool,
    /// `--heartbeat-interval` and `--election-timeout` (etcd's defaults
    /// when unset; absent from the JSON then, so records and annotations
    /// written before it existed read and re-serialize the same).
    #[serde(default, skip_serializing_if = "Tuning::is_default")]
    pub tuning: Tuning,
    /// Its TLS files and listeners; absent (all off) for a member without
    /// TLS, so records written before TLS existed read and write the same.
    #[serde(default, skip_serializing_if = "MemberTls::is_off")]
    pub tls: MemberTls,
    /// Quota and auto-compaction (absent from the JSON when etcd's
    /// defaults, so records written before it existed stay the same).
    #[serde(default, skip_serializing_if = "Backend::is_default")]
    pub backend: Backend,
    /// Its image repository and pod settings (Kubernetes; absent from the
    /// JSON when the operator's defaults, so records written before it
    /// existed stay the same).
    #[serde(default, skip_serializing_if = "PodSettings::is_default")]
    pub pod: PodSettings,
    /// Start it with `--force-new-cluster`: it keeps its data and member id
    /// and becomes a cluster of one, every other member dropped from its
    /// member list. Set only while a cluster whose quorum is lost for good
    /// is rebuilt from this member (see the plan's rules), and cleared once
    /// it serves, before any member joins it: a later start with the flag
    /// would drop them again. Absent in records written before it existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force_new_cluster: bool,
    /// Its data was just restored from a snapshot, and this is its first
    /// start on it: etcd's initial corruption check is left out. Every
    /// member of a bootstrap from a snapshot restores the same checked
    /// file, so there is nothing to compare; and with the check, each one
    /// waits out etcd's request timeout (7 s) for every peer, which does
    /// not answer while it does the same. Never recorded (a later start,
    /// after a crash or an operator restart, checks again); set only by a
    /// platform for the start that follows its restore.
    #[serde(skip)]
    pub fresh_restore: bool,
}

/// What a member's etcd is given for TLS. Whether its peer and client
/// URLs are `https://` is in its [`MemberAddr`]; this says which files it
/// reads (peer files may be there while its peer URL is still `http://`:
/// it then dials peers that moved to `https://` with its certificate).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberTls {
    /// The peer certificate, key and CAs (to serve an `https://` peer URL
    /// and to dial peers that do, presenting its certificate).
    #[serde(default)]
    pub peer: bool,
    /// The server certificate, key and client CAs (to serve `https://`
    /// clients, who must present a certificate the CAs signed).
    #[serde(default)]
    pub client: bool,
    /// Fingerprint of the CAs it trusted when it started
    /// ([`crate::tls::trust_id`]): etcd reads its CA files only at start,
    /// so a member whose fingerprint differs from the cluster's is
    /// restarted.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub trust: String,
}

impl MemberTls {
    /// No TLS at all (how records without the field read).
    pub fn is_off(&self) -> bool {
        *self == MemberTls::default()
    }
}

impl MemberConfig {
    /// Its peer URL is `https://`.
    pub fn peer_https(&self) -> bool {
        crate::tls::is_https(&self.addr.peer_url)
    }

    /// Its client URL is `https://`.
    pub fn client_https(&self) -> bool {
        crate::tls::is_https(&self.addr.client_url)
    }

    /// The settings it runs with (the inverse of [`Settings::apply`]).
    pub fn settings(&self) -> Settings {
        Settings {
            version: self.version,
            tuning: self.tuning,
            backend: self.backend.clone(),
            pod: self.pod.clone(),
        }
    }
}

/// What a planned restart runs a member with: the parts of its config the
/// cluster's spec decides. A restart ([`crate::platform::Platform::restart`])
/// writes them into the member's recorded config, so a restart cut short
/// is finished by the next start. (A TLS change restarts a member through
/// [`crate::platform::Platform::reconfigure`], with new URLs as well.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The etcd version.
    pub version: Version,
    /// Election timing.
    pub tuning: Tuning,
    /// Backend quota and auto-compaction.
    pub backend: Backend,
    /// Image repository and pod settings (Kubernetes).
    pub pod: PodSettings,
}

impl Settings {
    /// The spec fields (`spec.version`, `spec.tuning`,
    /// `spec.quotaBackendBytes`, `spec.compaction`, `spec.standby`,
    /// `spec.image.repository`, `spec.pod`) whose values differ
    /// between these settings and `wanted`: empty exactly when they are
    /// equal, since every field is named here (destructured, so a new one
    /// does not compile until it is).
    pub fn changed(&self, wanted: &Settings) -> Vec<&'static str> {
        let Settings {
            version,
            tuning,
            backend:
                Backend {
                    quota_backend_bytes,
                    compaction,
                    standby,
                },
            pod: PodSettings {
                repository,
                template,
            },
        } = self;
        [
            ("spec.version", *version == wanted.version),
            ("spec.tuning", *tuning == wanted.tuning),
            (
                "spec.quotaBackendBytes",
                *quota_backend_bytes == wanted.backend.quota_backend_bytes,
            ),
            ("spec.compaction", *compaction == wanted.backend.compaction),
            ("spec.standby", *standby == wanted.backend.standby),
            (
                "spec.image.repository",
                *repository == wanted.pod.repository,
            ),
            ("spec.pod", *template == wanted.pod.template),
        ]
        .into_iter()
        .filter(|(_, same)| !same)
        .map(|(field, _)| field)
        .collect()
    }

    /// Whether a member running these settings needs no restart for
    /// `wanted`: they are equal, or differ only in a standby's larger
    /// transaction limits (and, on Kubernetes, its token signing key) that
    /// `wanted` no longer asks for, `spec.standby` removed on promotion.
    /// Harmless once etcd's auth is off, they go at the member's next
    /// restart for another reason, so that promoting never restarts a
    /// member (a cluster of one could not be restarted without losing its
    /// quorum).
    pub fn serves(&self, wanted: &Settings) -> bool {
        if self == wanted {
            return true;
        }
        let mut relaxed = self.clone();
        relaxed.backend.standby &= wanted.backend.standby;
        relaxed == *wanted
    }

    /// Writes these settings into `config`.
    pub fn apply(&self, config: &mut MemberConfig) {
        config.version = self.version;
        config.tuning = self.tuning;
        config.backend = self.backend.clone();
        config.pod = self.pod.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::CompactionMode;
    use crate::member::backend::Compaction;

    /// Every field of [`Settings`] changed alone is named, and nothing is
    /// named for equal settings.
    #[test]
    fn changed_names_each_field() {
        let base = Settings {
            version: "3.4.23".parse().expect("a version"),
            tuning: Tuning::default(),
            backend: Backend::default(),
            pod: PodSettings::default(),
        };
        assert!(base.changed(&base.clone()).is_empty());
        let one = |f: fn(&mut Settings)| {
            let mut s = base.clone();
            f(&mut s);
            base.changed(&s)
        };
        assert_eq!(
            one(|s| s.version = "3.5.1".parse().expect("a version")),
            ["spec.version"]
        );
        assert_eq!(
            one(|s| s.tuning = Tuning::new(Some(25), None)),
            ["spec.tuning"]
        );
        assert_eq!(
            one(|s| s.backend.quota_backend_bytes = Some(1 << 20)),
            ["spec.quotaBackendBytes"]
        );
        assert_eq!(
            one(|s| {
                s.backend.compaction = Some(Compaction {
                    mode: CompactionMode::Periodic,
                    retention: "1h".into(),
                })
            }),
            ["spec.compaction"]
        );
        assert_eq!(
            one(|s| s.pod.repository = Some("mirror.local/etcd".into())),
            ["spec.image.repository"]
        );
        assert_eq!(
            one(|s| {
                s.pod.template = Some(Box::new(crate::crd::MemberPodSpec {
                    priority_class_name: Some("high".into()),
                    ..Default::default()
                }))
            }),
            ["spec.pod"]
        );
    }

    /// A member keeps a promoted standby's limits without a restart, and
    /// only those: becoming a standby, or anything else besides, is a
    /// restart.
    #[test]
    fn a_promoted_standbys_limits_wait_for_the_next_restart() {
        let wanted = Settings {
            version: "3.4.23".parse().expect("a version"),
            tuning: Tuning::default(),
            backend: Backend::default(),
            pod: PodSettings::default(),
        };
        let mut standby = wanted.clone();
        standby.backend.standby = true;
        assert!(wanted.serves(&wanted));
        assert!(standby.serves(&wanted), "promoted: no restart");
        assert_eq!(standby.changed(&wanted), ["spec.standby"]);
        assert!(!wanted.serves(&standby), "to a standby: a restart");
        let mut tuned = standby.clone();
        tuned.tuning = Tuning::new(Some(25), None);
        assert!(!tuned.serves(&wanted), "another change besides");
    }
}
