//! A property test of the whole operator over mutated manifests (random
//! edits of valid ones: types, names, nesting, duplicates, encodings): it
//! never panics, never creates or deletes a path outside its state folder,
//! and reports every refused file in `status`. The operator runs with no
//! etcd binaries, so no spec can start a member: every file is refused,
//! and every one must be reported.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use etcd_operator::cli::status as cli;
use etcd_operator::names::check_cluster_name;
use etcd_operator::testing::files::STATE_ENTRIES;
use etcd_operator::testing::{Env, mutate};

/// Files in round one, and the seed they are drawn from (printed, so a
/// failure can be replayed).
const FILES: u64 = 40;
const SEED: u64 = 0x5eed_0009;

/// Every path under `dir`, except the ones `skip` names (relative).
fn tree(dir: &Path, skip: &[&str]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = e.path();
            let rel = path.strip_prefix(dir).unwrap_or(&path).to_path_buf();
            if skip.iter().any(|s| rel.starts_with(s)) {
                continue;
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(path);
            }
            out.insert(rel);
        }
    }
    out
}

/// Writes `bytes` as manifest `file` in one step (as an editor that saves
/// by rename does).
fn write(env: &Env, file: &str, bytes: &[u8]) {
    let tmp = env.dir.path().join("tmp").join(file);
    std::fs::write(&tmp, bytes).expect("write");
    std::fs::rename(&tmp, env.manifests.join(file)).expect("rename");
}

/// Whether `file` is reported in status: as a problem of its own, or in
/// the message of a cluster it names.
fn reported(env: &Env, file: &str) -> bool {
    let suffix = format!("/{file}");
    let problems = cli::file_problems(&env.state);
    if problems
        .iter()
        .any(|p| p.file.to_string_lossy().ends_with(&suffix))
    {
        return true;
    }
    let needle = format!("{suffix}: ");
    cli::load(&env.state, None)
        .unwrap_or_default()
        .iter()
        .filter_map(|c| c.status.as_ref()?.condition("Degraded"))
        .any(|d| d.message.contains(&needle))
}

/// Waits until every file in `files` is reported.
fn all_reported(env: &Env, files: &BTreeSet<String>, round: &str) {
    env.wait_for(&format!("every file of {round} reported"), || {
        let missing: Vec<&String> = files.iter().filter(|f| !reported(env, f)).collect();
        missing.is_empty().then_some(())
    });
}

#[test]
fn mutated_manifests_never_panic_escape_or_go_unreported() {
    eprintln!("seed {SEED:#x}, {FILES} files");
    let mut env = Env::new();
    let none = env.dir.path().join("no-etcd-binaries");
    std::fs::create_dir_all(&none).expect("mkdir");
    env.etcd_binaries = none;
    env.operator_env
        .push(("PATH".into(), "/nonexistent".into()));
    std::fs::create_dir_all(env.dir.path().join("tmp")).expect("tmp");
    // What lies beside the state folder, which nothing may touch.
    let precious = env.dir.path().join("precious");
    std::fs::create_dir_all(precious.join("members")).expect("mkdir");
    std::fs::write(precious.join("members/data"), "keep").expect("write");
    let skip = ["state", "clusters", "tmp", "operator.log"];

    let mut present = BTreeSet::new();
    for i in 0..FILES {
        let file = format!("m{i}.yaml");
        write(&env, &file, &mutate::mutated(&format!("c{i}"), SEED + i));
        present.insert(file);
    }
    let before = tree(env.dir.path(), &skip);
    env.start_operator();
    all_reported(&env, &present, "round one");

    // Round two: half the files edited again, a quarter removed, new ones.
    for i in 0..FILES {
        let file = format!("m{i}.yaml");
        match i % 4 {
            0 | 1 => write(
                &env,
                &file,
                &mutate::mutated(&format!("c{i}"), SEED + 1000 + i),
            ),
            2 => {
                std::fs::remove_file(env.manifests.join(&file)).expect("remove");
                present.remove(&file);
            }
            _ => {}
        }
    }
    for i in FILES..FILES + 10 {
        let file = format!("m{i}.yaml");
        write(&env, &file, &mutate::mutated(&format!("c{i}"), SEED + i));
        present.insert(file);
    }
    all_reported(&env, &present, "round two");
    // Removed files stop being reported (their clusters are deleted).
    env.wait_for("the removed files' reports gone", || {
        (0..FILES)
            .filter(|i| i % 4 == 2)
            .all(|i| !reported(&env, &format!("m{i}.yaml")))
            .then_some(())
    });

    assert!(env.operator_running(), "the operator is still running");
    let log = std::fs::read_to_string(env.operator_log()).unwrap_or_default();
    assert!(!log.contains("panicked"), "a panic in the operator's log");
    assert_eq!(
        tree(env.dir.path(), &skip),
        before,
        "nothing created or deleted beside the state folder"
    );
    assert_eq!(
        std::fs::read_to_string(precious.join("members/data"))
            .ok()
            .as_deref(),
        Some("keep")
    );
    for name in env.layout().cluster_names().expect("clusters") {
        assert!(
            check_cluster_name(&name).is_ok(),
            "a folder for the invalid name {name:?}"
        );
    }
    for entry in std::fs::read_dir(&env.state).expect("state").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(
            STATE_ENTRIES.contains(&name.as_str()),
            "unexpected {name} in the state folder"
        );
    }
}
