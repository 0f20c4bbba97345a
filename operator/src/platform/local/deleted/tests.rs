//! Kept deleted clusters: names, round trips and confinement.

use std::time::{Duration, SystemTime};

use proptest::prelude::*;

use super::*;

const DAY: Duration = Duration::from_secs(86_400);

fn layout() -> (tempfile::TempDir, Layout) {
    let dir = tempfile::tempdir().expect("temp dir");
    let layout = Layout::new(dir.path().join("state"));
    (dir, layout)
}

fn cluster(layout: &Layout, name: &str) {
    let data = layout.data_dir(name, &format!("{name}-0"));
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(data.join("db"), "keys").expect("write");
}

#[test]
fn entry_names_are_a_cluster_name_a_stamp_and_a_count() {
    assert_eq!(entry_name("demo-20261205T044501Z").ok(), Some("demo"));
    assert_eq!(
        entry_name("my-db-2-20261205T044501Z-3").ok(),
        Some("my-db-2")
    );
    for bad in [
        "",
        "demo",
        "demo-20261205T044501",
        "demo-2026120T5044501Z",
        "../x-20261205T044501Z",
        "Demo-20261205T044501Z",
        "-20261205T044501Z",
        "demo-20261205T044501Z-12345",
        "demo-20261205T044501Z/..",
    ] {
        assert!(entry_name(bad).is_err(), "{bad:?} accepted");
    }
}

proptest! {
    /// No string makes the parser panic, and whatever it accepts is a
    /// plain name (no separator, no dots): it can only ever name an entry
    /// directly under STATE/deleted.
    #[test]
    fn any_string_is_parsed_safely(s in ".{0,80}") {
        if let Ok(cluster) = entry_name(&s) {
            prop_assert!(!s.contains('/') && !s.contains('.') && !s.contains('\0'));
            prop_assert!(check_cluster_name(cluster).is_ok());
        }
    }
}

#[test]
fn a_cluster_set_aside_is_listed_put_back_and_purged() {
    let (_t, layout) = layout();
    cluster(&layout, "demo");
    let now = SystemTime::now();
    let kept = set_aside(&layout, "demo", Some("kind: EtcdCluster\n"), DAY, now).expect("aside");
    assert!(!layout.cluster_dir("demo").exists());
    assert!(
        kept.join("members/demo-0/data/db").is_file(),
        "the data moved whole"
    );
    let listed = list(&layout).expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(
        listed[0].meta.as_ref().map(|m| m.cluster.as_str()),
        Some("demo")
    );
    // A second deletion in the same second gets its own entry.
    cluster(&layout, "demo");
    set_aside(&layout, "demo", None, DAY, now).expect("aside again");
    let listed = list(&layout).expect("list");
    assert_eq!(listed.len(), 2);
    assert!(listed[1].entry.ends_with("-2"), "{listed:?}");

    let (name, manifest) = undelete(&layout, &listed[0].entry).expect("undelete");
    assert_eq!(name, "demo");
    assert_eq!(manifest.as_deref(), Some("kind: EtcdCluster\n"));
    assert!(layout.data_dir("demo", "demo-0").join("db").is_file());
    assert!(!layout.cluster_dir("demo").join(META).exists());
    // Not over a cluster that exists.
    assert!(matches!(
        undelete(&layout, &listed[1].entry),
        Err(Error::Exists(_))
    ));

    purge(&layout, &listed[1].entry).expect("purge");
    assert!(list(&layout).expect("list").is_empty());
}

#[test]
fn a_sweep_purges_only_what_ran_out() {
    let (_t, layout) = layout();
    let now = SystemTime::now();
    cluster(&layout, "old");
    set_aside(&layout, "old", None, DAY, now - 2 * DAY).expect("aside");
    cluster(&layout, "new");
    set_aside(&layout, "new", None, DAY, now).expect("aside");
    let purged = sweep(&layout, now);
    assert_eq!(purged.len(), 1, "{purged:?}");
    let left: Vec<String> = list(&layout)
        .expect("list")
        .into_iter()
        .map(|k| k.entry)
        .collect();
    assert!(left.len() == 1 && left[0].starts_with("new-"), "{left:?}");
}

#[test]
fn purge_never_leaves_the_deleted_folder() {
    let (t, layout) = layout();
    let outside = t.path().join("precious");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::create_dir_all(dir(&layout)).expect("mkdir");
    // A symlink with a valid entry name, pointing outside.
    let link = dir(&layout).join("demo-20261205T044501Z");
    std::os::unix::fs::symlink(&outside, &link).expect("symlink");
    assert!(matches!(
        purge(&layout, "demo-20261205T044501Z"),
        Err(Error::NotOurs(_))
    ));
    for name in ["../precious", "..", "/tmp", "precious"] {
        assert!(purge(&layout, name).is_err(), "{name}");
    }
    assert!(outside.is_dir(), "nothing outside was deleted");
    assert!(
        list(&layout).expect("list").is_empty(),
        "a symlink is not listed"
    );
}
