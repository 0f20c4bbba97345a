//! A 3-member cluster run by the operator, filled with ~100 MiB
//! (`BENCH_SNAPSHOT_MIB`) of 1 MiB values: what the snapshot benchmarks
//! back up.

use etcd_operator::crd::MemberStatus;
use etcd_operator::testing::{Env, client_urls, manifest};

/// Size of each value written.
const VALUE: usize = 1 << 20;

/// The cluster (its operator stops when `env` is dropped) and the
/// follower the benchmarks take snapshots from.
pub struct Filled {
    /// The operator's environment.
    pub env: Env,
    /// A follower.
    pub member: MemberStatus,
}

/// Starts cluster `s` and fills it.
pub fn filled(rt: &tokio::runtime::Runtime) -> Filled {
    let mb: usize = std::env::var("BENCH_SNAPSHOT_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let mut env = Env::new();
    env.operator_bin = Some(env!("CARGO_BIN_EXE_etcd-operator").into());
    env.log_filter = "info".into();
    env.write_manifest("s.yaml", &manifest("s", 3, "3.4.23"));
    env.start_operator();
    let c = env.wait_running("s", 3);
    let urls = client_urls(&c);
    let status = c.status.unwrap();
    let member = status.members.iter().find(|m| !m.leader).unwrap().clone();
    rt.block_on(async {
        let mut client = etcd_client::Client::connect(urls, None).await.unwrap();
        let value = vec![b'x'; VALUE];
        for i in 0..mb {
            let key = format!("big/{i:05}");
            client.put(key, value.clone(), None).await.unwrap();
        }
    });
    Filled { env, member }
}
