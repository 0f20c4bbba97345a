//! TLS clusters on the local platform, against real etcd (3.4 and 3.5):
//! created with the operator's own CA, reached with the files `status`
//! names, closed to clients without a certificate or with another CA's,
//! and healed like any cluster.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use etcd_operator::crd::EtcdCluster;
use etcd_operator::testing::{Env, client_urls, kill9};
use etcd_operator::tls::issue::{self, Usage};

fn tls_manifest(name: &str, version: &str, extra: &str) -> String {
    format!(
        "apiVersion: etcdoperator.dev/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: {name}\n\
         spec:\n  size: 3\n  version: \"{version}\"\n  tls:\n    peer: {{mode: Auto}}\n    \
         client: {{mode: Auto}}\n{extra}"
    )
}

/// The three files `status.tls` names.
fn tls_files(c: &EtcdCluster) -> (String, String, String) {
    let t = c
        .status
        .as_ref()
        .and_then(|s| s.tls.clone())
        .expect("status.tls");
    (
        t.ca_file.expect("caFile"),
        t.client_cert_file.expect("clientCertFile"),
        t.client_key_file.expect("clientKeyFile"),
    )
}

fn etcdctl_tls(
    env: &Env,
    urls: &[String],
    files: Option<(&str, &str, &str)>,
    args: &[&str],
) -> bool {
    let mut all: Vec<String> = Vec::new();
    if let Some((ca, cert, key)) = files {
        all.extend([
            format!("--cacert={ca}"),
            format!("--cert={cert}"),
            format!("--key={key}"),
        ]);
    }
    all.extend(args.iter().map(|a| a.to_string()));
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    env.etcdctl(urls, &refs).status.success()
}

/// A client certificate from a CA of its own, written beside the test.
fn stranger(dir: &Path) -> (PathBuf, PathBuf) {
    let now = SystemTime::now();
    let day = Duration::from_secs(86_400);
    let ca = issue::new_ca("stranger", day, now).expect("ca");
    let end = now + day;
    let cert = issue::issue(&ca, end, "stranger", &[], Usage::Client, day, now).expect("cert");
    let (c, k) = (dir.join("stranger.crt"), dir.join("stranger.key"));
    std::fs::write(&c, cert.cert).expect("write");
    std::fs::write(&k, cert.key).expect("write");
    (c, k)
}

fn member_record_pid(env: &Env, member: &str) -> i32 {
    env.pid("demo", member).expect("member runs")
}

fn created_reached_refused_and_healed(version: &str) {
    let mut env = Env::new();
    env.write_manifest("demo.yaml", &tls_manifest("demo", version, ""));
    env.start_operator();
    let c = env.wait_running("demo", 3);
    let urls = client_urls(&c);
    assert!(urls.iter().all(|u| u.starts_with("https://")), "{urls:?}");
    let peers: Vec<String> = c
        .status
        .iter()
        .flat_map(|s| s.members.iter().map(|m| m.peer_url.clone()))
        .collect();
    assert!(peers.iter().all(|u| u.starts_with("https://")), "{peers:?}");
    let (ca, cert, key) = tls_files(&c);
    let files = Some((ca.as_str(), cert.as_str(), key.as_str()));
    // The key is its owner's only.
    use std::os::unix::fs::MetadataExt;
    let mode = std::fs::metadata(&key).expect("key").mode() & 0o777;
    assert_eq!(mode, 0o600, "{key}");

    assert!(
        etcdctl_tls(&env, &urls, files, &["put", "k", "v"]),
        "with the status's files"
    );
    // Without a client certificate, or with one from another CA: refused.
    let plain: Vec<String> = urls
        .iter()
        .map(|u| u.replace("https://", "http://"))
        .collect();
    assert!(
        !etcdctl_tls(&env, &plain, None, &["get", "k"]),
        "plain http"
    );
    let ca_only = [format!("--cacert={ca}"), "get".into(), "k".into()];
    let refs: Vec<&str> = ca_only.iter().map(String::as_str).collect();
    assert!(
        !env.etcdctl(&urls, &refs).status.success(),
        "no client certificate"
    );
    let (sc, sk) = stranger(env.dir.path());
    let (sc, sk) = (sc.display().to_string(), sk.display().to_string());
    assert!(
        !etcdctl_tls(&env, &urls, Some((&ca, &sc, &sk)), &["get", "k"]),
        "a certificate from another CA"
    );

    // kill -9: restarted in place, same TLS.
    let name = c.status.as_ref().expect("status").members[1].name.clone();
    kill9(member_record_pid(&env, &name));
    env.wait_for("the killed member back", || {
        let s = env.status("demo")?;
        let back =
            s.status.as_ref()?.members.iter().all(|m| m.ready) && env.pid("demo", &name).is_some();
        back.then_some(())
    });
    // Wipe its data and kill it: replaced by a new member with TLS.
    let data = env.layout().data_dir("demo", &name);
    let pid = member_record_pid(&env, &name);
    std::fs::remove_dir_all(&data).expect("wipe");
    kill9(pid);
    let healed = env.wait_for("the wiped member replaced", || {
        let s = env.status("demo")?;
        let st = s.status.as_ref()?;
        let replaced = !st.members.iter().any(|m| m.name == name)
            && st.members.len() == 3
            && st.members.iter().all(|m| m.ready)
            && st.phase.as_str() == "Running";
        replaced.then_some(s)
    });
    let urls = client_urls(&healed);
    assert!(urls.iter().all(|u| u.starts_with("https://")), "{urls:?}");
    assert!(
        etcdctl_tls(&env, &urls, files, &["get", "k"]),
        "after healing"
    );
}

#[test]
fn tls_cluster_3_4() {
    created_reached_refused_and_healed("3.4.23");
}

#[test]
fn tls_cluster_3_5() {
    created_reached_refused_and_healed("3.5.1");
}
