//! The etcd command line of a member, the same on every platform but for
//! where it listens and where its files are.

use std::path::Path;

use super::{CLIENT_PORT, InitialState, MemberConfig, PEER_PORT};
use crate::tls::{files, is_https};
#[cfg(doc)]
use crate::version::Version;

/// The port of etcd's plain `http://` metrics and health listener, added
/// in a pod whose client port wants client certificates (the kubelet's
/// probes have none), and on every local member: the operator reads the
/// position of a member that cannot answer on its client port from it
/// ([`super::metrics`]).
pub const METRICS_PORT: u16 = 2381;

/// The flag members of etcd 3.5.0 to 3.5.2 run with (see
/// [`Version::skips_entries_after_crash`]): a commit after every write.
pub const COMMIT_EVERY_WRITE: &str = "--backend-batch-limit=1";

/// Raft's pre-vote, given to members of versions where it is off by
/// default ([`Version::pre_vote_off_by_default`]: 3.4). A member that
/// lost touch with the leader (cut off, or restarted and not yet reached)
/// first asks its peers whether they would vote for it, and raises its
/// term only if a majority would: peers that still hear a leader say no.
/// Without it, such a member raises its term at every election timeout,
/// and when it is heard again its higher term deposes the leader (an
/// election the cluster did not need).
pub const PRE_VOTE: &str = "--pre-vote=true";

/// etcd's initial corruption check: a member that restarts on its data
/// compares its hash with its peers' before it serves.
pub const INITIAL_CORRUPT_CHECK: &str = "--experimental-initial-corrupt-check=true";

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

/// The etcd command line of a member whose data is in `data_dir` and
/// whose TLS files ([`crate::tls::files`]) are in `tls_dir`.
pub fn etcd_args(
    config: &MemberConfig,
    data_dir: &Path,
    tls_dir: &Path,
    listen: Listen,
) -> Vec<String> {
    let state = match config.initial_state {
        InitialState::New => "new",
        InitialState::Existing => "existing",
    };
    let peer_scheme = if is_https(&config.addr.peer_url) {
        "https"
    } else {
        "http"
    };
    let client_scheme = if is_https(&config.addr.client_url) {
        "https"
    } else {
        "http"
    };
    let (listen_peer, listen_client) = match listen {
        Listen::Advertised => (config.addr.peer_url.clone(), config.addr.client_url.clone()),
        Listen::Everywhere => (
            format!("{peer_scheme}://0.0.0.0:{PEER_PORT}"),
            format!("{client_scheme}://0.0.0.0:{CLIENT_PORT}"),
        ),
    };
    let tls = &config.tls;
    let file = |name: &str| tls_dir.join(name).to_string_lossy().into_owned();
    let mut tls_args: Vec<(&str, String)> = Vec::new();
    if tls.peer {
        tls_args.extend([
            ("--peer-cert-file", file(files::PEER_CERT)),
            ("--peer-key-file", file(files::PEER_KEY)),
            ("--peer-trusted-ca-file", file(files::PEER_CA)),
        ]);
    }
    if tls.client {
        tls_args.extend([
            ("--cert-file", file(files::SERVER_CERT)),
            ("--key-file", file(files::SERVER_KEY)),
            ("--trusted-ca-file", file(files::CLIENT_CA)),
        ]);
    }
    let mut flags: Vec<String> = [
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
    // Raft timing only when it differs from etcd's defaults: members
    // created before spec.tuning existed keep their exact command line.
    .chain(timing(config))
    .chain(tls_args.into_iter().flat_map(|(k, v)| [k.to_string(), v]))
    // Quota and auto-compaction only where the spec sets them: members
    // created before those fields existed keep their exact command line.
    .chain(config.backend.flags())
    .collect();
    // A plain metrics listener: served from start, also by a member that
    // waits for a quorum to publish itself (its client port serves nothing
    // until then), so the operator can still read how far its log goes;
    // on Kubernetes also what the readiness probe of a client-TLS member
    // asks.
    match listen {
        Listen::Advertised => {
            if let Some(host) = crate::tls::url_host(&config.addr.client_url) {
                flags.push("--listen-metrics-urls".into());
                flags.push(format!("http://{host}:{METRICS_PORT}"));
            }
        }
        Listen::Everywhere => {
            flags.push("--listen-metrics-urls".into());
            flags.push(format!("http://0.0.0.0:{METRICS_PORT}"));
        }
    }
    // Mutual TLS: a peer or client must present a certificate the
    // trusted CAs signed. Boolean flags take `=`.
    if tls.peer {
        flags.push("--peer-client-cert-auth=true".into());
    }
    if tls.client {
        flags.push("--client-cert-auth=true".into());
    }
    if config.version.pre_vote_off_by_default() {
        flags.push(PRE_VOTE.into());
    }
    // A member whose data disagrees with its peers' at the same revision
    // refuses to start (and, failing by itself, is replaced as a crash
    // loop) instead of serving wrong data. Not on the first start after a
    // restore: see [`MemberConfig::fresh_restore`].
    if !config.fresh_restore {
        flags.push(INITIAL_CORRUPT_CHECK.into());
    }
    if config.version.skips_entries_after_crash() {
        // etcd 3.5.0-3.5.2 save a member's applied index in a commit of
        // their own (every 100 ms) that can land while an entry is being
        // applied: SIGKILLed in the next ~100 ms, the member skips that
        // entry on restart and its data diverges from its peers' (etcd
        // issue 13766, fixed in 3.5.3). Committing after every write
        // closes that window to the microseconds between two calls.
        flags.push(COMMIT_EVERY_WRITE.into());
    }
    // The seed of a rebuild after a quorum loss: its data and member id
    // kept, every other member dropped from its member list.
    if config.force_new_cluster {
        flags.push("--force-new-cluster=true".into());
    }
    flags
}

/// `--heartbeat-interval` and `--election-timeout` (ms) where set.
fn timing(config: &MemberConfig) -> Vec<String> {
    let t = &config.tuning;
    let mut out = Vec::new();
    if let Some(h) = t.heartbeat_ms {
        out.extend(["--heartbeat-interval".to_string(), h.to_string()]);
    }
    if let Some(e) = t.election_ms {
        out.extend(["--election-timeout".to_string(), e.to_string()]);
    }
    out
}

/// The command line of a cluster of one member `name` on `ip`'s standard
/// ports with its data in `data` (its own cluster token): a scratch member
/// of the operator's, or an etcd a test starts by hand.
pub fn single_member_args(name: &str, ip: std::net::Ipv4Addr, data: &Path) -> Vec<String> {
    let client = format!("http://{ip}:{CLIENT_PORT}");
    let peer = format!("http://{ip}:{PEER_PORT}");
    [
        "--name",
        name,
        "--data-dir",
        &data.to_string_lossy(),
        "--listen-client-urls",
        &client,
        "--advertise-client-urls",
        &client,
        "--listen-peer-urls",
        &peer,
        "--initial-advertise-peer-urls",
        &peer,
        "--initial-cluster",
        &format!("{name}={peer}"),
        "--initial-cluster-token",
        name,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::{MemberAddr, MemberTls, Tuning};
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
            tls: MemberTls::default(),
            tuning: Tuning::default(),
            backend: Default::default(),
            pod: Default::default(),
            force_new_cluster: false,
            fresh_restore: false,
        }
    }

    fn flag(args: &[String], f: &str) -> Option<String> {
        let i = args.iter().position(|a| a == f)?;
        args.get(i + 1).cloned()
    }

    #[test]
    fn flags_name_every_setting_and_listen_where_asked() {
        let args = etcd_args(
            &config(),
            Path::new("/data"),
            Path::new("/tls"),
            Listen::Advertised,
        );
        assert!(!args.iter().any(|a| a.contains("cert")), "{args:?}");
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
        let pod = etcd_args(
            &config(),
            Path::new("/data"),
            Path::new("/tls"),
            Listen::Everywhere,
        );
        assert_eq!(
            flag(&pod, "--listen-peer-urls").as_deref(),
            Some("http://0.0.0.0:2380")
        );
        assert_eq!(
            flag(&pod, "--listen-client-urls").as_deref(),
            Some("http://0.0.0.0:2379")
        );
        // Locally the metrics listener is on the member's own address.
        assert_eq!(
            flag(&args, "--listen-metrics-urls").as_deref(),
            Some("http://127.1.2.3:2381")
        );
        // In a pod on every address: the operator reads it at the pod's IP.
        assert_eq!(
            flag(&pod, "--listen-metrics-urls").as_deref(),
            Some("http://0.0.0.0:2381")
        );
        let differ = args.iter().zip(&pod).filter(|(a, b)| a != b).count();
        assert_eq!((pod.len(), differ), (args.len(), 3), "only the listen URLs");
        assert!(
            !args
                .iter()
                .any(|a| a.contains("heartbeat") || a.contains("election")),
            "etcd's default timing is not spelled out: {args:?}"
        );
        assert!(!args.iter().any(|a| a.contains("force-new-cluster")));
    }

    #[test]
    fn members_of_etcd_3_5_0_to_3_5_2_commit_after_every_write() {
        let limit = |v: Version| {
            let mut c = config();
            c.version = v;
            let args = etcd_args(&c, Path::new("/d"), Path::new("/t"), Listen::Advertised);
            args.iter().any(|a| a == COMMIT_EVERY_WRITE)
        };
        for (v, want) in [
            (Version::new(3, 4, 23), false),
            (Version::new(3, 5, 0), true),
            (Version::new(3, 5, 1), true),
            (Version::new(3, 5, 2), true),
            (Version::new(3, 5, 3), false),
            (Version::new(3, 6, 0), false),
        ] {
            assert_eq!(limit(v), want, "{v}");
        }
    }

    /// 3.4 members get pre-vote from the version alone: a record written
    /// before the flag existed (the same JSON) starts with it, and no
    /// setting changes, so no restart is planned for it.
    #[test]
    fn members_of_etcd_3_4_run_with_pre_vote() {
        let pre_vote = |v: Version| {
            let mut c = config();
            c.version = v;
            let args = etcd_args(&c, Path::new("/d"), Path::new("/t"), Listen::Everywhere);
            args.iter().any(|a| a == PRE_VOTE)
        };
        for (v, want) in [
            (Version::new(3, 4, 0), true),
            (Version::new(3, 4, 23), true),
            (Version::new(3, 5, 0), false),
            (Version::new(3, 5, 1), false),
            (Version::new(3, 6, 0), false),
        ] {
            assert_eq!(pre_vote(v), want, "{v}");
        }
        let json = serde_json::to_value(config()).expect("json");
        assert!(!json.to_string().contains("pre"), "not recorded: {json}");
        let old: MemberConfig = serde_json::from_value(json).expect("a record");
        assert_eq!(old.settings(), config().settings());
        let args = etcd_args(&old, Path::new("/d"), Path::new("/t"), Listen::Advertised);
        assert!(args.iter().any(|a| a == PRE_VOTE), "{args:?}");
    }

    #[test]
    fn timing_flags_only_where_set() {
        let mut c = config();
        c.tuning = Tuning::new(Some(25), Some(250));
        let args = etcd_args(&c, Path::new("/data"), Path::new("/t"), Listen::Advertised);
        let joined = args.join(" ");
        assert!(joined.contains("--heartbeat-interval 25"), "{joined}");
        assert!(joined.contains("--election-timeout 250"), "{joined}");
        c.tuning = Tuning::new(None, Some(3000));
        let joined =
            etcd_args(&c, Path::new("/data"), Path::new("/t"), Listen::Everywhere).join(" ");
        assert!(!joined.contains("--heartbeat-interval"), "{joined}");
        assert!(joined.contains("--election-timeout 3000"), "{joined}");
        // The defaults written out are the defaults: no flag, no restart.
        assert_eq!(Tuning::new(Some(100), Some(1000)), Tuning::default());
    }

    #[test]
    fn the_seed_of_a_rebuild_forces_a_new_cluster_on_every_platform() {
        let seed = MemberConfig {
            force_new_cluster: true,
            ..config()
        };
        for listen in [Listen::Advertised, Listen::Everywhere] {
            let args = etcd_args(&seed, Path::new("/data"), Path::new("/t"), listen);
            let plain = etcd_args(&config(), Path::new("/data"), Path::new("/t"), listen);
            assert_eq!(
                args.last().map(String::as_str),
                Some("--force-new-cluster=true")
            );
            assert_eq!(args[..args.len() - 1], plain[..], "nothing else changes");
        }
    }

    #[test]
    fn the_first_start_after_a_restore_skips_only_the_corruption_check() {
        let restored = MemberConfig {
            fresh_restore: true,
            ..config()
        };
        for listen in [Listen::Advertised, Listen::Everywhere] {
            let args = etcd_args(&restored, Path::new("/data"), Path::new("/t"), listen);
            let plain = etcd_args(&config(), Path::new("/data"), Path::new("/t"), listen);
            assert!(!args.iter().any(|a| a.contains("corrupt")), "{args:?}");
            let kept: Vec<&String> = plain
                .iter()
                .filter(|a| *a != INITIAL_CORRUPT_CHECK)
                .collect();
            assert_eq!(
                args.iter().collect::<Vec<_>>(),
                kept,
                "nothing else changes"
            );
        }
        // Never recorded: a record read back (a later start) checks again.
        let json = serde_json::to_value(&restored).expect("json");
        assert!(json.get("freshRestore").is_none(), "{json}");
        let back: MemberConfig = serde_json::from_value(json).expect("read back");
        assert!(!back.fresh_restore);
        let args = etcd_args(&back, Path::new("/d"), Path::new("/t"), Listen::Advertised);
        assert!(args.iter().any(|a| a == INITIAL_CORRUPT_CHECK), "{args:?}");
    }

    #[test]
    fn a_record_without_the_flag_loads_and_is_written_without_it() {
        let json = serde_json::to_value(config()).expect("json");
        assert!(json.get("forceNewCluster").is_none(), "{json}");
        let old: MemberConfig = serde_json::from_value(json).expect("an older record");
        assert!(!old.force_new_cluster);
        let seed = MemberConfig {
            force_new_cluster: true,
            ..config()
        };
        let json = serde_json::to_value(&seed).expect("json");
        assert_eq!(json["forceNewCluster"], true);
    }

    #[test]
    fn tls_flags_point_at_the_tls_folder_and_ask_for_certificates() {
        let mut c = config();
        c.addr.peer_url = "https://127.1.2.3:2380".into();
        c.addr.client_url = "https://127.1.2.3:2379".into();
        c.tls = MemberTls {
            peer: true,
            client: true,
            trust: "abc".into(),
        };
        let args = etcd_args(&c, Path::new("/data"), Path::new("/t"), Listen::Advertised);
        for (f, v) in [
            ("--listen-peer-urls", "https://127.1.2.3:2380"),
            ("--listen-client-urls", "https://127.1.2.3:2379"),
            ("--peer-cert-file", "/t/peer.crt"),
            ("--peer-key-file", "/t/peer.key"),
            ("--peer-trusted-ca-file", "/t/peer-ca.crt"),
            ("--cert-file", "/t/server.crt"),
            ("--key-file", "/t/server.key"),
            ("--trusted-ca-file", "/t/client-ca.crt"),
        ] {
            assert_eq!(flag(&args, f).as_deref(), Some(v), "{f}");
        }
        for f in ["--peer-client-cert-auth=true", "--client-cert-auth=true"] {
            assert!(args.iter().any(|a| a == f), "{f}");
        }
        assert_eq!(
            flag(&args, "--listen-metrics-urls").as_deref(),
            Some("http://127.1.2.3:2381"),
            "plain, also with TLS"
        );
        let pod = etcd_args(&c, Path::new("/data"), Path::new("/t"), Listen::Everywhere);
        assert_eq!(
            flag(&pod, "--listen-client-urls").as_deref(),
            Some("https://0.0.0.0:2379")
        );
        assert_eq!(
            flag(&pod, "--listen-metrics-urls").as_deref(),
            Some("http://0.0.0.0:2381")
        );
    }
}
