//! Reading manifests: documents, names, strict types, special files.

use super::*;

const DEMO: &str = "apiVersion: etcdoperator.dev/v1alpha1\nkind: EtcdCluster\n\
                    metadata: {name: demo}\nspec: {size: 3, version: \"3.4.23\"}\n";

fn problem(text: &str) -> (Vec<String>, String) {
    parse(text).expect_err("should not parse")
}

#[test]
fn parses_the_readme_example() {
    let c = parse(DEMO).expect("parses");
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].metadata.name.as_deref(), Some("demo"));
    assert_eq!(c[0].spec.size, 3);
    assert_eq!(c[0].spec.version, "3.4.23");
}

#[test]
fn several_documents() {
    let two = format!("{DEMO}---\n{}", DEMO.replace("demo", "other"));
    assert_eq!(parse(&two).expect("parses").len(), 2);
}

#[test]
fn unknown_spec_field_is_named_with_the_allowed_ones() {
    let (names, msg) = problem(&DEMO.replace("size: 3", "sise: 3"));
    assert_eq!(names, ["demo"]);
    assert!(msg.contains("sise"), "{msg}");
    assert!(msg.contains("size"), "{msg}");
    assert!(msg.starts_with("line 4 column 8: unknown field"), "{msg}");
}

#[test]
fn one_bad_document_names_every_cluster_of_the_file() {
    let other = DEMO.replace("demo", "other");
    let (names, msg) = problem(&format!(
        "{DEMO}---\n{}",
        other.replace("size: 3", "size: x")
    ));
    assert_eq!(names, ["demo", "other"]);
    assert!(msg.contains("size"), "{msg}");
    let (names, msg) = problem(&format!(
        "{DEMO}---\n{}",
        other.replace("EtcdCluster", "Pod")
    ));
    assert_eq!(names, ["demo", "other"]);
    assert!(msg.starts_with("kind:"), "{msg}");
}

#[test]
fn unknown_top_level_and_metadata_fields() {
    let (_, msg) = problem(&format!("{DEMO}extra: 1\n"));
    assert!(msg.contains("extra"), "{msg}");
    let (_, msg) = problem(&DEMO.replace("{name: demo}", "{name: demo, uid: x}"));
    assert!(msg.contains("uid"), "{msg}");
}

#[test]
fn malformed_yaml() {
    let (names, msg) = problem("apiVersion: [unclosed\n");
    assert!(names.is_empty());
    assert!(!msg.is_empty());
}

#[test]
fn wrong_kind_or_api_version() {
    let (_, msg) = problem(&DEMO.replace("kind: EtcdCluster", "kind: Pod"));
    assert!(msg.starts_with("kind:"), "{msg}");
    let (_, msg) = problem(&DEMO.replace("v1alpha1", "v1"));
    assert!(msg.starts_with("apiVersion:"), "{msg}");
}

#[test]
fn duplicate_names_across_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.yaml"), DEMO).expect("write");
    std::fs::write(dir.path().join("b.yml"), DEMO).expect("write");
    std::fs::write(dir.path().join("notes.txt"), "ignored").expect("write");
    let loaded = load_dir(dir.path()).expect("load");
    assert!(loaded.clusters.is_empty());
    assert_eq!(loaded.problems.len(), 1);
    assert_eq!(loaded.problems[0].clusters, ["demo"]);
    assert!(loaded.problems[0].message.contains("2 times"));
}

#[test]
fn missing_folder_is_empty() {
    let loaded = load_dir(Path::new("/nonexistent/etcd-operator")).expect("load");
    assert!(loaded.clusters.is_empty() && loaded.problems.is_empty());
}

/// The type errors of the report: refused with the field's name, as the
/// CRD schema refuses them on Kubernetes.
#[test]
fn types_are_as_strict_as_the_crd_schema() {
    let backup = DEMO.replace(
        "version: \"3.4.23\"}",
        "version: \"3.4.23\", backup: {interval: 30m, maxBackups: 3}}",
    );
    parse(&backup).expect("the plain spelling parses");
    for (text, field) in [
        (
            DEMO.replace("size: 3", "size: \"3\""),
            "spec.size: must be a number",
        ),
        (
            DEMO.replace("size: 3", "size: 0x3"),
            "spec.size: write the number in decimal",
        ),
        (
            DEMO.replace("size: 3", "size: 3, paused: \"yes\""),
            "spec.paused: must be true or false",
        ),
        (
            backup.replace("maxBackups: 3", "maxBackups: \"3\""),
            "spec.backup.maxBackups: must be a number",
        ),
        (
            DEMO.replace("version: \"3.4.23\"", "version: 3.5"),
            "spec.version: must be a string",
        ),
    ] {
        let (names, msg) = problem(&text);
        assert_eq!(names, ["demo"], "{msg}");
        assert!(msg.contains(field), "{text}: {msg}");
    }
}

#[test]
fn very_long_names_are_refused_with_a_short_message() {
    for len in [1000, 100_000] {
        let (names, msg) =
            problem(&DEMO.replace("name: demo", &format!("name: {}", "a".repeat(len))));
        assert!(names.is_empty(), "an invalid name names no cluster");
        assert!(msg.starts_with("metadata.name: "), "{msg}");
        assert!(msg.contains(&format!("{len} characters long")), "{msg}");
        assert!(msg.len() < 1000, "{} bytes", msg.len());
    }
}

#[test]
fn a_bad_name_beside_a_good_one_freezes_the_good_one() {
    let two = format!(
        "{DEMO}---\n{}",
        DEMO.replace("name: demo", "name: \"../x\"")
    );
    let (names, msg) = problem(&two);
    assert_eq!(names, ["demo"]);
    assert!(msg.contains("not a valid cluster name"), "{msg}");
}

#[test]
fn special_files_are_reported_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(d.join("good.yaml"), DEMO).expect("write");
    std::os::unix::fs::symlink(d.join("loop.yaml"), d.join("loop.yaml")).expect("loop");
    std::os::unix::fs::symlink(d.join("gone.yaml"), d.join("dangling.yaml")).expect("link");
    std::fs::create_dir(d.join("folder.yaml")).expect("folder");
    crate::testing::files::mkfifo(&d.join("fifo.yaml"));
    let loaded = load_dir(d).expect("load");
    assert_eq!(loaded.clusters.keys().collect::<Vec<_>>(), ["demo"]);
    let mut problems: Vec<(String, String)> = loaded
        .problems
        .iter()
        .map(|p| {
            let name = p.file.file_name().unwrap_or_default().to_string_lossy();
            (name.into_owned(), p.message.clone())
        })
        .collect();
    problems.sort();
    let files: Vec<&str> = problems.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        files,
        ["dangling.yaml", "fifo.yaml", "folder.yaml", "loop.yaml"]
    );
    assert!(problems.iter().all(|(_, m)| !m.is_empty()));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

    /// Mutated manifests (types, names, nesting, duplicates, encodings, cut
    /// files) never panic the reader, never name an invalid cluster (the
    /// name would become a path), and every file is either read or
    /// reported, with a message of readable length.
    #[test]
    fn mutated_manifests_are_read_or_reported(seed in proptest::prelude::any::<u64>()) {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("m.yaml");
        std::fs::write(&file, crate::testing::mutate::mutated("demo", seed)).expect("write");
        let loaded = load_dir(dir.path()).expect("load");
        for (name, m) in &loaded.clusters {
            proptest::prop_assert!(check_cluster_name(name).is_ok(), "{name:?}");
            proptest::prop_assert_eq!(&m.file, &file);
        }
        for p in &loaded.problems {
            proptest::prop_assert_eq!(&p.file, &file);
            for name in &p.clusters {
                proptest::prop_assert!(check_cluster_name(name).is_ok(), "{name:?}");
            }
            proptest::prop_assert!(!p.message.is_empty());
            proptest::prop_assert!(p.message.len() < 2000, "{} bytes: {}", p.message.len(), p.message);
            for leak in ["DuplicateKeyPolicy", "Option<", "in Options"] {
                proptest::prop_assert!(!p.message.contains(leak), "{}", p.message);
            }
        }
        proptest::prop_assert!(!loaded.clusters.is_empty() || !loaded.problems.is_empty());
    }
}

/// `on`, `off`, `yes`, `no` are booleans in YAML 1.1 (kubectl reads them
/// so, and the API server then refuses a boolean name): quoted they are
/// names.
#[test]
fn yaml_11_booleans_are_no_strings() {
    let (_, msg) = problem(&DEMO.replace("{name: demo}", "{name: on}"));
    assert!(msg.contains("metadata.name: must be a string"), "{msg}");
    assert!(msg.contains("put it in quotes"), "{msg}");
    let c = parse(&DEMO.replace("{name: demo}", "{name: \"on\"}")).expect("quoted");
    assert_eq!(c[0].metadata.name.as_deref(), Some("on"));
}

/// What a scan saw, by cluster name: the size each asks for.
fn sizes(loaded: &Loaded) -> Vec<(String, i64)> {
    let clusters = loaded.clusters.iter();
    clusters
        .map(|(n, m)| (n.clone(), m.cluster.spec.size))
        .collect()
}

/// A scan parses again only the files that changed since their parse was
/// kept, and keeps none that changed too recently to tell a second write.
#[test]
fn unchanged_files_are_not_parsed_again() {
    use std::time::{Duration, SystemTime};
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let a = d.join("a.yaml");
    std::fs::write(&a, DEMO).expect("write");
    std::fs::write(d.join("b.yaml"), DEMO.replace("demo", "other")).expect("write");
    let mut cache = ParseCache::default();
    let now = SystemTime::now();
    let first = load_at(d, &mut cache, now).expect("scan");
    assert_eq!(sizes(&first), [("demo".into(), 3), ("other".into(), 3)]);
    assert_eq!(cache.parses(), 2);
    assert!(cache.is_empty(), "just written: not kept");
    let later = now + RACY + Duration::from_secs(1);
    load_at(d, &mut cache, later).expect("scan");
    assert_eq!((cache.parses(), cache.len()), (4, 2), "parsed again, kept");
    let kept = load_at(d, &mut cache, later).expect("scan");
    assert_eq!(cache.parses(), 4, "nothing parsed");
    assert_eq!(sizes(&kept), sizes(&load_dir(d).expect("fresh")));
    // The same size, other content, the modification time put back: the
    // change time still tells.
    let mtime = std::fs::metadata(&a)
        .and_then(|m| m.modified())
        .expect("mtime");
    std::fs::write(&a, DEMO.replace("size: 3", "size: 5")).expect("rewrite");
    let f = std::fs::File::options().write(true).open(&a).expect("open");
    f.set_modified(mtime).expect("touch back");
    let edited = load_at(d, &mut cache, later).expect("scan");
    assert_eq!(cache.parses(), 5);
    assert_eq!(sizes(&edited), [("demo".into(), 5), ("other".into(), 3)]);
    // Renamed over (what most editors do): another file, parsed again.
    let tmp = d.join("a.tmp");
    std::fs::write(&tmp, DEMO.replace("size: 3", "size: 1")).expect("write");
    std::fs::rename(&tmp, &a).expect("rename");
    let renamed = load_at(d, &mut cache, later).expect("scan");
    assert_eq!(sizes(&renamed)[0], ("demo".into(), 1));
    // Gone: forgotten, not reported.
    std::fs::remove_file(d.join("b.yaml")).expect("rm");
    let gone = load_at(d, &mut cache, later).expect("scan");
    assert_eq!(sizes(&gone), [("demo".into(), 1)]);
    assert_eq!(cache.len(), 1);
    // An entry that cannot be read is reported at every scan.
    std::fs::create_dir(d.join("c.yaml")).expect("mkdir");
    for _ in 0..2 {
        let l = load_at(d, &mut cache, later).expect("scan");
        assert_eq!(l.problems.len(), 1, "{:?}", l.problems);
    }
    assert_eq!(cache.len(), 1);
}

#[test]
fn a_future_modification_time_is_parsed_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    let a = d.join("a.yaml");
    std::fs::write(&a, DEMO).expect("write");
    let f = std::fs::File::options().write(true).open(&a).expect("open");
    use std::time::{Duration, SystemTime};
    let future = SystemTime::now() + Duration::from_secs(10 * 365 * 86_400);
    f.set_modified(future).expect("touch into the future");
    let mut cache = ParseCache::default();
    let later = SystemTime::now() + RACY + Duration::from_secs(1);
    for _ in 0..3 {
        let l = load_at(d, &mut cache, later).expect("scan");
        assert_eq!(sizes(&l), [("demo".into(), 3)]);
    }
    assert_eq!(cache.parses(), 1, "parsed once, then kept");
}

#[test]
fn a_file_outside_the_folder_is_not_quoted() {
    let dir = tempfile::tempdir().expect("tmp");
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).expect("mkdir");
    let secret = dir.path().join("shadow");
    std::fs::write(&secret, "root:$y$j9T$secrethash:19000:0:99999:7:::\n").expect("write");
    std::os::unix::fs::symlink(&secret, manifests.join("a.yaml")).expect("link");
    // The same text inside the folder is quoted, as any manifest's is.
    std::fs::write(manifests.join("b.yaml"), "root:$y$j9T$secrethash:19000\n").expect("write");
    let l = load_dir(&manifests).expect("scan");
    assert_eq!(l.problems.len(), 2, "{:?}", l.problems);
    let outside = &l.problems[0].message;
    assert!(!outside.contains("secrethash"), "{outside}");
    assert!(!outside.contains("root"), "{outside}");
    assert!(
        outside.contains("outside the manifests folder"),
        "{outside}"
    );
    assert!(outside.contains(&secret.display().to_string()), "{outside}");
    let inside = &l.problems[1].message;
    assert!(
        inside.contains("secrethash") || inside.contains("root"),
        "{inside}"
    );
}

#[test]
fn messages_name_the_field_and_say_what_is_wrong_in_words() {
    let head = "apiVersion: etcdoperator.dev/v1alpha1\nkind: EtcdCluster\nmetadata: {name: demo}\n";
    let cases = [
        (
            "spec: {size: 3, version: \"3.4.23\", storage: {policy: [1]}}",
            "spec.storage.policy: must be one of the words this field allows",
        ),
        (
            "spec: {size: 3, version: \"3.4.23\", backup: {interval: 1h, location: {size: [1]}}}",
            "spec.backup.location.size: must be a single text value",
        ),
        (
            "spec: {size: 99999999999999999999, version: \"3.4.23\"}",
            "spec.size: 99999999999999999999 is out of range: a whole number from 1 to 9",
        ),
        (
            "spec: {size: -99999999999999999999, version: \"3.4.23\"}",
            "spec.size: -99999999999999999999 is out of range: a whole number from 1 to 9",
        ),
        (
            "spec: {size: 1, version: \"3.4.23\", backup: {interval: 1h, maxBackups: 1e99}}",
            "spec.backup.maxBackups: not a whole number",
        ),
        (
            "spec: {size: 1, version: \"3.4.23\", backup: {interval: 1h, maxBackups: 99999999999999999999}}",
            "spec.backup.maxBackups: 99999999999999999999 is out of range: a whole number from 1 to 10000",
        ),
        (
            "spec: {size: .inf, version: \"3.4.23\"}",
            "spec.size: not a whole number: .inf is not a number one can count with (from 1 to 9)",
        ),
        (
            "spec: {size: .nan, version: \"3.4.23\"}",
            "spec.size: not a whole number: .nan",
        ),
        (
            "sp\u{435}c: {size: 3, version: \"3.4.23\"}",
            "its letter 3 is '\u{435}' U+0435, not ASCII",
        ),
    ];
    for (spec, want) in cases {
        let (_, m) = problem(&format!("{head}{spec}\n"));
        assert!(m.contains(want), "{spec}: {m}");
        for bad in ["externally tagged", "expected string scalar", "Nodes {"] {
            assert!(!m.contains(bad), "{spec}: {m}");
        }
    }
}
