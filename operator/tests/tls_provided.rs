//! Certificates a user provides (`mode: Provided`, a folder locally):
//! a missing folder, a key that is not the certificate's, names that do not
//! cover a member, an expired certificate are each reported (Degraded,
//! reason TLSInvalid, naming the file and what to fix) and restart nothing;
//! good ones move the running cluster to TLS with them.

use std::time::{Duration, SystemTime};

use etcd_operator::crd::EtcdCluster;
use etcd_operator::testing::{Env, client_urls, manifest};
use etcd_operator::tls::CertKey;
use etcd_operator::tls::issue::{self, Usage};

#[path = "common/provided.rs"]
mod provided;

use provided::{tls_manifest, wait_on_https, write_folder};

const DAY: Duration = Duration::from_secs(86_400);

fn pids(env: &Env, c: &EtcdCluster) -> Vec<Option<i32>> {
    c.status
        .iter()
        .flat_map(|s| s.members.iter().map(|m| env.pid("demo", &m.name)))
        .collect()
}

/// Waits for the Degraded condition to say `needle`, reason TLSInvalid.
fn wait_invalid(env: &Env, needle: &str) -> String {
    env.wait_for(&format!("TLSInvalid saying {needle:?}"), || {
        let c = env.status("demo")?;
        let d = c.status.as_ref()?.condition("Degraded")?.clone();
        (d.reason == "TLSInvalid" && d.message.contains(needle)).then_some(d.message)
    })
}

#[test]
fn bad_certificates_are_named_and_restart_nothing_and_good_ones_are_used() {
    let mut env = Env::new();
    let plain = manifest("demo", 3, "3.4.23");
    env.write_manifest("demo.yaml", &plain);
    env.start_operator();
    let c = env.wait_running("demo", 3);
    let before = pids(&env, &c);
    let hosts: Vec<String> = client_urls(&c)
        .iter()
        .filter_map(|u| etcd_operator::tls::url_host(u).map(str::to_string))
        .collect();
    let certs = env.dir.path().join("certs");
    let with = |extra: &str| format!("{}{extra}", tls_manifest(3, &certs));
    let now = SystemTime::now();
    let ca = issue::new_ca("user", 30 * DAY, now).expect("ca");
    let ca_end = now + 30 * DAY;
    let mut all_names = hosts.clone();
    all_names.push("127.0.0.1".into());
    let good =
        issue::issue(&ca, ca_end, "etcd", &all_names, Usage::Member, DAY, now).expect("leaf");

    // No folder.
    env.write_manifest("demo.yaml", &with(""));
    let m = wait_invalid(&env, "cannot read ca.crt");
    assert!(
        m.contains("spec.tls.peer") && m.contains(&certs.display().to_string()),
        "{m}"
    );
    // The status still says what the spec asks for while it is invalid.
    let tls = env.status("demo").and_then(|c| c.status?.tls);
    assert_eq!(
        tls.map(|t| (t.peer, t.client)),
        Some(("Provided".into(), "Provided".into()))
    );
    // A key that is not the certificate's.
    let other = issue::issue(&ca, ca_end, "x", &all_names, Usage::Member, DAY, now).expect("leaf");
    let mismatched = CertKey {
        cert: good.cert.clone(),
        key: other.key,
    };
    write_folder(&certs, &ca.cert, &mismatched);
    let m = wait_invalid(&env, "does not match its private key");
    assert!(m.contains("tls.crt in"), "{m}");
    // Names that miss a member.
    let short =
        issue::issue(&ca, ca_end, "etcd", &hosts[..2], Usage::Member, DAY, now).expect("leaf");
    write_folder(&certs, &ca.cert, &short);
    let m = wait_invalid(&env, "do not cover member");
    assert!(m.contains(&hosts[2]) || m.contains("127.0.0.1"), "{m}");
    // Expired.
    let old = now - 3 * DAY;
    let expired =
        issue::issue(&ca, ca_end, "etcd", &all_names, Usage::Member, DAY, old).expect("leaf");
    write_folder(&certs, &ca.cert, &expired);
    let m = wait_invalid(&env, "expired at");
    assert!(m.contains("tls.crt in"), "{m}");
    // Signed by another CA than the one given.
    let stranger = issue::new_ca("stranger", DAY, now).expect("ca");
    write_folder(&certs, &stranger.cert, &good);
    wait_invalid(&env, "not signed by any CA in");
    // Nothing was restarted through all that.
    let still = env.status("demo").expect("status");
    assert_eq!(pids(&env, &still), before, "no member restarted");
    assert!(client_urls(&still).iter().all(|u| u.starts_with("http://")));

    // Good certificates: the cluster moves to TLS with them.
    write_folder(&certs, &ca.cert, &good);
    let on = wait_on_https(&env, "every member on https with the provided certificates");
    let tls = on
        .status
        .as_ref()
        .and_then(|s| s.tls.clone())
        .expect("status.tls");
    assert_eq!(tls.client, "Provided");
    // The status names copies of the provided files for tools.
    let args = [
        format!("--cacert={}", tls.ca_file.expect("caFile")),
        format!("--cert={}", tls.client_cert_file.expect("clientCertFile")),
        format!("--key={}", tls.client_key_file.expect("clientKeyFile")),
        "put".into(),
        "k".into(),
        "v".into(),
    ];
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = env.etcdctl(&client_urls(&on), &refs);
    assert!(out.status.success(), "{out:?}");
}
