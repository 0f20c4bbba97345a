//! No import cycle between the modules of any crate of the workspace: a
//! module lower in the stack never names one above it. Every path a
//! source file names (`use crate::a::b`, `super::c::f()`, `use
//! super::{d::X, e::Y}`) is resolved to the module file it lands in; a
//! module naming its own parent or child does not count (that is how a
//! module declares and re-exports its parts). Tests (`tests.rs`,
//! `*_tests.rs`, `mod tests` blocks) are left out.
//!
//! `cargo nextest run -p etcd-operator --test layering` says, for a cycle,
//! which files take which names from each other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module: its path inside its crate (`["backup", "store"]`).
type Module = Vec<String>;

/// Every module file under `src` (binaries and tests left out).
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "bin" && name != "tests" {
                    stack.push(path);
                }
                continue;
            }
            let Some(stem) = name.strip_suffix(".rs") else {
                continue;
            };
            if stem == "main" || stem == "tests" || stem.ends_with("_tests") {
                continue;
            }
            let rel = path.strip_prefix(src).expect("under src");
            let mut module: Module = rel
                .parent()
                .into_iter()
                .flat_map(|p| p.components())
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if stem != "lib" && stem != "mod" {
                module.push(stem.to_string());
            }
            out.insert(module, path);
        }
    }
    out
}

/// `text` without comments and without `#[cfg(test)] mod tests { ... }`
/// (everything from such a block on: the files keep their tests last).
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]")
            && lines
                .peek()
                .is_some_and(|n| n.trim_start().starts_with("mod tests"))
        {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        let line = match line.find("//") {
            // A `//` in a string ("http://") is kept: the paths after
            // it are not Rust paths anyway.
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `use` trees expanded: `super::{a::X, b::{Y, Z}}` -> `super::a::X`,
/// `super::b::Y`, `super::b::Z`.
fn expand(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else {
        return vec![tree];
    };
    let prefix = &tree[..open];
    let inner = tree[open + 1..]
        .strip_suffix('}')
        .unwrap_or(&tree[open + 1..]);
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .flat_map(|p| expand(&format!("{prefix}{p}")))
        .collect()
}

/// Every `crate::`, `super::` and `self::` path `code` names, as segments.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for stmt in code.split(';') {
        let t = stmt.trim_start();
        let t = t.strip_prefix("pub(crate) ").unwrap_or(t);
        let t = t.strip_prefix("pub(super) ").unwrap_or(t);
        let t = t.strip_prefix("pub ").unwrap_or(t);
        if let Some(tree) = t.strip_prefix("use ") {
            for p in expand(tree) {
                let p = p.split(" as ").next().unwrap_or(&p).to_string();
                out.push(p.split("::").map(str::to_string).collect());
            }
        }
    }
    let bytes = code.as_bytes();
    for root in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(root) {
            let at = from + i;
            from = at + root.len();
            let boundary = at == 0 || {
                let b = bytes[at - 1];
                !(b.is_ascii_alphanumeric() || b == b'_' || b == b':')
            };
            if !boundary {
                continue;
            }
            let rest: String = code[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            out.push(
                rest.split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect(),
            );
        }
    }
    out
}

/// The module `path` lands in, named from `module` (whose file is a
/// `mod.rs`/`lib.rs` when `is_dir`).
fn resolve(
    module: &Module,
    is_dir: bool,
    path: &[String],
    known: &BTreeMap<Module, PathBuf>,
) -> Option<Module> {
    let mut base: Module = Vec::new();
    let mut rest = path;
    // The folder a file's `super` starts from: its parent module.
    let mut here: Module = module.clone();
    while let Some((first, tail)) = rest.split_first() {
        match first.as_str() {
            "crate" => base.clear(),
            "self" => base = here.clone(),
            "super" => {
                let from = if base.is_empty() && rest.len() == path.len() {
                    here.clone()
                } else {
                    base.clone()
                };
                let mut up = from;
                // `super` of a `mod.rs` is the folder's parent; of `a/b.rs`
                // it is `a`. Both are one level up from the module.
                up.pop();
                base = up;
                here = base.clone();
            }
            _ => break,
        }
        rest = tail;
    }
    let _ = is_dir;
    let mut full = base;
    full.extend(rest.iter().cloned());
    (0..=full.len())
        .rev()
        .map(|n| full[..n].to_vec())
        .find(|m| known.contains_key(m))
}

/// Whether one module contains the other.
fn related(a: &Module, b: &Module) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// The import graph of the crate at `src`: module -> module -> the names
/// taken.
fn graph(src: &Path) -> BTreeMap<Module, BTreeMap<Module, BTreeSet<String>>> {
    let known = modules(src);
    let mut edges: BTreeMap<Module, BTreeMap<Module, BTreeSet<String>>> = BTreeMap::new();
    for (module, file) in &known {
        let text = std::fs::read_to_string(file).expect("read source");
        let is_dir = file
            .file_name()
            .is_some_and(|n| n == "mod.rs" || n == "lib.rs");
        for path in paths(&code(&text)) {
            let Some(to) = resolve(module, is_dir, &path, &known) else {
                continue;
            };
            if related(module, &to) {
                continue;
            }
            let name = path.last().cloned().unwrap_or_default();
            edges
                .entry(module.clone())
                .or_default()
                .entry(to)
                .or_default()
                .insert(name);
        }
    }
    edges
}

/// The strongly connected groups of more than one module (Tarjan).
fn cycles(edges: &BTreeMap<Module, BTreeMap<Module, BTreeSet<String>>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeMap<Module, BTreeSet<String>>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on: BTreeSet<Module>,
        next: usize,
        out: Vec<Vec<Module>>,
    }
    fn visit(s: &mut State<'_>, v: &Module) {
        s.index.insert(v.clone(), s.next);
        s.low.insert(v.clone(), s.next);
        s.next += 1;
        s.stack.push(v.clone());
        s.on.insert(v.clone());
        let targets: Vec<Module> = s
            .edges
            .get(v)
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default();
        for w in targets {
            if !s.index.contains_key(&w) {
                visit(s, &w);
                let lw = s.low[&w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on.contains(&w) {
                let iw = s.index[&w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(&w);
                let done = w == *v;
                group.push(w);
                if done {
                    break;
                }
            }
            if group.len() > 1 {
                s.out.push(group);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    let all: Vec<Module> = edges.keys().cloned().collect();
    for v in &all {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf()
}

#[test]
fn no_crate_has_an_import_cycle() {
    let mut found = Vec::new();
    for krate in ["operator", "chaos-monkey", "soak"] {
        let src = workspace().join(krate).join("src");
        let edges = graph(&src);
        assert!(edges.len() > 10, "{krate}: too few modules read");
        for group in cycles(&edges) {
            let mut lines = vec![format!("{krate}: a cycle of {} modules:", group.len())];
            for a in &group {
                for b in &group {
                    if let Some(names) = edges.get(a).and_then(|t| t.get(b)) {
                        lines.push(format!(
                            "  {} -> {}: {}",
                            a.join("::"),
                            b.join("::"),
                            names.iter().cloned().collect::<Vec<_>>().join(", ")
                        ));
                    }
                }
            }
            found.push(lines.join("\n"));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The checker finds what it is for: two modules naming each other, by
/// `use` trees and by inline paths.
#[test]
fn the_checker_sees_a_cycle() {
    let dir = tempfile::tempdir().expect("tmp");
    let src = dir.path();
    std::fs::create_dir_all(src.join("a")).expect("mkdir");
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\n").expect("lib");
    std::fs::write(src.join("a/mod.rs"), "pub mod x;\n").expect("a");
    std::fs::write(
        src.join("a/x.rs"),
        "use super::super::{b::{Thing, Other}};\npub fn f() {}\n",
    )
    .expect("x");
    std::fs::write(
        src.join("b.rs"),
        "pub struct Thing;\npub struct Other;\n// crate::a::x::f() in a comment\nfn g() { crate::a::x::f(); }\n",
    )
    .expect("b");
    let edges = graph(src);
    let found = cycles(&edges);
    assert_eq!(found.len(), 1, "{edges:?}");
    let x: Module = vec!["a".into(), "x".into()];
    let b: Module = vec!["b".into()];
    assert_eq!(
        edges[&x][&b],
        BTreeSet::from(["Other".to_string(), "Thing".to_string()])
    );
    assert_eq!(edges[&b][&x], BTreeSet::from(["f".to_string()]));
    // Without the call, no cycle.
    std::fs::write(src.join("b.rs"), "pub struct Thing;\npub struct Other;\n").expect("b");
    assert!(cycles(&graph(src)).is_empty());
}
