//! Strict YAML for EtcdCluster manifests and soak scenarios: types as
//! strict as the CRD schema ([`strict`]), and messages a user can act on:
//! the line, column and field of every error, the source line quoted and
//! cut to a readable length, no advice meant for programmers, and the
//! position of invalid UTF-8.

mod strict;
mod tree;

use std::borrow::Cow;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_saphyr::budget::{Budget, BudgetBreach};
use serde_saphyr::{Error, MessageFormatter, Options, Spanned, UserMessageFormatter};

use self::tree::Node;
use crate::names::quote;

/// Deepest nesting a document may have: a manifest nests 4 levels, a
/// scenario 3; much deeper trees would overflow a 2 MiB thread stack while
/// being read.
pub const MAX_DEPTH: usize = 24;
/// Most nodes a file may have (a manifest has a few dozen).
pub const MAX_NODES: usize = 100_000;
/// How much of a message from the parser is kept.
const MESSAGE_CHARS: usize = 300;
/// How much of the source line an error quotes.
const LINE_CHARS: usize = 80;

/// The parser's options: duplicate keys refused, bounded depth and size.
pub fn options() -> Options {
    let mut budget = Budget::default();
    budget.max_depth = MAX_DEPTH;
    budget.max_nodes = MAX_NODES;
    let mut options = Options::default();
    options.budget = Some(budget);
    options.with_snippet = false;
    options
}

/// The range a whole-number field allows when it is narrower than its
/// type's, by the field's path in the document (`spec.size`): the least
/// and the greatest value, either unbounded (`None`). A number too large
/// for its type is then refused with the range a user may write, not the
/// type's 64-bit one.
pub type Bounds = fn(&str) -> (Option<i128>, Option<i128>);

/// [`Bounds`] for documents whose fields allow their whole type.
pub fn no_bounds(_: &str) -> (Option<i128>, Option<i128>) {
    (None, None)
}

/// Every document of `text` as a `T`, refusing values whose YAML type is
/// not the field's (see [`strict`]). The error names the line, column and
/// field of each problem.
pub fn from_multiple<T: DeserializeOwned + Serialize>(text: &str) -> Result<Vec<T>, String> {
    from_multiple_bounded(text, no_bounds)
}

/// [`from_multiple`], a number out of range saying the range `bounds`
/// gives its field.
pub fn from_multiple_bounded<T: DeserializeOwned + Serialize>(
    text: &str,
    bounds: Bounds,
) -> Result<Vec<T>, String> {
    let say = |e: &Error| describe_bounded(e, text, bounds);
    let docs: Vec<T> =
        serde_saphyr::from_multiple_with_options(text, options()).map_err(|e| say(&e))?;
    let trees = trees(text).map_err(|e| say(&e))?;
    let mut problems = Vec::new();
    for (doc, tree) in docs.iter().zip(&trees) {
        let value = serde_json::to_value(doc).map_err(|e| e.to_string())?;
        problems.extend(strict::mismatches(&value, tree, text));
    }
    if problems.is_empty() {
        Ok(docs)
    } else {
        Err(problems.join("; "))
    }
}

/// The one document of `text` as a `T`, as strict as [`from_multiple`].
pub fn from_str<T: DeserializeOwned + Serialize>(text: &str) -> Result<T, String> {
    from_str_bounded(text, no_bounds)
}

/// [`from_str`], a number out of range saying the range `bounds` gives
/// its field.
pub fn from_str_bounded<T: DeserializeOwned + Serialize>(
    text: &str,
    bounds: Bounds,
) -> Result<T, String> {
    let say = |e: &Error| describe_bounded(e, text, bounds);
    let doc: T = serde_saphyr::from_str_with_options(text, options()).map_err(|e| say(&e))?;
    let tree: Spanned<Node> =
        serde_saphyr::from_str_with_options(text, options()).map_err(|e| say(&e))?;
    let value = serde_json::to_value(&doc).map_err(|e| e.to_string())?;
    let problems = strict::mismatches(&value, &tree, text);
    if problems.is_empty() {
        Ok(doc)
    } else {
        Err(problems.join("; "))
    }
}

/// The documents of `text` as written (empty documents left out, as the
/// typed parse leaves them out).
fn trees(text: &str) -> Result<Vec<Spanned<Node>>, Error> {
    // `.inf` and `.nan` are nodes too (the typed parse says what is wrong
    // with them; the tree only has to know where they are).
    let mut opts = options();
    opts.non_finite_float_policy = serde_saphyr::NonFiniteFloatPolicy::PassThrough;
    let mut trees: Vec<Spanned<Node>> = serde_saphyr::from_multiple_with_options(text, opts)?;
    trees.retain(|t| !matches!(t.value, Node::Null));
    Ok(trees)
}

/// `bytes` as text, or where it is not UTF-8 (line, column and byte).
pub fn utf8(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes).map_err(|e| {
        let good = &bytes[..e.valid_up_to()];
        let line = good.iter().filter(|b| **b == b'\n').count() + 1;
        let start = good.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&good[start..]).chars().count() + 1;
        format!(
            "not valid UTF-8 at line {line} column {column} (byte {}): save the file as UTF-8",
            e.valid_up_to()
        )
    })
}

/// Messages in words for the people who write manifests.
struct Friendly;

impl MessageFormatter for Friendly {
    fn format_message<'a>(&self, err: &'a Error) -> Cow<'a, str> {
        match err {
            Error::InvalidScalar { ty, .. } => Cow::Owned(format!("not {}", kind_of(ty))),
            Error::Budget {
                breach: BudgetBreach::Depth { .. },
                ..
            } => Cow::Owned(format!("the document nests deeper than {MAX_DEPTH} levels")),
            Error::Budget {
                breach: BudgetBreach::Nodes { .. },
                ..
            } => Cow::Owned(format!("the file holds more than {MAX_NODES} values")),
            Error::Budget { .. } => Cow::Borrowed("the document is too large or too complex"),
            Error::Unexpected { expected, .. } if expected.contains("string scalar") => {
                Cow::Borrowed(
                    "must be a single text value (quoted if in doubt), not a list or a mapping",
                )
            }
            Error::Unexpected { expected, .. } if expected.ends_with("scalar") => Cow::Owned(
                format!("must be a single value ({expected}), not a list or a mapping"),
            ),
            Error::ExternallyTaggedEnumExpectedScalarOrMapping { .. } => Cow::Borrowed(
                "must be one of the words this field allows (see the spec reference), not a list",
            ),
            Error::SerdeUnknownField {
                field, expected, ..
            } => Cow::Owned(format!(
                "unknown field `{field}`{}, expected one of {}",
                non_ascii(field),
                expected.join(", ")
            )),
            _ => UserMessageFormatter.format_message(err),
        }
    }
}

/// For a name with a letter outside ASCII (a Cyrillic `е` in `spеc`
/// looks like the Latin one), where that letter is; else nothing.
fn non_ascii(name: &str) -> String {
    match name.chars().enumerate().find(|(_, c)| !c.is_ascii()) {
        Some((i, c)) => format!(
            " (its letter {} is {c:?} U+{:04X}, not ASCII: type the name again in plain ASCII)",
            i + 1,
            u32::from(c)
        ),
        None => String::new(),
    }
}

/// The range of a whole-number type.
fn range_of(ty: &str) -> Option<(i128, i128)> {
    let (lo, hi): (i128, i128) = match ty {
        "i8" => (i8::MIN.into(), i8::MAX.into()),
        "i16" => (i16::MIN.into(), i16::MAX.into()),
        "i32" => (i32::MIN.into(), i32::MAX.into()),
        "i64" | "isize" => (i64::MIN.into(), i64::MAX.into()),
        "u8" => (0, u8::MAX.into()),
        "u16" => (0, u16::MAX.into()),
        "u32" => (0, u32::MAX.into()),
        "u64" | "usize" => (0, u64::MAX.into()),
        _ => return None,
    };
    Some((lo, hi))
}

/// The plain scalar at line `line`, column `column` (both from 1) of
/// `source`, up to the next `,`, `}`, `]` or comment.
fn scalar_at(source: &str, line: u64, column: u64) -> Option<&str> {
    let text = source
        .lines()
        .nth(usize::try_from(line).ok()?.checked_sub(1)?)?;
    let start = text
        .char_indices()
        .nth(usize::try_from(column).ok()?.checked_sub(1)?)
        .map(|(i, _)| i)?;
    let rest = &text[start..];
    let end = rest.find([',', '}', ']', '#']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// A better word for a scalar of a whole-number type that did not parse:
/// a whole number out of range, or a non-finite float. The range said is
/// the type's narrowed by the field's `bounds`.
fn whole_number_problem(
    ty: &str,
    token: &str,
    bounds: (Option<i128>, Option<i128>),
) -> Option<String> {
    let (lo, hi) = range_of(ty)?;
    let lo = bounds.0.map_or(lo, |b| b.max(lo));
    let hi = bounds.1.map_or(hi, |b| b.min(hi));
    let range = format!("from {lo} to {hi}");
    let digits = token.trim_start_matches('+').replace('_', "");
    let unsigned = digits.strip_prefix('-').unwrap_or(&digits);
    if !unsigned.is_empty() && unsigned.chars().all(|c| c.is_ascii_digit()) {
        // Past i128 too, or within i128 but outside the type's range.
        let outside = digits.parse::<i128>().map_or(true, |n| n < lo || n > hi);
        return outside.then(|| format!("{token} is out of range: a whole number {range}"));
    }
    let lower = token.to_ascii_lowercase();
    if [".inf", "+.inf", "-.inf", ".nan"].contains(&lower.as_str()) {
        return Some(format!(
            "not a whole number: {token} is not a number one can count with ({range})"
        ));
    }
    None
}

/// What a Rust type name means to a person writing YAML.
fn kind_of(ty: &str) -> String {
    match ty {
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "a whole number".into(),
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => {
            "a whole number of 0 or more (within range)".into()
        }
        "f32" | "f64" | "floating point" => "a number".into(),
        "bool" => "true or false".into(),
        other => format!("a valid {other}"),
    }
}

/// One line for a parse error: `line L column C: FIELD: what is wrong (at
/// `the source line`)`, every part cut to a readable length.
pub fn describe(e: &Error, source: &str) -> String {
    describe_bounded(e, source, no_bounds)
}

/// [`describe`], a number out of range saying the range `bounds` gives
/// its field.
pub fn describe_bounded(e: &Error, source: &str, bounds: Bounds) -> String {
    let inner = e.without_snippet();
    let message: String = Friendly
        .format_message(inner)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let message = cut(message.trim(), MESSAGE_CHARS);
    let Some(at) = e.location().filter(|l| l.line() > 0) else {
        return message;
    };
    let field = trees(source)
        .ok()
        .and_then(|docs| docs.iter().find_map(|d| tree::field_at(d, &at)));
    let message = match inner {
        Error::InvalidScalar { ty, .. } => scalar_at(source, at.line(), at.column())
            .and_then(|token| {
                let field_bounds = field.as_deref().map_or((None, None), bounds);
                whole_number_problem(ty, token, field_bounds)
            })
            .unwrap_or(message),
        _ => message,
    };
    let line = usize::try_from(at.line())
        .ok()
        .and_then(|n| source.lines().nth(n.checked_sub(1)?))
        .map(str::trim)
        .filter(|l| !l.is_empty());
    let mut out = format!("line {} column {}: ", at.line(), at.column());
    if let Some(f) = field.filter(|f| !message.contains(f.as_str())) {
        out.push_str(&f);
        out.push_str(": ");
    }
    out.push_str(&message);
    if let Some(line) = line {
        out.push_str(&format!(" (at `{}`)", cut(line, LINE_CHARS)));
    }
    out
}

/// `text` cut to `max` characters, saying how long it was.
fn cut(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_string();
    }
    let head: String = text.chars().take(max).collect();
    format!("{head}... ({total} characters)")
}

/// Quotes `text` for a message, cut short (re-exported for callers that
/// quote values they read).
pub fn quote_value(text: &str) -> String {
    quote(text, 40)
}

#[cfg(test)]
mod tests;
