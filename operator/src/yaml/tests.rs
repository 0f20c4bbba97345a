//! Strict types and readable messages.

use serde::{Deserialize, Serialize};

use super::*;

#[derive(Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Inner {
    max_backups: i64,
    #[serde(default)]
    writers: u32,
}

#[derive(Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Doc {
    size: i64,
    version: String,
    #[serde(default)]
    paused: bool,
    #[serde(default)]
    inner: Option<Inner>,
}

fn refused(text: &str) -> String {
    from_str::<Doc>(text).expect_err(text)
}

#[test]
fn plain_values_pass() {
    let d: Doc = from_str("size: 3\nversion: \"3.4.23\"\npaused: true\ninner: {maxBackups: 2}\n")
        .expect("valid");
    assert_eq!(d.size, 3);
    let d: Doc = from_str("size: -1\nversion: 3.4.23\npaused: false\n").expect("valid");
    assert_eq!((d.size, d.version.as_str()), (-1, "3.4.23"));
}

#[test]
fn quoted_numbers_and_booleans_are_refused_by_field() {
    for (text, field, what) in [
        ("size: \"3\"\nversion: x\n", "size", "must be a number"),
        ("size: '3'\nversion: x\n", "size", "must be a number"),
        (
            "size: 3\nversion: x\npaused: \"yes\"\n",
            "paused",
            "must be true or false",
        ),
        (
            "size: 3\nversion: x\npaused: \"true\"\n",
            "paused",
            "must be true or false",
        ),
        (
            "size: 3\nversion: x\ninner: {maxBackups: \"3\"}\n",
            "inner.maxBackups",
            "must be a number",
        ),
    ] {
        let e = refused(text);
        assert!(e.contains(&format!("{field}: {what}")), "{text:?}: {e}");
        assert!(e.contains("without quotes"), "{e}");
        assert!(e.starts_with("line "), "{e}");
    }
}

#[test]
fn numbers_must_be_decimal() {
    for spelled in ["0x3", "+3", "0o3"] {
        let e = refused(&format!("size: {spelled}\nversion: x\n"));
        assert!(
            e.contains("size: write the number in decimal digits"),
            "{spelled}: {e}"
        );
        assert!(e.contains(spelled), "{e}");
    }
    // A leading zero (octal in YAML 1.1) is refused by the parser itself.
    let e = refused("size: 03\nversion: x\n");
    assert!(e.contains("size: not a whole number"), "{e}");
}

#[test]
fn strings_must_not_be_bare_numbers_or_booleans() {
    for bare in ["3.5", "3", "true"] {
        let e = refused(&format!("size: 3\nversion: {bare}\n"));
        assert!(e.contains("version: must be a string"), "{bare}: {e}");
        assert!(e.contains("put it in quotes"), "{e}");
    }
}

#[test]
fn every_type_error_names_its_field() {
    let e = refused("size: 3\nversion: x\ninner: {maxBackups: 1, writers: -1}\n");
    assert!(e.contains("inner.writers"), "{e}");
    assert!(
        e.contains("-1 is out of range: a whole number from 0 to 4294967295"),
        "{e}"
    );
    let e = refused("size: 3.5\nversion: x\n");
    assert!(e.contains("size: "), "{e}");
    let e = refused("size: [1]\nversion: x\n");
    assert!(e.contains("size"), "{e}");
}

#[test]
fn no_advice_for_programmers() {
    for text in [
        "size: 3\nsize: 4\nversion: x\n",
        "size: 3\nversion: ~\n",
        "size: 3\nversion:\n",
    ] {
        let e = refused(text);
        for leak in ["DuplicateKeyPolicy", "Options", "Option<", "use "] {
            assert!(!e.contains(leak), "{text:?}: {e}");
        }
    }
    let e = refused("size: 3\nsize: 4\nversion: x\n");
    assert!(e.contains("duplicate"), "{e}");
}

#[test]
fn invalid_utf8_has_a_position() {
    let e = utf8(b"size: 3\nversion: \"3\xff\"\n").expect_err("not UTF-8");
    assert!(e.contains("line 2 column 12 (byte 19)"), "{e}");
    assert_eq!(utf8(b"ok"), Ok("ok"));
}

#[test]
fn long_sources_are_quoted_short() {
    let deep = format!(
        "size: {}{}\nversion: x\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let e = refused(&deep);
    assert!(e.len() < 1000, "{} bytes", e.len());
    let wide = format!("size: 3\nversion: x\nextra: {}\n", "y".repeat(100_000));
    let e = refused(&wide);
    assert!(e.len() < 1000, "{} bytes", e.len());
    assert!(e.contains("extra"), "{e}");
}

/// Nesting up to the limit is parsed (and refused for its type), deeper is
/// refused by the parser; neither overflows the stack of a test thread
/// (2 MiB, as tokio's workers have).
#[test]
fn nesting_is_bounded() {
    for depth in [
        1,
        MAX_DEPTH - 2,
        MAX_DEPTH - 1,
        MAX_DEPTH,
        MAX_DEPTH + 1,
        1000,
    ] {
        let list = format!(
            "size: {}1{}\nversion: x\n",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let map = format!(
            "size: {}1{}\nversion: x\n",
            "{a: ".repeat(depth),
            "}".repeat(depth)
        );
        for text in [list, map] {
            let e = refused(&text);
            assert!(e.len() < 1000, "{depth}: {e}");
        }
    }
}
