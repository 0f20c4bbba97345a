//! `soak compare OLD NEW`: two runs' summary.json side by side: the verdict,
//! each bound (what was measured, whether it held, what changed) and the
//! top of each latency histogram with the change in percent. Either
//! argument is a report folder or its summary.json.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Why a run cannot be compared.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Nothing there.
    #[error("{0}: no such report folder or summary.json")]
    Missing(PathBuf),
    /// Not a soak summary.
    #[error("{path}: not a soak summary.json ({message})")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// A run's summary.json, from its folder or the file itself.
pub fn load(arg: &Path) -> Result<Value, Error> {
    if !arg.exists() {
        return Err(Error::Missing(arg.into()));
    }
    let path = if arg.is_dir() {
        arg.join("summary.json")
    } else {
        arg.to_path_buf()
    };
    let text = std::fs::read_to_string(&path).map_err(|source| Error::Read {
        path: path.clone(),
        source,
    })?;
    let v: Value = serde_json::from_str(&text).map_err(|e| Error::Parse {
        path: path.clone(),
        message: e.to_string(),
    })?;
    if !v.get("bounds").is_some_and(Value::is_array) || v.get("pass").is_none() {
        return Err(Error::Parse {
            path,
            message: "it has no `pass` and `bounds`".into(),
        });
    }
    Ok(v)
}

fn text(v: &Value, key: &str) -> String {
    match v.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "-".into(),
        Some(x) => x.to_string(),
    }
}

fn verdict(v: &Value) -> &'static str {
    if v["pass"].as_bool().unwrap_or(false) {
        "PASS"
    } else {
        "FAIL"
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

fn change(old: Option<f64>, new: Option<f64>) -> String {
    match (old, new) {
        (Some(o), Some(n)) if o.abs() > f64::EPSILON => format!("{:+.1}%", (n - o) / o * 100.0),
        (Some(o), Some(n)) if (n - o).abs() <= f64::EPSILON => "=".into(),
        (None, Some(_)) => "new".into(),
        (Some(_), None) => "gone".into(),
        _ => "-".into(),
    }
}

/// The comparison, as Markdown tables.
pub fn render(old: &Value, new: &Value, names: (&str, &str)) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# soak compare: {} -> {}\n\n| | old | new |\n|---|---|---|\n| run | {} | {} |\n| scenario | {} | {} |\n| started | {} | {} |\n| seconds of load | {} | {} |\n| verdict | {} | {} |\n| violations | {} | {} |",
        names.0,
        names.1,
        cell(names.0),
        cell(names.1),
        text(old, "scenario"),
        text(new, "scenario"),
        text(old, "started"),
        text(new, "started"),
        text(old, "runSeconds"),
        text(new, "runSeconds"),
        verdict(old),
        verdict(new),
        old["violations"].as_array().map_or(0, Vec::len),
        new["violations"].as_array().map_or(0, Vec::len),
    );
    let _ = writeln!(
        o,
        "\n## Bounds\n\n| check | bound | old | new | change |\n|---|---|---|---|---|"
    );
    let rows = |v: &Value| -> Vec<(String, String, String, bool)> {
        v["bounds"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|r| {
                        (
                            text(r, "check"),
                            text(r, "bound"),
                            text(r, "measured"),
                            r["pass"].as_bool().unwrap_or(false),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let (ro, rn) = (rows(old), rows(new));
    let mut names_seen: Vec<String> = ro.iter().map(|r| r.0.clone()).collect();
    for r in &rn {
        if !names_seen.contains(&r.0) {
            names_seen.push(r.0.clone());
        }
    }
    let mark = |p: bool| if p { "pass" } else { "**FAIL**" };
    for name in names_seen {
        let a = ro.iter().find(|r| r.0 == name);
        let b = rn.iter().find(|r| r.0 == name);
        let bound = b.or(a).map(|r| r.1.clone()).unwrap_or_default();
        let show = |r: Option<&(String, String, String, bool)>| match r {
            Some(r) => format!("{} ({})", r.2, mark(r.3)),
            None => "-".into(),
        };
        let what = match (a, b) {
            (Some(a), Some(b)) if a.3 && !b.3 => "now fails",
            (Some(a), Some(b)) if !a.3 && b.3 => "now passes",
            (Some(a), Some(b)) if a.2 == b.2 => "same",
            (Some(_), Some(_)) => "changed",
            (None, Some(_)) => "new check",
            _ => "not in new",
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {what} |",
            cell(&name),
            cell(&bound),
            cell(&show(a)),
            cell(&show(b))
        );
    }
    let _ = writeln!(
        o,
        "\n## Latency (ms)\n\n| histogram | percentile | old | new | change |\n|---|---|---|---|---|"
    );
    for h in ["recovery", "write", "read"] {
        for (p, label) in [
            ("count", "count"),
            ("p50", "p50"),
            ("p90", "p90"),
            ("p99", "p99"),
            ("p999", "p99.9"),
            ("max", "max"),
        ] {
            let a = old["latencyMs"][h][p].as_f64();
            let b = new["latencyMs"][h][p].as_f64();
            let f = |x: Option<f64>| x.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into());
            let _ = writeln!(
                o,
                "| {h} | {label} | {} | {} | {} |",
                f(a),
                f(b),
                change(a, b)
            );
        }
    }
    let a = old["availability"].as_f64();
    let b = new["availability"].as_f64();
    let pct = |x: Option<f64>| {
        x.map(|x| format!("{:.2}%", x * 100.0))
            .unwrap_or_else(|| "-".into())
    };
    let _ = writeln!(
        o,
        "\nAvailability: {} -> {} ({}).",
        pct(a),
        pct(b),
        change(a, b)
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(pass: bool, p99: f64, measured: &str) -> Value {
        serde_json::json!({
            "scenario": "smoke", "started": "2026-12-03T10:00:00Z", "runSeconds": 90.0,
            "pass": pass, "availability": 0.99, "violations": [],
            "bounds": [{"check": "recovery p99", "bound": "<= 5s", "measured": measured, "pass": pass}],
            "latencyMs": {"write": {"count": 10, "p50": 2.0, "p90": 3.0, "p99": p99, "p999": 9.0, "max": 10.0}}
        })
    }

    #[test]
    fn two_runs_side_by_side_with_the_change() {
        let out = render(
            &summary(true, 4.0, "1s"),
            &summary(false, 6.0, "7s"),
            ("a", "b"),
        );
        assert!(out.contains("| verdict | PASS | FAIL |"), "{out}");
        assert!(
            out.contains("| recovery p99 | <= 5s | 1s (pass) | 7s (**FAIL**) | now fails |"),
            "{out}"
        );
        assert!(
            out.contains("| write | p99 | 4.0 | 6.0 | +50.0% |"),
            "{out}"
        );
        assert!(out.contains("| read | p99 | - | - | - |"), "{out}");
    }

    #[test]
    fn what_is_not_a_summary_is_refused_with_its_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = load(dir.path()).expect_err("no file");
        assert!(e.to_string().contains("summary.json"), "{e}");
        std::fs::write(dir.path().join("summary.json"), "{\"x\": 1}").expect("write");
        let e = load(dir.path()).expect_err("not a summary");
        assert!(e.to_string().contains("not a soak summary.json"), "{e}");
        std::fs::write(
            dir.path().join("summary.json"),
            summary(true, 1.0, "1s").to_string(),
        )
        .expect("write");
        assert!(load(&dir.path().join("summary.json")).is_ok());
    }
}
