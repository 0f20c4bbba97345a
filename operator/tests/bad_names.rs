//! The data-loss cases of bad cluster names: a manifest named `..`, `.`,
//! ``, `victim/members/victim-0` or `../../escape` is reported against its
//! file, gets no folder and no worker, and when it comes and goes another
//! cluster keeps its members, records and keys.

use std::path::Path;

use etcd_operator::cli::status as cli;
use etcd_operator::testing::files::STATE_ENTRIES;
use etcd_operator::testing::{Env, client_urls, manifest};

/// A manifest like [`manifest`] with any name (quoted for YAML).
fn named(name: &str) -> String {
    format!(
        "apiVersion: etcdoperator.dev/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: {name:?}\n\
         spec:\n  size: 1\n  version: \"3.4.23\"\n"
    )
}

/// Everything in `dir` (names only), sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Runs `victim` (one member, one key), brings a manifest named `bad` and
/// takes it away again, and checks that nothing of the victim was lost and
/// nothing was written outside the state folder.
fn victim_survives(bad: &str) {
    let mut env = Env::new();
    env.write_manifest("victim.yaml", &manifest("victim", 1, "3.4.23"));
    env.start_operator();
    let victim = env.wait_running("victim", 1);
    let member = victim.status.as_ref().expect("status").members[0]
        .name
        .clone();
    let pid = env.pid("victim", &member).expect("the victim runs");
    let urls = client_urls(&victim);
    let put = env.etcdctl(&urls, &["put", "precious", "data"]);
    assert!(put.status.success(), "{put:?}");
    let outside_before = entries(env.dir.path());

    env.write_manifest("bad.yaml", &named(bad));
    let problem = env.wait_for("the bad name reported against its file", || {
        cli::file_problems(&env.state)
            .into_iter()
            .find(|p| p.file.ends_with("bad.yaml"))
    });
    assert!(
        problem.message.contains("metadata.name")
            && problem.message.contains("not a valid cluster name"),
        "{problem:?}"
    );
    assert_eq!(
        env.layout().cluster_names().expect("clusters"),
        ["victim"],
        "no folder for {bad:?}"
    );

    env.remove_manifest("bad.yaml");
    // A cluster created and deleted after the bad manifest went: the
    // operator has by then passed every rescan in which it would have
    // deleted what the bad name pointed at.
    env.write_manifest("probe.yaml", &manifest("probe", 1, "3.4.23"));
    env.wait_running("probe", 1);
    env.remove_manifest("probe.yaml");
    env.wait_for("the probe cluster deleted", || {
        (!env.layout().cluster_dir("probe").exists()).then_some(())
    });
    env.wait_for("the problem gone with its file", || {
        cli::file_problems(&env.state).is_empty().then_some(())
    });

    assert_eq!(env.pid("victim", &member), Some(pid), "the victim runs on");
    assert!(env.member("victim", &member).is_some(), "its member record");
    assert!(
        env.layout().record_path("victim").is_file(),
        "its cluster record"
    );
    assert!(env.layout().has_data("victim", &member), "its data");
    let get = env.etcdctl(&urls, &["get", "precious", "--print-value-only"]);
    assert_eq!(String::from_utf8_lossy(&get.stdout).trim(), "data");
    assert_eq!(
        entries(env.dir.path()),
        outside_before,
        "nothing written beside the state folder"
    );
    let state = entries(&env.state);
    assert!(
        state.iter().all(|e| STATE_ENTRIES.contains(&e.as_str())),
        "{state:?}"
    );
}

#[test]
fn a_manifest_named_dot_dot_deletes_nothing() {
    victim_survives("..");
}

#[test]
fn a_manifest_named_dot_deletes_nothing() {
    victim_survives(".");
}

#[test]
fn a_manifest_with_an_empty_name_deletes_nothing() {
    victim_survives("");
}

#[test]
fn a_manifest_named_after_another_clusters_member_deletes_nothing() {
    victim_survives("victim/members/victim-0");
}

#[test]
fn a_manifest_named_to_escape_the_state_folder_writes_nothing_there() {
    victim_survives("../../escape");
}
