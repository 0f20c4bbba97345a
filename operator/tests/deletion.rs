//! Deleting a cluster is deliberate and recoverable on the local platform:
//! an emptied manifests folder (every manifest gone at once) or a replaced
//! one deletes nothing and says so; a single manifest removed deletes its
//! cluster with its folder kept aside, which `undelete` puts back with its
//! data and `purge` removes for good.

use std::path::Path;
use std::process::{Command, Output};

use etcd_operator::testing::{Env, client_urls, manifest, workspace_binary};

fn cli(env: &Env, args: &[&str]) -> Output {
    Command::new(workspace_binary("etcd-operator"))
        .args(args)
        .arg("--state-dir")
        .arg(&env.state)
        .output()
        .expect("run etcd-operator")
}

fn put(env: &Env, cluster: &str, key: &str) {
    let c = env.status(cluster).expect("status");
    let out = env.etcdctl(&client_urls(&c), &["put", key, "kept"]);
    assert!(out.status.success(), "{out:?}");
}

fn get(env: &Env, cluster: &str, key: &str) -> String {
    let c = env.status(cluster).expect("status");
    let out = env.etcdctl(&client_urls(&c), &["get", key, "--print-value-only"]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The folder problem the operator reported, once it says `needle`.
fn problem(env: &Env, needle: &str) -> String {
    let file = env.state.join("manifest-problems.json");
    env.wait_for(&format!("a folder problem saying {needle:?}"), || {
        let text = std::fs::read_to_string(&file).ok()?;
        text.contains(needle).then_some(text)
    })
}

fn kept_entry(env: &Env, cluster: &str) -> String {
    let out = cli(env, &["deleted"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .find(|e| e.starts_with(&format!("{cluster}-")))
        .unwrap_or_else(|| panic!("{cluster} not listed as deleted:\n{text}"))
        .to_string()
}

fn alive(env: &Env, cluster: &str) -> bool {
    env.pid(cluster, &format!("{cluster}-0"))
        .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists())
}

#[test]
fn an_emptied_folder_deletes_nothing_and_a_deleted_cluster_comes_back() {
    let mut env = Env::new();
    env.write_manifest("a.yaml", &manifest("a", 1, "3.4.23"));
    env.write_manifest("b.yaml", &manifest("b", 1, "3.4.23"));
    env.start_operator();
    env.wait_running("a", 1);
    env.wait_running("b", 1);
    put(&env, "a", "a-key");
    put(&env, "b", "b-key");

    // Every manifest gone at once (a sync tool, a checkout): both held.
    env.remove_manifest("a.yaml");
    env.remove_manifest("b.yaml");
    let p = problem(&env, "vanished");
    assert!(p.contains("a, b"), "{p}");
    assert!(
        alive(&env, "a") && alive(&env, "b"),
        "no cluster was stopped"
    );
    assert_eq!(get(&env, "a", "a-key"), "kept");
    assert_eq!(get(&env, "b", "b-key"), "kept");

    // One manifest back (a sync writing files one by one): the other stays.
    env.write_manifest("a.yaml", &manifest("a", 1, "3.4.23"));
    problem(&env, "the manifests of b vanished");
    assert!(alive(&env, "b"), "b still held");

    // Deleting b on purpose: stopped, its folder kept aside.
    let out = cli(&env, &["delete", "b"]);
    assert!(out.status.success(), "{out:?}");
    let entry = env.wait_for("b deleted and kept aside", || {
        let out = cli(&env, &["deleted"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        text.contains("b-").then(|| kept_entry(&env, "b"))
    });
    assert!(!env.layout().cluster_dir("b").exists());
    assert!(
        env.state
            .join("deleted")
            .join(&entry)
            .join("members/b-0/data")
            .is_dir(),
        "the data is kept"
    );

    // Put back: adopted with its data.
    let out = Command::new(workspace_binary("etcd-operator"))
        .args(["undelete", &entry, "--manifests"])
        .arg(&env.manifests)
        .arg("--state-dir")
        .arg(&env.state)
        .output()
        .expect("undelete");
    assert!(out.status.success(), "{out:?}");
    env.wait_running("b", 1);
    assert_eq!(get(&env, "b", "b-key"), "kept", "b came back with its data");

    // A single manifest removed: its cluster deleted and kept; purged.
    env.remove_manifest("b.yaml");
    let entry = env.wait_for("b deleted again", || {
        let out = cli(&env, &["deleted"]);
        String::from_utf8_lossy(&out.stdout)
            .contains("b-")
            .then(|| kept_entry(&env, "b"))
    });
    let out = cli(&env, &["purge", &entry]);
    assert!(out.status.success(), "{out:?}");
    assert!(!env.state.join("deleted").join(&entry).exists());
    assert_eq!(get(&env, "a", "a-key"), "kept", "a untouched throughout");
}

#[test]
fn a_replaced_manifests_folder_deletes_nothing() {
    let mut env = Env::new();
    env.write_manifest("a.yaml", &manifest("a", 1, "3.4.23"));
    env.start_operator();
    env.wait_running("a", 1);
    put(&env, "a", "a-key");
    // The folder swapped for an empty one (an unmount shows the same).
    let aside = env.dir.path().join("manifests-old");
    std::fs::rename(&env.manifests, &aside).expect("move the folder");
    std::fs::create_dir(&env.manifests).expect("an empty folder");
    problem(&env, "not the folder the operator started with");
    assert!(alive(&env, "a"));
    assert_eq!(get(&env, "a", "a-key"), "kept");
}

/// The message of `cluster`'s DeletionPending condition, while it has one.
fn pending(env: &Env, cluster: &str) -> Option<String> {
    let s = env.status(cluster)?.status?;
    let c = s.condition("DeletionPending")?;
    (c.status == "True").then(|| c.message.clone())
}

#[test]
fn a_manifest_back_within_the_grace_keeps_the_only_cluster_running_with_its_data() {
    let mut env = Env::new();
    // A grace no test run outlasts: the manifest comes back within it.
    env.operator_args
        .extend(["--delete-grace".to_string(), "10m".to_string()]);
    env.write_manifest("solo.yaml", &manifest("solo", 1, "3.4.23"));
    env.start_operator();
    env.wait_running("solo", 1);
    put(&env, "solo", "solo-key");
    let pid = env.pid("solo", "solo-0").expect("the member runs");

    // The only manifest gone (an editor's delete-then-write, a tool
    // rewriting the folder): the deletion waits, and says until when.
    env.remove_manifest("solo.yaml");
    let message = env.wait_for("solo's deletion pending", || pending(&env, "solo"));
    assert!(
        message.contains("it is deleted at") && message.contains("--delete-grace 10m"),
        "{message}"
    );
    let out = cli(&env, &["status"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("deletion pending: no manifest names solo"),
        "{table}"
    );
    assert_eq!(env.pid("solo", "solo-0"), Some(pid), "still running");
    assert_eq!(get(&env, "solo", "solo-key"), "kept");

    // Back: the deletion is cancelled; the member never stopped.
    env.write_manifest("solo.yaml", &manifest("solo", 1, "3.4.23"));
    env.wait_for("solo's deletion cancelled", || {
        pending(&env, "solo").is_none().then_some(())
    });
    env.wait_running("solo", 1);
    assert_eq!(env.pid("solo", "solo-0"), Some(pid), "the same process");
    assert_eq!(get(&env, "solo", "solo-key"), "kept");
    let out = cli(&env, &["deleted"]);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("solo-"),
        "nothing was deleted: {out:?}"
    );
}

#[test]
fn after_the_grace_the_only_cluster_is_deleted_and_kept_aside() {
    let mut env = Env::new();
    env.operator_args
        .extend(["--delete-grace".to_string(), "1s".to_string()]);
    env.write_manifest("solo.yaml", &manifest("solo", 1, "3.4.23"));
    env.start_operator();
    env.wait_running("solo", 1);
    put(&env, "solo", "solo-key");
    let member = env.member("solo", "solo-0").and_then(|m| m.process);
    let member = member.expect("the member runs");

    env.remove_manifest("solo.yaml");
    let entry = env.wait_for("solo deleted and kept aside", || {
        let out = cli(&env, &["deleted"]);
        String::from_utf8_lossy(&out.stdout)
            .contains("solo-")
            .then(|| kept_entry(&env, "solo"))
    });
    assert!(
        !etcd_operator::platform::local::process::alive(&member),
        "its member stopped"
    );
    assert!(!env.layout().cluster_dir("solo").exists());
    assert!(
        env.state
            .join("deleted")
            .join(&entry)
            .join("members/solo-0/data")
            .is_dir(),
        "the data is kept"
    );
}
