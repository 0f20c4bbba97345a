//! Mutated manifests for property tests: random edits of a valid
//! manifest, of the kinds users (and unlucky editors) make: wrong types,
//! bad names, deep nesting, duplicates, broken encodings, cut files.
//! Deterministic for a seed, so a failure can be replayed.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A valid manifest with every field kind the spec has (numbers,
/// booleans, strings, nested mappings), for cluster `name`.
pub fn base(name: &str) -> String {
    format!(
        "apiVersion: etcdoperator.dev/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: {name}\n\
         spec:\n  size: 1\n  version: \"3.4.23\"\n  paused: false\n  storage:\n    policy: Persistent\n\
         \x20 backup:\n    interval: 30m\n    maxBackups: 3\n"
    )
}

/// Names that must never become a path or a cluster.
pub const BAD_NAMES: &[&str] = &[
    "..",
    ".",
    "\"\"",
    "victim/members/victim-0",
    "../../escape",
    "/etc",
    "Demo",
    "a_b",
    "a.b",
    "-a",
    "a-",
    "\"a\\0b\"",
    "\"démo\"",
];

/// Replacements for a scalar value.
const VALUES: &[&str] = &[
    "\"3\"",
    "'3'",
    "0x3",
    "+3",
    "03",
    "3.0",
    "1e3",
    "-1",
    "99999999999999999999",
    "\"yes\"",
    "yes",
    "true",
    "~",
    "",
    "[]",
    "{}",
    "[1, 2]",
    "{a: 1}",
    "!!binary aGVsbG8=",
    "&a 3",
    "*nowhere",
    "\"v3.4.23\"",
    "\"3.4.23 \"",
    "3.5",
    "Ephemeral",
    "\"\"",
];

/// One random edit of `text` (as bytes: some edits break the encoding).
fn edit(text: &[u8], rng: &mut StdRng) -> Vec<u8> {
    let s = String::from_utf8_lossy(text).into_owned();
    let lines: Vec<&str> = s.lines().collect();
    let pick = |rng: &mut StdRng, n: usize| rng.random_range(0..n.max(1));
    match rng.random_range(0..12) {
        // A value of the wrong type or spelling.
        0 | 1 => {
            let i = pick(rng, lines.len());
            let Some(line) = lines.get(i) else {
                return text.to_vec();
            };
            let Some(colon) = line.find(':') else {
                return text.to_vec();
            };
            let value = VALUES[pick(rng, VALUES.len())];
            let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            out[i] = format!("{}: {value}", &line[..colon]);
            (out.join("\n") + "\n").into_bytes()
        }
        // A bad or very long name.
        2 => {
            let name = if rng.random_bool(0.2) {
                "n".repeat(if rng.random_bool(0.5) { 1000 } else { 100_000 })
            } else {
                BAD_NAMES[pick(rng, BAD_NAMES.len())].to_string()
            };
            replace_name(&s, &name).into_bytes()
        }
        // Deep nesting in place of a value.
        3 => {
            let depth = rng.random_range(1..200);
            let nested = if rng.random_bool(0.5) {
                format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
            } else {
                format!("{}1{}", "{a: ".repeat(depth), "}".repeat(depth))
            };
            s.replacen("size: 1", &format!("size: {nested}"), 1)
                .into_bytes()
        }
        // A line twice (a duplicate key), or a second document.
        4 => {
            let i = pick(rng, lines.len());
            let mut out: Vec<&str> = lines.clone();
            if let Some(line) = lines.get(i) {
                out.insert(i, line);
            }
            (out.join("\n") + "\n").into_bytes()
        }
        5 => format!("{s}---\n{s}").into_bytes(),
        // Broken encodings: invalid UTF-8, a BOM, a NUL, CRLF, tabs.
        6 => {
            let mut out = text.to_vec();
            let at = pick(rng, out.len());
            let junk: &[u8] = match rng.random_range(0..5) {
                0 => b"\xff\xfe",
                1 => b"\xef\xbb\xbf",
                2 => b"\0",
                3 => b"\xc3",
                _ => b"\t",
            };
            out.splice(at..at, junk.iter().copied());
            out
        }
        7 => s.replace('\n', "\r\n").into_bytes(),
        // A line gone, or the file cut short.
        8 => {
            let i = pick(rng, lines.len());
            let out: Vec<&str> = lines
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, l)| *l)
                .collect();
            (out.join("\n") + "\n").into_bytes()
        }
        9 => {
            let cut = pick(rng, text.len());
            text[..cut].to_vec()
        }
        // An unknown field, or a field moved a level.
        10 => s.replacen("spec:\n", "spec:\n  sise: 3\n", 1).into_bytes(),
        _ => s.replacen("  size: 1\n", "size: 1\n", 1).into_bytes(),
    }
}

fn replace_name(text: &str, name: &str) -> String {
    text.lines()
        .map(|l| {
            if l.trim_start().starts_with("name:") {
                format!("  name: {name}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// `base(name)` after 1 to 3 random edits drawn from `seed`.
pub fn mutated(name: &str, seed: u64) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut text = base(name).into_bytes();
    for _ in 0..rng.random_range(1..=3) {
        text = edit(&text, &mut rng);
    }
    text
}
