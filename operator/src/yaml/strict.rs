//! Types as strict as the CRD schema: a value serde accepted is compared
//! with how the YAML spelled it. A number or boolean field written as a
//! quoted string (`size: "3"`, `paused: "yes"`), an integer not in
//! decimal digits (`0x3`, `+3`, `03`, `3_000`), and a string field written
//! as a bare number or boolean (`version: 3.5`) are refused with the
//! field's name, as the API server refuses them on Kubernetes.

use serde_json::Value;
use serde_saphyr::Spanned;

use super::tree::{Node, join, raw};
use crate::names::quote;

/// Whether `text` is an integer in plain decimal digits.
fn decimal(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
}

/// Every place where `node` (as written) does not have the type of `value`
/// (as read), by field.
pub(crate) fn mismatches(value: &Value, node: &Spanned<Node>, source: &str) -> Vec<String> {
    let mut out = Vec::new();
    walk(value, node, "", source, &mut out);
    out
}

fn walk(value: &Value, node: &Spanned<Node>, path: &str, source: &str, out: &mut Vec<String>) {
    let written = || quote(raw(source, &node.defined).trim(), 40);
    let at = format!(
        "line {} column {}",
        node.referenced.line(),
        node.referenced.column()
    );
    match (value, &node.value) {
        (Value::Object(fields), Node::Map(entries)) => {
            for (k, v) in entries {
                if let Some(f) = fields.get(k) {
                    walk(f, v, &join(path, k), source, out);
                }
            }
        }
        (Value::Array(items), Node::Seq(nodes)) => {
            for (i, (item, n)) in items.iter().zip(nodes).enumerate() {
                walk(item, n, &format!("{path}[{i}]"), source, out);
            }
        }
        (Value::Number(_), Node::Str(s)) => out.push(format!(
            "{at}: {path}: must be a number, not the string {}: write it without quotes",
            quote(s, 40)
        )),
        (Value::Number(n), Node::Int) if !n.is_f64() => {
            let text = raw(source, &node.defined).trim();
            if !text.is_empty() && !decimal(text) {
                out.push(format!(
                    "{at}: {path}: write the number in decimal digits (such as {n}), not {}",
                    written()
                ));
            }
        }
        (Value::Bool(_), Node::Str(s)) => out.push(format!(
            "{at}: {path}: must be true or false (without quotes), not the string {}",
            quote(s, 40)
        )),
        (Value::String(_), Node::Int | Node::Float | Node::Bool) => out.push(format!(
            "{at}: {path}: must be a string, not {}: put it in quotes",
            written()
        )),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::decimal;

    #[test]
    fn decimal_spellings() {
        for ok in ["0", "3", "-1", "10", "4294967296"] {
            assert!(decimal(ok), "{ok}");
        }
        for bad in ["", "-", "0x3", "+3", "03", "3_000", "0o7", "1e3", "3.0"] {
            assert!(!decimal(bad), "{bad}");
        }
    }
}
