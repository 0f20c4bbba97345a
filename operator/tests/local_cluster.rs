//! The operator on the local platform, against real etcd processes.

use etcd_operator::crd::EtcdCluster;
use etcd_operator::platform::local::process;
use etcd_operator::testing::{Env, client_urls, kill9, manifest};

/// The member ids `c`'s status publishes, in its order.
fn status_ids(c: &EtcdCluster) -> Vec<Option<String>> {
    let members = &c.status.as_ref().expect("status").members;
    members.iter().map(|m| m.id.clone()).collect()
}

fn member_ids(env: &Env, urls: &[String]) -> Vec<String> {
    let out = env.etcdctl(urls, &["member", "list", "-w", "json"]);
    assert!(out.status.success(), "member list: {out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("member list json");
    v["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| format!("{:x}", m["ID"].as_u64().expect("id")))
        .collect()
}

#[test]
fn create_restart_replace_and_delete() {
    let mut env = Env::new();
    env.write_manifest("demo.yaml", &manifest("demo", 3, "3.4.23"));
    env.start_operator();
    let c = env.wait_running("demo", 3);
    let urls = client_urls(&c);

    // `status` as a user runs it: the table, one cluster's members, JSON.
    let status = |args: &[&str]| {
        let out =
            std::process::Command::new(etcd_operator::testing::workspace_binary("etcd-operator"))
                .arg("status")
                .args(args)
                .arg("--state-dir")
                .arg(&env.state)
                .output()
                .expect("run etcd-operator status");
        assert!(out.status.success(), "status {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let table = status(&[]);
    for needle in [
        "CLUSTER", "PHASE", "MEMBERS", "LEADER", "VERSION", "demo", "Running", "3.4.23",
    ] {
        assert!(table.contains(needle), "{needle:?} in\n{table}");
    }
    let one = status(&["demo"]);
    for m in &c.status.as_ref().expect("status").members {
        assert!(
            one.contains(&m.name) && one.contains(&m.client_url),
            "{one}"
        );
    }
    let json: serde_json::Value =
        serde_json::from_str(&status(&["demo", "-o", "json"])).expect("status json");
    assert_eq!(json["metadata"]["name"], "demo");
    assert_eq!(json["spec"]["size"], 3);
    assert_eq!(json["status"]["phase"], "Running");
    let members = json["status"]["members"].as_array().expect("members");
    assert_eq!(members.len(), 3);
    for m in members {
        for key in [
            "name",
            "id",
            "clientURL",
            "peerURL",
            "ready",
            "leader",
            "version",
        ] {
            assert!(!m[key].is_null(), "{key} in {m}");
        }
    }
    assert_eq!(members.iter().filter(|m| m["leader"] == true).count(), 1);
    let all: serde_json::Value =
        serde_json::from_str(&status(&["-o", "json"])).expect("status list json");
    assert_eq!(all["kind"], "List");
    assert_eq!(all["items"][0]["metadata"]["name"], "demo");

    // The official client works against it.
    let put = env.etcdctl(&urls, &["put", "greeting", "hello"]);
    assert!(put.status.success(), "etcdctl put: {put:?}");
    let get = env.etcdctl(&urls, &["get", "greeting", "--print-value-only"]);
    assert_eq!(String::from_utf8_lossy(&get.stdout), "hello\n");

    // kill -9 a member: restarted in place, same member id.
    let members = c.status.clone().expect("status").members;
    let victim = members[1].clone();
    let old_pid = env.pid("demo", &victim.name).expect("victim runs");
    kill9(old_pid);
    env.wait_for("the killed member back with the same id", || {
        let c = env.wait_running("demo", 3);
        let m = c
            .status?
            .members
            .into_iter()
            .find(|m| m.name == victim.name)?;
        let pid = env.pid("demo", &victim.name)?;
        (m.ready && m.id == victim.id && pid != old_pid).then_some(())
    });

    // Wipe a member's data and kill it: replaced by a new member.
    let victim = members[2].clone();
    let old_pid = env.pid("demo", &victim.name).expect("victim runs");
    std::fs::remove_dir_all(env.layout().data_dir("demo", &victim.name)).expect("wipe data");
    kill9(old_pid);
    let c = env.wait_replaced("the wiped member replaced", "demo", 3, &[&victim.name]);
    let urls = client_urls(&c);
    let ids = member_ids(&env, &urls);
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(
        !ids.contains(victim.id.as_ref().expect("id")),
        "the old member {victim:?} is gone from the member list {ids:?}"
    );
    let get = env.etcdctl(&urls, &["get", "greeting", "--print-value-only"]);
    assert_eq!(String::from_utf8_lossy(&get.stdout), "hello\n", "data kept");

    // Deleting the manifest stops the processes and removes the state.
    let records: Vec<_> = env
        .layout()
        .member_names("demo")
        .expect("members")
        .iter()
        .filter_map(|m| env.member("demo", m)?.process)
        .collect();
    assert_eq!(records.len(), 3);
    env.remove_manifest("demo.yaml");
    env.wait_for("processes gone and state removed", || {
        let gone = records.iter().all(|p| !process::alive(p));
        (gone && !env.layout().cluster_dir("demo").exists()).then_some(())
    });
}

#[test]
fn operator_restart_adopts_members_without_restarting_them() {
    let mut env = Env::new();
    env.write_manifest("adopt.yaml", &manifest("adopt", 3, "3.4.23"));
    env.start_operator();
    let c = env.wait_running("adopt", 3);
    let names: Vec<String> = c
        .status
        .expect("status")
        .members
        .iter()
        .map(|m| m.name.clone())
        .collect();
    let pids: Vec<i32> = names
        .iter()
        .map(|n| env.pid("adopt", n).expect("runs"))
        .collect();

    env.stop_operator();
    for (n, p) in names.iter().zip(&pids) {
        assert_eq!(env.pid("adopt", n), Some(*p), "{n} outlived the operator");
    }
    env.start_operator();
    // A fresh status, published by the new operator.
    let before = env.status("adopt").and_then(|c| c.status?.observed_at);
    env.wait_for("a status from the new operator", || {
        let now = env.status("adopt")?.status?.observed_at;
        (now != before).then_some(())
    });
    env.wait_running("adopt", 3);
    for (n, p) in names.iter().zip(&pids) {
        assert_eq!(
            env.pid("adopt", n),
            Some(*p),
            "{n} was adopted, not restarted"
        );
    }
    // The adopted members are watched: a kill is still healed.
    kill9(pids[0]);
    env.wait_for("the adopted member restarted", || {
        let pid = env.pid("adopt", &names[0])?;
        (pid != pids[0]).then_some(())
    });
    env.wait_running("adopt", 3);
}

#[test]
fn a_member_whose_data_is_corrupt_is_replaced_after_it_keeps_crashing() {
    let mut env = Env::new();
    env.write_manifest("crash.yaml", &manifest("crash", 3, "3.4.23"));
    env.start_operator();
    let c = env.wait_running("crash", 3);
    let victim = c.status.expect("status").members[1].clone();
    let pid = env.pid("crash", &victim.name).expect("runs");
    // Garbage in place of its database: etcd exits with an error at start.
    let db = env
        .layout()
        .data_dir("crash", &victim.name)
        .join("member/snap/db");
    std::fs::write(&db, vec![0xAB; 64 * 1024]).expect("corrupt the db");
    kill9(pid);
    let c = env.wait_replaced("the crashing member replaced", "crash", 3, &[&victim.name]);
    let log = std::fs::read_to_string(env.operator_log()).expect("log");
    let crashes = log
        .lines()
        .filter(|l| {
            l.contains("member process exited")
                && l.contains(&victim.name)
                && l.contains("crashed=true")
        })
        .count();
    assert!(
        crashes >= 3,
        "replaced after repeated crashes, saw {crashes}"
    );
    assert_eq!(c.status.expect("status").ready_members, 3);
}

#[test]
fn rolling_upgrade_from_3_4_to_3_5_keeps_the_data_and_the_member_ids() {
    let mut env = Env::new();
    env.write_manifest("up.yaml", &manifest("up", 3, "3.4.23"));
    env.start_operator();
    let c = env.wait_running("up", 3);
    let urls = client_urls(&c);
    let put = env.etcdctl(&urls, &["put", "before", "upgrade"]);
    assert!(put.status.success(), "{put:?}");
    let ids = status_ids(&c);
    env.write_manifest("up.yaml", &manifest("up", 3, "3.5.1"));
    let c = env.wait_for("every member on 3.5.1", || {
        let c = env.wait_running("up", 3);
        let s = c.status.as_ref()?;
        (s.current_version.as_deref() == Some("3.5.1")).then_some(c)
    });
    let after = status_ids(&c);
    assert_eq!(ids, after, "upgraded in place");
    let get = env.etcdctl(&urls, &["get", "before", "--print-value-only"]);
    assert_eq!(String::from_utf8_lossy(&get.stdout), "upgrade\n");
    // No way back: a downgrade is refused and nothing is touched.
    env.write_manifest("up.yaml", &manifest("up", 3, "3.4.23"));
    let message = env.wait_for("downgrade refused", || {
        let s = env.status("up")?.status?;
        let d = s.condition("Degraded")?;
        (d.reason == "UnsupportedUpgradePath").then(|| d.message.clone())
    });
    assert!(
        message.contains("3.5.1") && message.contains("3.4.23"),
        "{message}"
    );
}

#[test]
fn resize_3_to_5_to_3_one_member_at_a_time() {
    let mut env = Env::new();
    env.write_manifest("rs.yaml", &manifest("rs", 3, "3.4.23"));
    env.start_operator();
    let c = env.wait_running("rs", 3);
    let put = env.etcdctl(&client_urls(&c), &["put", "k", "v"]);
    assert!(put.status.success(), "{put:?}");
    env.write_manifest("rs.yaml", &manifest("rs", 5, "3.4.23"));
    let c = env.wait_running("rs", 5);
    let urls = client_urls(&c);
    assert_eq!(member_ids(&env, &urls).len(), 5);
    env.write_manifest("rs.yaml", &manifest("rs", 3, "3.4.23"));
    let c = env.wait_running("rs", 3);
    let urls = client_urls(&c);
    assert_eq!(member_ids(&env, &urls).len(), 3);
    let get = env.etcdctl(&urls, &["get", "k", "--print-value-only"]);
    assert_eq!(String::from_utf8_lossy(&get.stdout), "v\n");
    // Each change was its own step: two adds, two promotions, two removals
    // (the plan's property tests check one change at a time in general).
    let log = std::fs::read_to_string(env.operator_log()).expect("log");
    let changes: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("add a new member")
                || l.contains("promote learner")
                || l.contains("remove member")
        })
        .collect();
    assert!(changes.len() >= 6, "{changes:?}");
}

#[test]
fn a_member_that_cannot_start_says_why_in_status() {
    let mut env = Env::new();
    env.write_manifest("one.yaml", &manifest("one", 1, "3.4.23"));
    env.start_operator();
    let c = env.wait_running("one", 1);
    let member = c.status.expect("status").members[0].name.clone();
    let pid = env.pid("one", &member).expect("runs");
    let db = env.layout().data_dir("one", &member).join("member/snap/db");
    std::fs::write(&db, vec![0xAB; 64 * 1024]).expect("corrupt the db");
    kill9(pid);
    // A single member cannot be replaced without losing the cluster: it is
    // reported, with etcd's own reason, and left alone.
    let message = env.wait_for("the failure reported", || {
        let d = env.status("one")?.status?.condition("Degraded")?.clone();
        d.message
            .contains("right after start: ")
            .then_some(d.message)
    });
    assert!(message.contains(&member), "{message}");
    eprintln!("status says: {message}");
}

/// The variables of process `pid` (`/proc/PID/environ`).
fn environ(pid: i32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).expect("read environ");
    raw.split(|b| *b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

#[test]
fn members_get_none_of_the_operators_credentials() {
    let secret = etcd_operator::testing::s3::SECRET_KEY;
    let mut env = Env::new();
    env.operator_env = [
        ("AWS_SECRET_ACCESS_KEY", secret),
        ("AWS_SESSION_TOKEN", "a-session-token-no-member-gets"),
        // etcd would take it for --log-level: only the operator's flags count.
        ("ETCD_LOG_LEVEL", "debug"),
        ("GOMAXPROCS", "2"),
        ("LC_TIME", "C"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    env.write_manifest("env.yaml", &manifest("env", 1, "3.4.23"));
    env.start_operator();
    env.wait_running("env", 1);
    let member = env.pid("env", "env-0").expect("the member runs");
    let vars = environ(member);
    for v in &vars {
        assert!(
            !v.starts_with("AWS_") && !v.starts_with("ETCD") && !v.contains(secret),
            "the member was given {v}"
        );
    }
    for kept in ["GOMAXPROCS=2", "LC_TIME=C"] {
        assert!(vars.iter().any(|v| v == kept), "{kept} not in {vars:?}");
    }
    // The operator itself keeps them: it reaches the object store.
    let operator = env.operator_process().expect("the operator runs");
    let own = environ(operator.pid);
    assert!(
        own.iter()
            .any(|v| *v == format!("AWS_SECRET_ACCESS_KEY={secret}")),
        "the operator's own environment"
    );
}
