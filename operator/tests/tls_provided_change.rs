//! Changes to certificates a user provides (`mode: Provided`) that must not
//! cost availability: a new CA brought in beside the old one with a new
//! leaf is trusted by every member before the new leaf is used (the members
//! that still trust only the old CA would refuse it), and a scale-up whose
//! new member the certificate does not cover adds nothing and says which
//! address to add.

use std::cell::RefCell;
use std::path::Path;
use std::time::{Duration, SystemTime};

use etcd_operator::crd::EtcdCluster;
use etcd_operator::testing::{Env, client_urls, manifest};
use etcd_operator::tls::issue::{self, Usage};
use etcd_operator::tls::{CertKey, url_host};

#[path = "common/provided.rs"]
mod provided;

use provided::{tls_manifest, wait_on_https, write_folder};

const DAY: Duration = Duration::from_secs(86_400);

fn hosts(c: &EtcdCluster) -> Vec<String> {
    let mut h: Vec<String> = client_urls(c)
        .iter()
        .filter_map(|u| url_host(u).map(str::to_string))
        .collect();
    h.push("127.0.0.1".into());
    h
}

/// A running 3-member cluster on the provided `(ca, leaf)`; its hosts.
fn tls_cluster(env: &mut Env, certs: &Path, ca: &CertKey) -> Vec<String> {
    env.write_manifest("demo.yaml", &manifest("demo", 3, "3.4.23"));
    env.start_operator();
    let hosts = hosts(&env.wait_running("demo", 3));
    let now = SystemTime::now();
    let leaf =
        issue::issue(ca, now + 30 * DAY, "etcd", &hosts, Usage::Member, DAY, now).expect("leaf");
    write_folder(certs, &ca.cert, &leaf);
    env.write_manifest("demo.yaml", &tls_manifest(3, certs));
    wait_on_https(env, "every member on https");
    hosts
}

fn installed_leaf(env: &Env, member: &str) -> String {
    let file = env
        .state
        .join(format!("clusters/demo/members/{member}/tls/server.crt"));
    std::fs::read_to_string(file).unwrap_or_default()
}

#[test]
fn a_new_provided_ca_is_trusted_by_every_member_before_its_leaf_is_used() {
    let mut env = Env::new();
    let certs = env.dir.path().join("certs");
    let now = SystemTime::now();
    let old_ca = issue::new_ca("old", 30 * DAY, now).expect("ca");
    let hosts = tls_cluster(&mut env, &certs, &old_ca);

    // The change, as cert-manager's CA rollover or a user makes it: the new
    // CA beside the old one in ca.crt, and a leaf of the new CA.
    let new_ca = issue::new_ca("new", 30 * DAY, now).expect("ca");
    let new_leaf = issue::issue(
        &new_ca,
        now + 30 * DAY,
        "etcd",
        &hosts,
        Usage::Member,
        DAY,
        now,
    )
    .expect("leaf");
    let bundle = format!("{}{}", new_ca.cert, old_ca.cert);
    write_folder(&certs, &bundle, &new_leaf);

    let troubles = RefCell::new(Vec::new());
    env.wait_for("every member on the new leaf, the cluster Running", || {
        let c = env.status("demo")?;
        let st = c.status.as_ref()?;
        for cond in &st.conditions {
            let bad = (cond.type_ == "Available" && cond.status != "True")
                || (cond.type_ == "Degraded"
                    && cond.status == "True"
                    && ["QuorumLost", "TLSInvalid", "ActionFailed"]
                        .contains(&cond.reason.as_str()));
            if bad {
                troubles
                    .borrow_mut()
                    .push(format!("{}: {}: {}", cond.type_, cond.reason, cond.message));
            }
        }
        let done = st.phase.as_str() == "Running"
            && st.members.len() == 3
            && st
                .members
                .iter()
                .all(|m| m.ready && installed_leaf(&env, &m.name) == new_leaf.cert);
        done.then_some(())
    });
    let troubles = troubles.into_inner();
    assert!(
        troubles.is_empty(),
        "the cluster was unavailable or refused during the change: {troubles:#?}"
    );

    // A client with the new certificate is served.
    let key_dir = env.dir.path().join("client");
    write_folder(&key_dir, &bundle, &new_leaf);
    let c = env.status("demo").expect("status");
    let args = [
        format!("--cacert={}", key_dir.join("ca.crt").display()),
        format!("--cert={}", key_dir.join("tls.crt").display()),
        format!("--key={}", key_dir.join("tls.key").display()),
        "put".into(),
        "k".into(),
        "v".into(),
    ];
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = env.etcdctl(&client_urls(&c), &refs);
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn a_scale_up_the_provided_certificate_does_not_cover_adds_nothing_and_names_the_address() {
    let mut env = Env::new();
    let certs = env.dir.path().join("certs");
    let ca = issue::new_ca("user", 30 * DAY, SystemTime::now()).expect("ca");
    let hosts = tls_cluster(&mut env, &certs, &ca);

    env.write_manifest("demo.yaml", &tls_manifest(4, &certs));
    let message = env.wait_for("the uncovered member named", || {
        let c = env.status("demo")?;
        let d = c.status.as_ref()?.condition("Degraded")?.clone();
        (d.message.contains("do not cover member demo-3")).then_some(d.message)
    });
    assert!(message.contains("is not added"), "{message}");
    let host = message
        .split("demo-3 at ")
        .nth(1)
        .and_then(|rest| rest.split([';', ' ']).next())
        .expect("the address in the message")
        .to_string();
    assert!(!hosts.contains(&host), "{host} is a new address");
    // etcd's member list still has the three members: no learner was added.
    let c = env.status("demo").expect("status");
    let out = env.etcdctl(
        &client_urls(&c),
        &[
            &format!("--cacert={}", certs.join("ca.crt").display()),
            &format!("--cert={}", certs.join("tls.crt").display()),
            &format!("--key={}", certs.join("tls.key").display()),
            "member",
            "list",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        3,
        "{out:?}"
    );

    // A certificate that covers the address the message named: the member
    // is added.
    let mut all = hosts;
    all.push(host);
    let now = SystemTime::now();
    let leaf =
        issue::issue(&ca, now + 30 * DAY, "etcd", &all, Usage::Member, DAY, now).expect("leaf");
    write_folder(&certs, &ca.cert, &leaf);
    env.wait_running("demo", 4);
}
