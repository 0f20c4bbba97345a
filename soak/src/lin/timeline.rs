//! Operations on a time line, as text: one row per operation, a bar from
//! its call to its return (open to the right edge when its outcome is
//! unknown), the client, times relative to the first call, and what it did.
//!
//! ```text
//!   +0.000s .. +0.012s  w1  |[=====]                       | put w1#4 -> ok rev 10
//!   +0.005s .. +0.030s  r0  |   [==============]           | get -> absent (rev 11)
//! ```

use std::fmt::Write as _;

use super::Shown;

/// Width of the bar area, in characters.
const WIDTH: usize = 40;

/// The rows.
pub fn render(ops: &[Shown]) -> String {
    let Some(t0) = ops.iter().map(|o| o.call).min() else {
        return String::new();
    };
    let t1 = ops
        .iter()
        .map(|o| o.ret.unwrap_or(o.call))
        .chain(ops.iter().map(|o| o.call))
        .max()
        .unwrap_or(t0)
        .max(t0 + 1);
    let span = (t1 - t0) as f64;
    let col = |t: u64| (((t - t0) as f64 / span) * (WIDTH - 1) as f64).round() as usize;
    let client_w = ops.iter().map(|o| o.client.len()).max().unwrap_or(1);
    let secs = |t: u64| format!("+{:.3}s", (t - t0) as f64 / 1e6);
    let mut out = String::new();
    for o in ops {
        let a = col(o.call).min(WIDTH - 1);
        let (b, end) = match o.ret {
            Some(r) => (col(r).clamp(a, WIDTH - 1), secs(r)),
            None => (WIDTH - 1, "open".to_string()),
        };
        let mut bar = vec![' '; WIDTH];
        for c in bar.iter_mut().take(b + 1).skip(a) {
            *c = '=';
        }
        bar[a] = '[';
        bar[b] = if o.ret.is_some() {
            if a == b { '|' } else { ']' }
        } else {
            '>'
        };
        let bar: String = bar.into_iter().collect();
        let _ = writeln!(
            out,
            "{:>9} .. {:>9}  {:<client_w$}  |{bar}| #{} {}",
            secs(o.call),
            end,
            o.client,
            o.id,
            o.text
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(client: &str, call: u64, ret: Option<u64>, text: &str) -> Shown {
        Shown {
            id: call,
            client: client.into(),
            key: "k".into(),
            call,
            ret,
            text: text.into(),
        }
    }

    #[test]
    fn bars_span_call_to_return_and_open_ones_run_off() {
        let t = render(&[
            shown("w1", 0, Some(1_000_000), "put w1#1 -> ok rev 5"),
            shown("r0", 500_000, Some(2_000_000), "get -> absent (rev 6)"),
            shown("w2", 1_500_000, None, "put w2#1 -> unknown"),
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(
            lines[0].starts_with("  +0.000s ..   +1.000s  w1  |[="),
            "{t}"
        );
        assert!(lines[0].ends_with("| #0 put w1#1 -> ok rev 5"), "{t}");
        assert!(lines[1].contains("=]|"), "{t}");
        assert!(
            lines[2].contains("..      open") && lines[2].contains("=>|"),
            "{t}"
        );
        assert_eq!(render(&[]), "");
    }
}
