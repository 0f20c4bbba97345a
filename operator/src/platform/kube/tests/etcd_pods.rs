//! Real etcd behind the fake API server: members as etcd processes on
//! loopback addresses (their "pod IPs"), recorded with client URLs that are
//! cluster DNS names (which do not resolve here, so the operator must call
//! the pod IPs). The processes are killed when [`EtcdPods`] is dropped,
//! also when a test fails.

use std::collections::{BTreeMap, HashSet};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::process::Child;

use super::fake::{Fake, fake};
use super::fixtures::Seen;
use super::kubelet::Kubelet;
use super::rbac::collection;
use super::trouble::{put_record, put_resource};
use crate::crd::{EtcdCluster, StoragePolicy};
use crate::etcd::Clients;
use crate::member::{MemberAddr, MemberConfig};
use crate::platform::Platform;
use crate::platform::kube::KubePlatform;
use crate::platform::kube::follow::service_url;
use crate::platform::kube::pod::DEFAULT_IMAGE;
use crate::testing::{bootstrap_config, etcd_binary, free_loopback};
use crate::tls::issue::{Usage, issue, new_ca};
use crate::tls::{ClientTls, with_scheme};
use crate::version::Version;

/// Member `name` at `ip`: peers at the IP, clients told the DNS name.
pub fn config(name: &str, ip: Ipv4Addr, initial_cluster: &str, version: &str) -> MemberConfig {
    let addr = MemberAddr {
        name: name.into(),
        peer_url: format!("http://{ip}:2380"),
        client_url: format!("http://{name}.demo.default.svc:2379"),
    };
    let version = version.parse::<Version>().expect("a version");
    bootstrap_config(addr, version, initial_cluster, "demo-token")
}

/// `demo-0..N` as etcd processes.
pub struct EtcdPods {
    /// Each member's address.
    pub ips: Vec<Ipv4Addr>,
    /// Each member's config, as its pod and claim record it.
    pub configs: Vec<MemberConfig>,
    /// Clients with a 1 s timeout.
    pub clients: Arc<Clients>,
    /// The CAs and a client certificate, when members serve clients over
    /// TLS ([`EtcdPods::start_tls`]).
    pub tls: Option<ClientTls>,
    procs: Vec<Option<Child>>,
    dir: tempfile::TempDir,
    /// Addresses kept for members [`Self::join`] starts, and the hosts
    /// file every member sees, where the pods' DNS names resolve
    /// ([`Self::start_resolving`]).
    resolving: Option<(Vec<Ipv4Addr>, PathBuf)>,
}

impl EtcdPods {
    /// Starts `n` members of `version` and waits until all have a leader.
    pub async fn start(seed: &str, version: &str, n: usize) -> EtcdPods {
        Self::start_with(seed, version, n, false).await
    }

    /// [`Self::start`] with clients served over TLS: a CA of the test's,
    /// each member's certificate for its IP and the DNS names a pod's has
    /// (its own through the headless Service, the client Service's), and
    /// client certificates required.
    pub async fn start_tls(seed: &str, version: &str, n: usize) -> EtcdPods {
        Self::start_with(seed, version, n, true).await
    }

    /// [`Self::start`], with room for `total` members: each member sees a
    /// hosts file where the pod DNS names `demo-I.demo.default.svc` of all
    /// `total` resolve to their addresses, as cluster DNS would (a mount
    /// namespace of its own, as root), so members the operator adds under
    /// those names can be started by [`Self::join`] and reached.
    pub async fn start_resolving(seed: &str, version: &str, n: usize, total: usize) -> EtcdPods {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let mut taken = HashSet::new();
        let reserved: Vec<Ipv4Addr> = (0..total)
            .map(|i| {
                let ip = free_loopback(&format!("{seed}/demo-{i}"), &taken);
                taken.insert(ip);
                ip
            })
            .collect();
        let mut hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
        for (i, ip) in reserved.iter().enumerate() {
            hosts.push_str(&format!("\n{ip} demo-{i}.demo.default.svc\n"));
        }
        let path = dir.path().join("hosts");
        std::fs::write(&path, hosts).expect("a hosts file");
        Self::start_in(dir, seed, version, n, false, Some((reserved, path))).await
    }

    async fn start_with(seed: &str, version: &str, n: usize, tls: bool) -> EtcdPods {
        let dir = tempfile::tempdir().expect("a temporary folder");
        Self::start_in(dir, seed, version, n, tls, None).await
    }

    async fn start_in(
        dir: tempfile::TempDir,
        seed: &str,
        version: &str,
        n: usize,
        tls: bool,
        resolving: Option<(Vec<Ipv4Addr>, PathBuf)>,
    ) -> EtcdPods {
        let mut taken = HashSet::new();
        let reserved = resolving.as_ref().map(|(ips, _)| ips.clone());
        let ips: Vec<Ipv4Addr> = (0..n)
            .map(|i| match &reserved {
                Some(r) => r[i],
                None => {
                    let ip = free_loopback(&format!("{seed}/demo-{i}"), &taken);
                    taken.insert(ip);
                    ip
                }
            })
            .collect();
        let initial_cluster = (0..n)
            .map(|i| format!("demo-{i}=http://{}:2380", ips[i]))
            .collect::<Vec<_>>()
            .join(",");
        let configs = (0..n)
            .map(|i| {
                let mut c = config(&format!("demo-{i}"), ips[i], &initial_cluster, version);
                c.addr.client_url = crate::tls::with_scheme(&c.addr.client_url, tls);
                c
            })
            .collect();
        let tls = tls.then(|| test_tls(dir.path(), &ips));
        let mut pods = EtcdPods {
            ips,
            configs,
            clients: Arc::new(Clients::new(Duration::from_secs(1))),
            tls,
            procs: Vec::new(),
            dir,
            resolving,
        };
        for i in 0..n {
            pods.clients.set_tls(&pods.url(i), pods.tls.clone());
        }
        for i in 0..n {
            let child = pods.spawn(i, version);
            pods.procs.push(Some(child));
        }
        pods.wait_healthy(&(0..n).collect::<Vec<_>>()).await;
        pods
    }

    /// Puts in `fake` what the API server shows of a running cluster of
    /// these members: the resource `r`, its record naming them, and for
    /// each a ready pod running `version` at its IP, with a bound claim
    /// when `storage` is persistent.
    pub fn seat(&self, fake: &Fake, r: &EtcdCluster, storage: StoragePolicy, version: &str) {
        put_resource(fake, r);
        put_record(
            fake,
            r,
            self.configs.iter().map(|c| c.addr.clone()).collect(),
        );
        for (i, c) in self.configs.iter().enumerate() {
            let pod = Seen::pod_of(c, storage).ready().runs(version).started();
            fake.put(&collection("pods"), pod.ip(&self.ips[i].to_string()).json());
            if storage == StoragePolicy::Persistent {
                fake.put(
                    &collection("persistentvolumeclaims"),
                    Seen::claim_of(c).started().json(),
                );
            }
        }
    }

    /// `http://IP:2379` of member `i` (`https://` with TLS).
    pub fn url(&self, i: usize) -> String {
        let url = format!("http://{}:2379", self.ips[i]);
        crate::tls::with_scheme(&url, self.tls.is_some())
    }

    /// A platform with a backup image on a mocked API server, `r` put and
    /// prepared (registered, its follower applied when it asks for one),
    /// and a stand-in kubelet that finds member 0 at its own client URL and
    /// at the client Service's (where backup Jobs and the follower call).
    pub async fn backup_platform(&self, r: &EtcdCluster) -> (KubePlatform, Fake, Kubelet) {
        self.backup_platform_with(r, |_| {}).await
    }

    /// [`Self::backup_platform`], with `before` putting what the API
    /// server holds before the platform starts (a Secret).
    pub async fn backup_platform_with(
        &self,
        r: &EtcdCluster,
        before: impl FnOnce(&Fake),
    ) -> (KubePlatform, Fake, Kubelet) {
        let (client, fake) = fake();
        before(&fake);
        let dns = BTreeMap::from([
            (self.configs[0].addr.client_url.clone(), self.url(0)),
            (service_url("demo", "default"), self.url(0)),
            (
                with_scheme(&service_url("demo", "default"), true),
                self.url(0),
            ),
        ]);
        let kubelet = Kubelet::start(fake.clone(), dns);
        put_resource(&fake, r);
        let platform = KubePlatform::new(client, "default", DEFAULT_IMAGE)
            .with_backup_image(Some("etcd-operator:test".into()));
        platform
            .prepare("demo", r, 1, true)
            .await
            .expect("prepared");
        (platform, fake, kubelet)
    }

    /// etcd of `version`, in a mount namespace that sees the hosts file
    /// when members resolve the pods' names.
    fn etcd(&self, version: &str) -> tokio::process::Command {
        match &self.resolving {
            Some((_, hosts)) => {
                // unshare execs sh, which execs etcd: one process, killed
                // on drop.
                let mut cmd = tokio::process::Command::new("unshare");
                cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
                    .arg(r#"mount --bind "$0" /etc/hosts && exec "$@""#)
                    .arg(hosts)
                    .arg(etcd_binary(version));
                cmd
            }
            None => tokio::process::Command::new(etcd_binary(version)),
        }
    }

    /// Starts the member the operator created with `config` (a pod its
    /// kubelet would start), on the address kept for it; returns its
    /// index and address. Needs [`Self::start_resolving`].
    pub fn join(&mut self, config: &MemberConfig, version: &str) -> (usize, Ipv4Addr) {
        let i: usize = config
            .addr
            .name
            .rsplit('-')
            .next()
            .and_then(|n| n.parse().ok())
            .expect("a member named demo-N");
        let (reserved, _) = self.resolving.as_ref().expect("started resolving names");
        let ip = reserved[i];
        let name = &config.addr.name;
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("{name}.log")))
            .expect("a log");
        let child = self
            .etcd(version)
            .args(["--name", name])
            .arg("--data-dir")
            .arg(self.dir.path().join(name))
            .args(["--listen-peer-urls", &format!("http://{ip}:2380")])
            .args(["--initial-advertise-peer-urls", &config.addr.peer_url])
            .args(["--listen-client-urls", &format!("http://{ip}:2379")])
            .args(["--advertise-client-urls", &config.addr.client_url])
            .args(["--initial-cluster", &config.initial_cluster])
            .args(["--initial-cluster-state", "existing"])
            .args(["--initial-cluster-token", &config.token])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("etcd starts");
        while self.ips.len() <= i {
            self.ips.push(ip);
            self.procs.push(None);
        }
        self.ips[i] = ip;
        self.procs[i] = Some(child);
        (i, ip)
    }

    fn spawn(&self, i: usize, version: &str) -> Child {
        let c = &self.configs[i];
        let dir = self.dir.path();
        let name = &c.addr.name;
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(dir.join(format!("{name}.log")))
            .expect("a log");
        let client = self.url(i);
        let mut cmd = self.etcd(version);
        if self.tls.is_some() {
            let file = |f: &str| dir.join(format!("{name}.{f}"));
            cmd.arg("--cert-file").arg(file("crt"));
            cmd.arg("--key-file").arg(file("key"));
            cmd.arg("--trusted-ca-file").arg(dir.join("ca.crt"));
            cmd.arg("--client-cert-auth");
        }
        cmd.args(["--name", name])
            .arg("--data-dir")
            .arg(dir.join(name))
            .args(["--listen-peer-urls", &c.addr.peer_url])
            .args(["--initial-advertise-peer-urls", &c.addr.peer_url])
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--initial-cluster", &c.initial_cluster])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", &c.token])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("etcd starts")
    }

    /// Kills member `i` (SIGKILL) and waits for it to be gone.
    pub async fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.procs[i].take() {
            child.kill().await.expect("killed");
        }
    }

    /// Runs member `i` again, on its data, as `version`.
    pub async fn restart(&mut self, i: usize, version: &str) {
        self.kill(i).await;
        let child = self.spawn(i, version);
        self.procs[i] = Some(child);
        self.wait_healthy(&[i]).await;
    }

    /// Waits (up to 30 s) until each of `members` answers with a leader.
    pub async fn wait_healthy(&self, members: &[usize]) {
        let since = Instant::now();
        loop {
            let mut all = true;
            for &i in members {
                let url = self.url(i);
                all &= self.clients.status(&url).await.is_ok_and(|s| s.leader != 0);
            }
            if all {
                return;
            }
            assert!(
                since.elapsed() < Duration::from_secs(30),
                "etcd did not form; logs in {}",
                self.dir.path().display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A CA in `dir/ca.crt`, a certificate for each member `demo-i` at
/// `ips[i]` in `dir/demo-i.crt` and `.key`, and a client certificate,
/// returned.
fn test_tls(dir: &std::path::Path, ips: &[Ipv4Addr]) -> ClientTls {
    let now = std::time::SystemTime::now();
    let year = Duration::from_secs(365 * 24 * 3600);
    let ca = new_ca("demo", year, now).expect("a CA");
    std::fs::write(dir.join("ca.crt"), &ca.cert).expect("ca.crt");
    let client = crate::platform::kube::objects::client_service_name("demo");
    for (i, ip) in ips.iter().enumerate() {
        let names = vec![
            format!("demo-{i}.demo.default.svc"),
            format!("{client}.default.svc"),
            ip.to_string(),
        ];
        let pair = issue(
            &ca,
            now + year,
            &format!("demo-{i}"),
            &names,
            Usage::Member,
            year,
            now,
        )
        .expect("a member certificate");
        std::fs::write(dir.join(format!("demo-{i}.crt")), &pair.cert).expect("crt");
        std::fs::write(dir.join(format!("demo-{i}.key")), &pair.key).expect("key");
    }
    let cert_key = issue(
        &ca,
        now + year,
        "demo-client",
        &[],
        Usage::Client,
        year,
        now,
    )
    .expect("a client certificate");
    ClientTls {
        ca: ca.cert,
        cert_key,
        server_name: None,
    }
}
