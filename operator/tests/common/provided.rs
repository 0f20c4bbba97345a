//! For the tests of certificates a user provides (`mode: Provided`, a
//! folder locally), on the 3-member cluster `demo`.

use std::path::Path;

use etcd_operator::crd::EtcdCluster;
use etcd_operator::testing::{Env, manifest};
use etcd_operator::tls::CertKey;

/// Writes `ca` and `leaf` into `dir` as the files a user provides.
pub fn write_folder(dir: &Path, ca: &str, leaf: &CertKey) {
    std::fs::create_dir_all(dir).expect("mkdir");
    std::fs::write(dir.join("ca.crt"), ca).expect("write");
    std::fs::write(dir.join("tls.crt"), &leaf.cert).expect("write");
    std::fs::write(dir.join("tls.key"), &leaf.key).expect("write");
}

/// `demo` of `size` members, peers and clients on the certificates in
/// `certs`.
pub fn tls_manifest(size: u32, certs: &Path) -> String {
    format!(
        "{}  tls:\n    peer: {{mode: Provided, path: {p}}}\n    client: {{mode: Provided, path: \
         {p}}}\n",
        manifest("demo", size, "3.4.23"),
        p = certs.display()
    )
}

/// Waits (for `what`) until `demo` is Running with its 3 members ready,
/// their client and peer URLs `https://`; returns its resource.
pub fn wait_on_https(env: &Env, what: &str) -> EtcdCluster {
    env.wait_for(what, || {
        let c = env.status("demo")?;
        let st = c.status.as_ref()?;
        let on = st.phase.as_str() == "Running"
            && st.members.len() == 3
            && st.members.iter().all(|m| {
                m.ready
                    && m.client_url.starts_with("https://")
                    && m.peer_url.starts_with("https://")
            });
        on.then_some(c.clone())
    })
}
