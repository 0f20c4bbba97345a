//! Bad manifests get a clear error naming the file and the field, a
//! Degraded condition and no action, while other clusters keep being
//! managed; a broken edit of a running cluster freezes it, never deletes it.

use std::time::{Duration, SystemTime};

use etcd_operator::cli::status as cli;
use etcd_operator::testing::{Env, kill9, manifest};

/// Waits until `cluster` is Invalid with a Degraded message containing
/// every one of `needles`, and checks no member was created.
fn assert_rejected(env: &Env, cluster: &str, needles: &[&str]) {
    let message = env.wait_for(&format!("{cluster} rejected"), || {
        let s = env.status(cluster)?.status?;
        let d = s.condition("Degraded")?;
        (s.phase.as_str() == "Invalid" && d.status == "True" && d.reason == "InvalidSpec")
            .then(|| d.message.clone())
    });
    for n in needles {
        assert!(
            message.contains(n),
            "{cluster}: {message:?} should mention {n:?}"
        );
    }
    assert!(
        env.layout()
            .member_names(cluster)
            .expect("members")
            .is_empty(),
        "{cluster}: nothing may be created for an invalid spec"
    );
}

#[test]
fn bad_manifests_are_reported_and_left_alone() {
    let mut env = Env::new();
    env.write_manifest("good.yaml", &manifest("good", 1, "3.4.23"));
    env.write_manifest(
        "malformed.yaml",
        "apiVersion: [unclosed\nkind: EtcdCluster\n",
    );
    env.write_manifest(
        "unknown.yaml",
        &manifest("unknown", 3, "3.4.23").replace("size:", "sise:"),
    );
    env.write_manifest("zero.yaml", &manifest("zero", 0, "3.4.23"));
    env.write_manifest("ten.yaml", &manifest("ten", 10, "3.4.23"));
    env.write_manifest(
        "negative.yaml",
        &manifest("negative", 1, "3.4.23").replace("size: 1", "size: -1"),
    );
    // Past every 64-bit number: the range said is the field's, not i64's.
    env.write_manifest(
        "huge.yaml",
        &manifest("huge", 1, "3.4.23").replace("size: 1", "size: 99999999999999999999"),
    );
    env.write_manifest("nobinary.yaml", &manifest("nobinary", 3, "3.9.9"));
    // A backup every 100000000h: the scheduler panicked formatting a
    // year past 9999, and no backup followed.
    env.write_manifest(
        "forever.yaml",
        &format!(
            "{}  backup: {{interval: 100000000h, maxBackups: 3}}\n",
            manifest("forever", 1, "3.4.23")
        ),
    );
    // Kubernetes-only ways to give an object store's credentials.
    for (name, field) in [
        ("keys", "credentialsSecret: s3-keys"),
        ("identity", "serviceAccountName: backup-writer"),
    ] {
        env.write_manifest(
            &format!("{name}.yaml"),
            &format!(
                "{}  backup: {{interval: 1h, maxBackups: 3, location: {{objectStore: \
                 {{url: \"s3://bucket\", {field}}}}}}}\n",
                manifest(name, 1, "3.4.23")
            ),
        );
    }
    env.write_manifest("dup-a.yaml", &manifest("dup", 1, "3.4.23"));
    env.write_manifest("dup-b.yaml", &manifest("dup", 3, "3.4.23"));
    env.start_operator();

    let good = env.wait_running("good", 1);
    assert_rejected(
        &env,
        "unknown",
        &["unknown.yaml", "unknown field `sise`", "size"],
    );
    assert_rejected(
        &env,
        "zero",
        &["zero.yaml", "spec.size", "between 1 and 9, got 0"],
    );
    assert_rejected(&env, "ten", &["ten.yaml", "spec.size", "got 10"]);
    assert_rejected(
        &env,
        "negative",
        &["negative.yaml", "spec.size", "between 1 and 9, got -1"],
    );
    assert_rejected(
        &env,
        "huge",
        &[
            "huge.yaml",
            "spec.size: 99999999999999999999 is out of range: a whole number from 1 to 9",
        ],
    );
    assert_rejected(
        &env,
        "forever",
        &[
            "forever.yaml",
            "spec.backup.interval",
            "at most 8784h (366 days)",
        ],
    );
    assert_rejected(
        &env,
        "nobinary",
        &["nobinary.yaml", "spec.version", "no etcd 3.9.9", "ci/setup"],
    );
    assert_rejected(
        &env,
        "keys",
        &[
            "spec.backup.location.objectStore.credentialsSecret",
            "operator's own environment",
            "drop it",
        ],
    );
    assert_rejected(
        &env,
        "identity",
        &[
            "spec.backup.location.objectStore.serviceAccountName",
            "workload identity",
            "drop it",
        ],
    );
    assert_rejected(
        &env,
        "dup",
        &["dup-a.yaml", "dup-b.yaml", "defined 2 times"],
    );
    // A file whose cluster cannot even be named is listed for `status`.
    let problems = env.wait_for("the malformed file reported", || {
        let p = cli::file_problems(&env.state);
        (!p.is_empty()).then_some(p)
    });
    assert!(problems[0].file.ends_with("malformed.yaml"), "{problems:?}");
    assert!(problems[0].message.contains("line 1"), "{problems:?}");

    // The good cluster is still managed: a killed member comes back.
    let member = good.status.expect("status").members[0].name.clone();
    let pid = env.pid("good", &member).expect("runs");
    kill9(pid);
    env.wait_for("the good cluster healed", || {
        (env.pid("good", &member)? != pid).then_some(())
    });
    env.wait_running("good", 1);

    // A broken edit freezes the cluster: Degraded, members untouched.
    let pid = env.pid("good", &member).expect("runs");
    env.write_manifest("good.yaml", "apiVersion: etcdoperator.dev/v1alpha1\nkind: EtcdCluster\nmetadata: {name: good}\nspec: {size: [\n");
    let message = env.wait_for("good frozen", || {
        let s = env.status("good")?.status?;
        (s.phase.as_str() == "Invalid")
            .then(|| s.condition("Degraded").map(|d| d.message.clone()))?
    });
    assert!(message.contains("good.yaml"), "{message}");
    // Let the operator look again well after the edit (past its delete
    // grace), then check it still left the members alone.
    let edited = SystemTime::now();
    env.wait_for("a status observed a second after the edit", || {
        let at = env.status("good")?.status?.observed_at?;
        let at = humantime::parse_rfc3339_weak(&at).ok()?;
        (at > edited + Duration::from_secs(1)).then_some(())
    });
    assert_eq!(
        env.pid("good", &member),
        Some(pid),
        "a broken manifest deletes nothing"
    );
    env.write_manifest("good.yaml", &manifest("good", 1, "3.4.23"));
    env.wait_running("good", 1);
    assert_eq!(
        env.pid("good", &member),
        Some(pid),
        "fixing it restarts nothing"
    );
}

#[test]
fn one_bad_document_freezes_every_cluster_of_its_file() {
    let mut env = Env::new();
    let pair = |second: &str| format!("{}---\n{second}", manifest("first", 1, "3.4.23"));
    env.write_manifest("pair.yaml", &pair(&manifest("second", 1, "3.4.23")));
    env.start_operator();
    let pids: Vec<(String, i32)> = ["first", "second"]
        .iter()
        .map(|c| {
            let m = env.wait_running(c, 1).status.expect("status").members[0]
                .name
                .clone();
            (m.clone(), env.pid(c, &m).expect("runs"))
        })
        .collect();
    // The second document breaks: both clusters of the file are frozen,
    // neither is read as deleted.
    env.write_manifest(
        "pair.yaml",
        &pair(&manifest("second", 1, "3.4.23").replace("size: 1", "size: x")),
    );
    let edited = SystemTime::now();
    for c in ["first", "second"] {
        let message = env.wait_for(&format!("{c} frozen"), || {
            let s = env.status(c)?.status?;
            (s.phase.as_str() == "Invalid")
                .then(|| s.condition("Degraded").map(|d| d.message.clone()))?
        });
        assert!(message.contains("pair.yaml"), "{c}: {message}");
    }
    for c in ["first", "second"] {
        env.wait_for(&format!("{c} observed a second after the edit"), || {
            let at = env.status(c)?.status?.observed_at?;
            let at = humantime::parse_rfc3339_weak(&at).ok()?;
            (at > edited + Duration::from_secs(1)).then_some(())
        });
    }
    for (c, (member, pid)) in ["first", "second"].iter().zip(&pids) {
        assert_eq!(env.pid(c, member), Some(*pid), "{c}: nothing deleted");
    }
    // A wrong kind in one document does the same.
    env.write_manifest(
        "pair.yaml",
        &pair(&manifest("second", 1, "3.4.23").replace("kind: EtcdCluster", "kind: Pod")),
    );
    env.wait_for("first frozen by the wrong kind", || {
        let s = env.status("first")?.status?;
        s.condition("Degraded")?
            .message
            .contains("kind:")
            .then_some(())
    });
    env.write_manifest("pair.yaml", &pair(&manifest("second", 1, "3.4.23")));
    for (c, (member, pid)) in ["first", "second"].iter().zip(&pids) {
        env.wait_running(c, 1);
        assert_eq!(
            env.pid(c, member),
            Some(*pid),
            "{c}: fixing restarts nothing"
        );
    }
}
