//! A member's config as tests write it by hand.

use crate::member::{InitialState, MemberAddr, MemberConfig};
use crate::version::Version;

/// The config of a bootstrap member (`--initial-cluster-state new`) at
/// `addr`: no TLS, etcd's default tuning and backend, no forced new cluster,
/// not freshly restored.
pub fn bootstrap_config(
    addr: MemberAddr,
    version: Version,
    initial_cluster: impl Into<String>,
    token: impl Into<String>,
) -> MemberConfig {
    MemberConfig {
        addr,
        version,
        initial_cluster: initial_cluster.into(),
        initial_state: InitialState::New,
        token: token.into(),
        bootstrap: true,
        tls: Default::default(),
        tuning: Default::default(),
        backend: Default::default(),
        pod: Default::default(),
        force_new_cluster: false,
        fresh_restore: false,
    }
}
