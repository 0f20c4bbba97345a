//! The documentation cannot drift from the code or point nowhere: every
//! relative link of the README, the crates' READMEs and the user guide
//! (`docs/src`, an mdBook) reaches a file, and a `#fragment` a heading of
//! it; every page of the guide is in its SUMMARY.md and every SUMMARY entry
//! exists; the runbook names every reason the plan can put in a condition.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text of a page with mdBook's `{{#include FILE}}` lines replaced by
/// that file, as the book shows it.
fn expanded(path: &Path) -> String {
    read(path)
        .lines()
        .map(|line| match line.trim().strip_prefix("{{#include ") {
            Some(rest) => {
                let file = rest.trim_end_matches("}}").trim();
                read(&path.parent().unwrap_or(Path::new(".")).join(file))
            }
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The anchors of a page's headings, as GitHub and mdBook make them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut in_code = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        if in_code || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        out.insert(slug);
    }
    out
}

/// `(target)` of every `[text](target)` outside code (blocks and inline
/// spans, where `](` is a regular expression's, not a link), with no
/// scheme.
fn relative_links(text: &str) -> Vec<String> {
    let mut in_code = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        if in_code {
            continue;
        }
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = &rest[..end];
            if !target.contains("://") && !target.starts_with("mailto:") && !target.is_empty() {
                out.push(target.to_string());
            }
            rest = &rest[end..];
        }
    }
    out
}

fn pages() -> Vec<PathBuf> {
    let mut pages = vec![
        root().join("README.md"),
        root().join("chaos-monkey/README.md"),
        root().join("soak/README.md"),
    ];
    let mut dirs = vec![root().join("docs/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.map(|e| e.path()).unwrap_or_default();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages
}

#[test]
fn every_relative_link_reaches_a_file_and_heading() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = expanded(&page);
        let dir = page.parent().unwrap_or(Path::new("."));
        for link in relative_links(&text) {
            let (file, fragment) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            if !target.exists() {
                broken.push(format!("{}: {link} (no such file)", page.display()));
                continue;
            }
            let is_md = target.extension().is_some_and(|e| e == "md");
            if !fragment.is_empty() && is_md && !anchors(&expanded(&target)).contains(fragment) {
                broken.push(format!("{}: {link} (no such heading)", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_summary_lists_every_page_of_the_guide_and_nothing_else() {
    let src = root().join("docs/src");
    let summary = read(&src.join("SUMMARY.md"));
    let listed: BTreeSet<PathBuf> = relative_links(&summary)
        .into_iter()
        .map(|l| src.join(l))
        .collect();
    let on_disk: BTreeSet<PathBuf> = pages()
        .into_iter()
        .filter(|p| p.starts_with(&src) && !p.ends_with("SUMMARY.md"))
        .collect();
    let missing: Vec<_> = on_disk.difference(&listed).collect();
    let dangling: Vec<_> = listed.difference(&on_disk).collect();
    assert!(
        missing.is_empty() && dangling.is_empty(),
        "pages not in SUMMARY.md: {missing:?}; SUMMARY.md entries with no page: {dangling:?}"
    );
}

#[test]
fn the_runbook_explains_every_reason_the_plan_gives() {
    let describe = read(&root().join("operator/src/plan/describe.rs"));
    let runbook = read(&root().join("docs/src/runbook.md"));
    let reasons: Vec<&str> = describe
        .lines()
        .filter(|l| l.trim_start().starts_with("Wait::"))
        .filter_map(|l| l.split("=> \"").nth(1))
        .filter_map(|r| r.split('"').next())
        .collect();
    assert!(reasons.len() > 10, "no reasons found in plan/describe.rs");
    let missing: Vec<_> = reasons
        .iter()
        .filter(|r| !runbook.contains(&format!("`{r}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/src/runbook.md does not explain {missing:?}"
    );
}

#[test]
fn the_readme_starts_with_the_two_commands_and_stays_short() {
    let readme = read(&root().join("README.md"));
    let first_screen: String = readme.lines().take(40).collect::<Vec<_>>().join("\n");
    assert!(first_screen.contains("make soak") && first_screen.contains("make test"));
    let lines = readme.lines().count();
    assert!(
        lines <= 400,
        "README.md is {lines} lines: move details into docs/src"
    );
}
