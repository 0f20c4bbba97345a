//! The etcd command line of a member, the same on every platform but for
//! where it listens.

use std::path::Path;

use super::{CLIENT_PORT, InitialState, MemberConfig, PEER_PORT};

/// Where a member listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listen {
    /// On the URLs it advertises (locally, each member has a loopback
    /// address of its own).
    Advertised,
    /// On every address of its host, at etcd's standard ports (a pod:
    /// reached at its IP and at its DNS name).
    Everywhere,
}

/// The etcd command line of a member whose data is in `data_dir`.
pub fn etcd_args(config: &MemberConfig, data_dir: &Path, listen: Listen) -> Vec<String> {
    let state = match config.initial_state {
        InitialState::New => "new",
        InitialState::Existing => "existing",
    };
    let (listen_peer, listen_client) = match listen {
        Listen::Advertised => (config.addr.peer_url.clone(), config.addr.client_url.clone()),
        Listen::Everywhere => (
            format!("http://0.0.0.0:{PEER_PORT}"),
            format!("http://0.0.0.0:{CLIENT_PORT}"),
        ),
    };
    [
        ("--name", config.addr.name.as_str()),
        ("--data-dir", &data_dir.to_string_lossy()),
        ("--listen-peer-urls", &listen_peer),
        ("--initial-advertise-peer-urls", &config.addr.peer_url),
        ("--listen-client-urls", &listen_client),
        ("--advertise-client-urls", &config.addr.client_url),
        ("--initial-cluster", &config.initial_cluster),
        ("--initial-cluster-state", state),
        ("--initial-cluster-token", &config.token),
        ("--logger", "zap"),
        ("--log-outputs", "stderr"),
    ]
    .into_iter()
    .flat_map(|(k, v)| [k.to_string(), v.to_string()])
    // A member whose data disagrees with its peers' at the same revision
    // refuses to start (and, failing by itself, is replaced as a crash
    // loop) instead of serving wrong data. Boolean flags take `=`.
    .chain(["--experimental-initial-corrupt-check=true".to_string()])
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::MemberAddr;
    use crate::version::Version;

    fn config() -> MemberConfig {
        MemberConfig {
            addr: MemberAddr {
                name: "demo-1".into(),
                peer_url: "http://127.1.2.3:2380".into(),
                client_url: "http://127.1.2.3:2379".into(),
            },
            version: Version::new(3, 4, 23),
            initial_cluster: "demo-1=http://127.1.2.3:2380".into(),
            initial_state: InitialState::Existing,
            token: "demo-t".into(),
            bootstrap: false,
        }
    }

    #[test]
    fn flags_name_every_setting_and_listen_where_asked() {
        let args = etcd_args(&config(), Path::new("/data"), Listen::Advertised);
        let flag = |args: &[String], f: &str| {
            let i = args.iter().position(|a| a == f)?;
            args.get(i + 1).cloned()
        };
        for (f, v) in [
            ("--name", "demo-1"),
            ("--data-dir", "/data"),
            ("--listen-peer-urls", "http://127.1.2.3:2380"),
            ("--listen-client-urls", "http://127.1.2.3:2379"),
            ("--initial-cluster-state", "existing"),
            ("--initial-cluster-token", "demo-t"),
        ] {
            assert_eq!(flag(&args, f).as_deref(), Some(v), "{f}");
        }
        assert_eq!(
            args.last().map(String::as_str),
            Some("--experimental-initial-corrupt-check=true")
        );
        let pod = etcd_args(&config(), Path::new("/data"), Listen::Everywhere);
        assert_eq!(
            flag(&pod, "--listen-peer-urls").as_deref(),
            Some("http://0.0.0.0:2380")
        );
        assert_eq!(
            flag(&pod, "--listen-client-urls").as_deref(),
            Some("http://0.0.0.0:2379")
        );
        let differ = args.iter().zip(&pod).filter(|(a, b)| a != b).count();
        assert_eq!((pod.len(), differ), (args.len(), 2), "only the listen URLs");
    }
}
