//! junit.xml: the soak as a test suite CI services understand, one test
//! case per bound (passed, or failed with the bound, what was measured and
//! the violations of that check), plus a `run` case when the run itself
//! failed or was interrupted.

use std::fmt::Write as _;

use super::Summary;

/// XML-escapes text (for attributes and content).
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// The violation checks (as in summary.json) that belong to a row.
fn checks_of(row: &str) -> &'static [&'static str] {
    match row {
        "recovery p99" => &["recovery-p99"],
        "recovery max" => &["recovery"],
        "membership = spec" => &["membership"],
        "availability" => &["availability"],
        "backup age" => &["backup-age"],
        "restore checks" => &["restore-check"],
        "lost writes" => &["lost-writes"],
        "one leader per term" => &["leader-per-term"],
        "revision never goes back" => &["revision-monotonic"],
        "no stale reads" => &["stale-read"],
        "KV hashes equal" => &["kv-hash"],
        "faults injected" => &["faults"],
        "linearizable" => &["linearizability"],
        "watch guarantees" => &["watch"],
        _ => &[],
    }
}

/// The file.
pub fn render(s: &Summary) -> String {
    let suite = format!("soak.{}", s.scenario);
    let run: Vec<&crate::invariants::Violation> = s
        .violations
        .iter()
        .filter(|v| v.check.as_str() == "run")
        .collect();
    let tests = s.bounds.len() + usize::from(!run.is_empty());
    let failures = s.bounds.iter().filter(|r| !r.pass).count() + usize::from(!run.is_empty());
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        o,
        "<testsuites name=\"soak\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" time=\"{:.3}\">",
        s.run_seconds
    );
    let _ = writeln!(
        o,
        "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"{:.3}\" timestamp=\"{}\">",
        esc(&suite),
        s.run_seconds,
        esc(s.started.trim_end_matches('Z'))
    );
    let _ = writeln!(
        o,
        "    <properties>\n      <property name=\"platform\" value=\"{}\"/>\n      <property name=\"verdict\" value=\"{}\"/>\n      <property name=\"interrupted\" value=\"{}\"/>\n    </properties>",
        esc(&s.platform),
        if s.pass { "pass" } else { "fail" },
        s.interrupted
    );
    for r in &s.bounds {
        let _ = writeln!(
            o,
            "    <testcase classname=\"{}\" name=\"{}\" time=\"0\">",
            esc(&suite),
            esc(&r.check)
        );
        if !r.pass {
            let mine: Vec<String> = s
                .violations
                .iter()
                .filter(|v| checks_of(&r.check).contains(&v.check.as_str()))
                .take(50)
                .map(|v| format!("{}: {}", crate::history::rfc3339(v.at), v.message))
                .collect();
            let _ = writeln!(
                o,
                "      <failure type=\"bound\" message=\"bound {}; measured {}\">{}</failure>",
                esc(&r.bound),
                esc(&r.measured),
                esc(&mine.join("\n"))
            );
        }
        let _ = writeln!(
            o,
            "      <system-out>bound {}; measured {}</system-out>\n    </testcase>",
            esc(&r.bound),
            esc(&r.measured)
        );
    }
    if !run.is_empty() {
        let text: Vec<&str> = run.iter().map(|v| v.message.as_str()).collect();
        let _ = writeln!(
            o,
            "    <testcase classname=\"{}\" name=\"run\" time=\"0\">\n      <failure type=\"run\" message=\"{}\">{}</failure>\n    </testcase>",
            esc(&suite),
            esc(text.first().copied().unwrap_or_default()),
            esc(&text.join("\n"))
        );
    }
    o.push_str("  </testsuite>\n</testsuites>\n");
    o
}
