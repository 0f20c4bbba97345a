//! The smallest pieces of a spec's validation, below every module that
//! checks a part of it (`validate` and the member settings it delegates
//! to): a problem with one field, and durations as a spec writes them.

use std::time::Duration;

/// One problem with one field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Path of the field, such as `spec.size`.
    pub field: String,
    /// What is wrong and what is allowed.
    pub message: String,
}

/// The longest duration a spec may give (100 years): every interval and
/// validity is far below it, and anything longer is a typo that would
/// overflow a schedule's arithmetic.
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 86_400);

/// A Go duration ("30m", "1h30m", "10s", "1.5h"), as Go's
/// `time.ParseDuration` and so the API server's CEL `duration()` read it,
/// with surrounding [`SPACES`] allowed, from 0 to [`MAX_DURATION`].
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = parse_go_duration(s)?;
    if d > MAX_DURATION {
        return Err(too_long(s));
    }
    Ok(d)
}

fn too_long(s: &str) -> String {
    format!(
        "{} is longer than 100 years (876000h), the most a duration here may be",
        crate::names::quote(s, 40)
    )
}

/// The spaces a spec's durations, numbers and times may have around them
/// (ASCII's: space, tab, newline, form feed, carriage return), as a
/// regular expression: what [`trim_spaces`] drops.
macro_rules! spaces_pattern {
    () => {
        r"[ \t\n\f\r]*"
    };
}
/// The pattern of [`trim_spaces`]'s spaces.
pub const SPACES: &str = spaces_pattern!();

/// `s` without the [`SPACES`] around it.
pub fn trim_spaces(s: &str) -> &str {
    s.trim_ascii()
}

/// What [`parse_duration`] reads, as a regular expression for the CRD's
/// schema (`pattern`): Go's duration syntax, not negative (every duration
/// of the spec has a positive minimum), with [`SPACES`] around it.
pub const GO_DURATION_PATTERN: &str = concat!(
    "^",
    spaces_pattern!(),
    r"\+?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)",
    spaces_pattern!(),
    "$"
);

/// A Go duration, not negative, of any length (one longer than a
/// `Duration` holds is its greatest, which every bound refuses):
/// `[-+]?` then `0`, or numbers (digits, a fraction or both) each
/// followed by a unit (ns, us, µs, μs, ms, s, m, h), as Go's
/// `time.ParseDuration` takes them.
fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let bad = |why: &str| {
        format!(
            "{} is not a duration such as \"30m\", \"1h\" or \"10s\" ({why})",
            crate::names::quote(s, 40)
        )
    };
    let text = trim_spaces(s);
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(bad("it is empty"));
    }
    let digits = |t: &str| t.bytes().take_while(u8::is_ascii_digit).count();
    let mut nanos: u128 = 0;
    while !rest.is_empty() {
        let (whole, after) = rest.split_at(digits(rest));
        let (fraction, after) = match after.strip_prefix('.') {
            Some(a) => a.split_at(digits(a)),
            None => ("", after),
        };
        if whole.is_empty() && fraction.is_empty() {
            return Err(bad("a number is missing"));
        }
        let unit_len = after
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(bad("a unit is missing: ns, us, ms, s, m or h")),
            _ => {
                return Err(bad(&format!(
                    "unknown unit {}: ns, us, ms, s, m or h",
                    crate::names::quote(unit, 10)
                )));
            }
        };
        // 30 digits of hours are more than any `Duration`.
        let whole: u128 = match whole.len() {
            0 => 0,
            1..=30 => whole.parse().map_err(|_| bad("not a number"))?,
            _ => u128::MAX,
        };
        // Digits past the 18th are below a nanosecond of any unit.
        let fraction = &fraction[..fraction.len().min(18)];
        let part: u128 = if fraction.is_empty() {
            0
        } else {
            let f: u128 = fraction.parse().map_err(|_| bad("not a number"))?;
            let exp = u32::try_from(fraction.len()).unwrap_or(18);
            f * scale / 10u128.pow(exp)
        };
        nanos = nanos
            .saturating_add(whole.saturating_mul(scale))
            .saturating_add(part);
        rest = next;
    }
    if negative && nanos > 0 {
        return Err(format!(
            "must not be negative, got {}",
            crate::names::quote(s, 40)
        ));
    }
    let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
    let subsec = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
    Ok(Duration::new(secs, subsec))
}

/// The longest interval of a schedule (backups, restore checks,
/// scheduled defragmentation): a year and a day. Anything longer is a
/// typo (a backup every `100000000h` is no backup at all).
pub const MAX_INTERVAL: Duration = Duration::from_secs(366 * 86_400);

/// A schedule's interval, from `min` to [`MAX_INTERVAL`]; the message
/// names the range.
pub fn parse_interval(s: &str, min: Duration) -> Result<Duration, String> {
    let d = parse_go_duration(s)?;
    if (min..=MAX_INTERVAL).contains(&d) {
        return Ok(d);
    }
    Err(format!(
        "must be at least {} and at most {}h (366 days), got {:?}",
        humantime::format_duration(min),
        MAX_INTERVAL.as_secs() / 3600,
        trim_spaces(s)
    ))
}

/// RFC 3339 (UTC, milliseconds) of `ms` since the Unix epoch.
pub fn rfc3339_ms(ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + Duration::from_millis(ms);
    humantime::format_rfc3339_millis(at).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn go_durations() {
        let ms = Duration::from_millis;
        for (text, d) in [
            ("30m", Duration::from_secs(1800)),
            ("1h30m", Duration::from_secs(5400)),
            ("1.5h", Duration::from_secs(5400)),
            (".5s", ms(500)),
            ("5.s", Duration::from_secs(5)),
            ("1h.5m", Duration::from_secs(3630)),
            ("250ms", ms(250)),
            ("3us", Duration::from_micros(3)),
            ("3\u{b5}s", Duration::from_micros(3)),
            ("3\u{3bc}s", Duration::from_micros(3)),
            ("7ns", Duration::from_nanos(7)),
            ("+10s", Duration::from_secs(10)),
            (" \t10s\n", Duration::from_secs(10)),
            ("0", Duration::ZERO),
            ("-0", Duration::ZERO),
            ("-0s", Duration::ZERO),
            ("1.0000000000000000000001s", Duration::from_secs(1)),
            ("876000h", MAX_DURATION),
        ] {
            assert_eq!(parse_duration(text), Ok(d), "{text:?}");
        }
    }

    /// What Go's `time.ParseDuration` refuses is refused, with a message
    /// and without a panic (a sign inside, a number too large for any
    /// duration, a unit missing after a number).
    #[test]
    fn not_go_durations() {
        for text in [
            "", " ", "1h-5m", "1h+5m", "+-5s", "--5s", "1h0", "1", "s", ".s", "1.h.", "1 h",
            "1h 5m", "1d", "1H", "1e3s", "inf", "nan", "-5s", "\u{a0}5s",
        ] {
            assert!(parse_duration(text).is_err(), "{text:?} accepted");
        }
        for long in [
            "99999999999999999999999h",
            "876001h",
            &format!("{}s", u64::MAX),
            &format!("{}h", "9".repeat(40)),
        ] {
            let e = parse_duration(long).expect_err(long);
            assert!(e.contains("longer than 100 years"), "{e}");
        }
        assert!(
            parse_duration("-5ms")
                .expect_err("negative")
                .contains("must not be negative")
        );
    }

    proptest! {
        /// The schema's pattern takes exactly what the parser takes, but
        /// for negative zero, which every field refuses by its minimum.
        #[test]
        fn the_pattern_is_the_parser(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "0", "1", "25", ".", "h", "m", "s", "ms", "us", "\u{b5}s", "ns", "x", " ",
                    "+", "-", "\t",
                ]),
                0..8,
            )
        ) {
            let text: String = parts.concat();
            let pattern = regex::Regex::new(GO_DURATION_PATTERN).expect("a regex");
            let parsed = parse_go_duration(&text).is_ok() && !trim_spaces(&text).starts_with('-');
            prop_assert_eq!(pattern.is_match(&text), parsed, "{:?}", text);
        }
    }
}
