//! A real 3-member etcd cluster laid out like the operator's state folder,
//! but started by the test itself (no operator: members stay down when a
//! fault stops them, and extra etcd flags such as a small quota can be
//! given), and a guard that removes every kernel rule a monkey left,
//! also when a test fails.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use etcd_operator::etcd::Clients;
use etcd_operator::member::MemberAddr;
use etcd_operator::platform::local::layout::{MemberRecord, write_json};
use etcd_operator::platform::local::process::ProcessId;
use etcd_operator::testing::bootstrap_config;

use super::{FakeState, wait_for};

/// A running cluster `net` of real etcd members.
pub struct Cluster {
    pub state: FakeState,
    pub names: Vec<String>,
    pub ips: Vec<Ipv4Addr>,
    pub flags: Vec<String>,
    /// The etcd version the members run (a folder of `.etcd/`).
    pub version: &'static str,
    initial: String,
}

/// Three loopback addresses no other test is likely to use.
fn addresses(n: usize) -> Vec<Ipv4Addr> {
    let seed = u32::from(std::process::id() as u16)
        ^ SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(7);
    let b = 1 + (seed % 250) as u8;
    let c = 1 + ((seed >> 8) % 250) as u8;
    let base = 1 + ((seed >> 16) % 200) as u8;
    (0..n)
        .map(|i| Ipv4Addr::new(127, b, c, base + i as u8))
        .collect()
}

impl Cluster {
    /// Starts `n` members of etcd 3.4.23 with `flags` added, and waits until
    /// they have a leader.
    pub fn start(n: usize, flags: &[&str]) -> Cluster {
        Cluster::start_version(n, "3.4.23", flags)
    }

    /// Starts `n` members of etcd `version` (3.4.23 or 3.5.1).
    pub fn start_version(n: usize, version: &'static str, flags: &[&str]) -> Cluster {
        let ips = addresses(n);
        let names: Vec<String> = (0..n).map(|i| format!("net-{i}")).collect();
        let initial = names
            .iter()
            .zip(&ips)
            .map(|(m, ip)| format!("{m}=http://{ip}:2380"))
            .collect::<Vec<_>>()
            .join(",");
        let mut c = Cluster {
            state: FakeState::new(),
            names,
            ips,
            flags: flags.iter().map(|s| s.to_string()).collect(),
            version,
            initial,
        };
        for i in 0..n {
            c.spawn(i, "new");
        }
        c.wait_leader();
        c
    }

    pub fn bin(&self) -> PathBuf {
        etcd_operator::testing::binaries().join(format!("{}/etcd", self.version))
    }

    pub fn url(&self, i: usize) -> String {
        format!("http://{}:2379", self.ips[i])
    }

    pub fn data_dir(&self, i: usize) -> PathBuf {
        self.state.layout().data_dir("net", &self.names[i])
    }

    pub fn log(&self, i: usize) -> PathBuf {
        self.state.dir.path().join(format!("{}.log", self.names[i]))
    }

    /// etcd's arguments for member `i`.
    pub fn args(&self, i: usize, state: &str) -> Vec<String> {
        let ip = self.ips[i];
        let mut a: Vec<String> = [
            "--name",
            &self.names[i],
            "--data-dir",
            self.data_dir(i).to_str().expect("utf-8"),
            "--listen-client-urls",
            &format!("http://{ip}:2379"),
            "--advertise-client-urls",
            &format!("http://{ip}:2379"),
            "--listen-peer-urls",
            &format!("http://{ip}:2380"),
            "--initial-advertise-peer-urls",
            &format!("http://{ip}:2380"),
            "--initial-cluster",
            &self.initial,
            "--initial-cluster-state",
            state,
            "--initial-cluster-token",
            "net",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(self.flags.iter().cloned());
        a
    }

    /// Starts member `i` (again) and records it like the operator does.
    pub fn spawn(&mut self, i: usize, state: &str) -> ProcessId {
        let args = self.args(i, state);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let log = self.log(i);
        let id = self.state.spawn_logged(&self.bin(), &args, &log);
        let addr = MemberAddr {
            name: self.names[i].clone(),
            peer_url: format!("http://{}:2380", self.ips[i]),
            client_url: self.url(i),
        };
        let version = self.version.parse().expect("version");
        let record = MemberRecord {
            config: bootstrap_config(addr, version, self.initial.clone(), "net"),
            ip: self.ips[i],
            process: Some(id),
            started_at: Some(
                humantime::format_rfc3339_millis(SystemTime::now() - Duration::from_secs(3600))
                    .to_string(),
            ),
        };
        write_json(
            &self.state.layout().member_record("net", &self.names[i]),
            &record,
        )
        .expect("member record");
        id
    }

    pub fn state_arg(&self) -> &str {
        self.state.state_arg()
    }

    /// Each member's status: (leader id, own id, term, index, errors), or
    /// `None` when it does not answer.
    pub fn statuses(&self) -> Vec<Option<etcd_operator::etcd::MemberStatus>> {
        let rt = rt();
        let clients = Clients::new(Duration::from_secs(2));
        (0..self.names.len())
            .map(|i| rt.block_on(clients.status(&self.url(i))).ok())
            .collect()
    }

    /// Index of the member every answering member names as leader.
    pub fn wait_leader(&self) -> usize {
        wait_for("one leader all members agree on", || {
            let s = self.statuses();
            let first = s.first()?.as_ref()?;
            let leader = first.leader;
            let all = s.iter().all(|m| {
                m.as_ref()
                    .is_some_and(|m| m.leader == leader && leader != 0 && m.errors.is_empty())
            });
            if !all {
                return None;
            }
            s.iter()
                .position(|m| m.as_ref().is_some_and(|m| m.id == leader))
        })
    }

    /// Index of member `name`.
    pub fn index(&self, name: &str) -> usize {
        self.names
            .iter()
            .position(|n| n == name)
            .expect("a member of net")
    }
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Removes, on drop, whatever the monkey `pid` left in the kernel (its
/// chains, cgroups, records): a failing test leaves nothing behind.
pub struct RulesGuard(pub i32);

impl RulesGuard {
    /// Whether the kernel holds nothing of monkey `pid` any more.
    pub fn clean(pid: i32) -> Result<(), String> {
        let tag = format!("CM-{pid}-");
        for table in ["filter", "mangle"] {
            let out = std::process::Command::new("iptables")
                .args(["-w", "-t", table, "-S"])
                .output()
                .map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&out.stdout);
            if let Some(l) = text.lines().find(|l| l.contains(&tag)) {
                return Err(format!("iptables {table} still has: {l}"));
            }
        }
        if let Ok(d) = std::fs::read_dir(chaos_monkey::net::LEDGER_DIR)
            && let Some(e) = d
                .flatten()
                .find(|e| e.file_name().to_string_lossy().starts_with(&tag))
        {
            return Err(format!("ledger {} is left", e.path().display()));
        }
        if let Some(root) = chaos_monkey::net::sys::cgroup2_root()
            && let Some(dir) = find_cgroup(&root, &tag.to_lowercase(), 0)
        {
            return Err(format!("cgroup {} is left", dir.display()));
        }
        Ok(())
    }
}

fn find_cgroup(dir: &Path, prefix: &str, depth: usize) -> Option<PathBuf> {
    if depth > 3 {
        return None;
    }
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if !p.is_dir() {
            continue;
        }
        if e.file_name().to_string_lossy().starts_with(prefix) {
            return Some(p);
        }
        if let Some(found) = find_cgroup(&p, prefix, depth + 1) {
            return Some(found);
        }
    }
    None
}

impl Drop for RulesGuard {
    fn drop(&mut self) {
        // The monkey is stopped first (a no-op when it is gone), so what it
        // left counts as a gone monkey's, which --cleanup's code removes.
        if let Some(pid) = rustix::process::Pid::from_raw(self.0) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while etcd_operator::platform::local::process::ProcessId::of(self.0).is_some()
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        // Only this monkey's: other tests' leftovers are theirs to check.
        for l in chaos_monkey::net::leftovers().unwrap_or_default() {
            let r = match &l {
                chaos_monkey::net::Leftover::Ledger(a) if a.owner.pid == self.0 => {
                    chaos_monkey::net::heal(a)
                }
                chaos_monkey::net::Leftover::Chain(c)
                    if chaos_monkey::net::owner_pid(c) == Some(self.0) =>
                {
                    chaos_monkey::net::remove_chains(c)
                }
                _ => Ok(()),
            };
            if let Err(e) = r {
                eprintln!("cleanup after the test failed: {e}");
            }
        }
    }
}
