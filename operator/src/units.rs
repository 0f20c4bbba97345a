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

/// A Go-style duration ("30m", "1h30m", "10s") as a std duration, from 0
/// to [`MAX_DURATION`].
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = parse_go_duration(s)?;
    if d > MAX_DURATION {
        return Err(format!(
            "{s:?} is longer than 100 years (876000h), the most a duration here may be"
        ));
    }
    Ok(d)
}

/// A Go-style duration, not negative, of any length.
fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let d: kube::core::Duration = s
        .trim()
        .parse()
        .map_err(|e| format!("{s:?} is not a duration such as \"30m\", \"1h\" or \"10s\" ({e})"))?;
    if d.is_negative() {
        return Err(format!("must not be negative, got {s:?}"));
    }
    Ok(d.into())
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
        s.trim()
    ))
}

/// RFC 3339 (UTC, milliseconds) of `ms` since the Unix epoch.
pub fn rfc3339_ms(ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + Duration::from_millis(ms);
    humantime::format_rfc3339_millis(at).to_string()
}
