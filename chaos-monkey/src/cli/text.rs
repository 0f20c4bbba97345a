//! The flags' values in a file: a soak scenario's `chaos` section is read
//! with the very parsers of the command line, so a value the monkey would
//! refuse is refused while the file is read, naming the field. A value is
//! read as the file spells it (a duration or a size as text, a number as a
//! number), then its text goes through the flag's parser. Written back, a
//! value keeps that spelling.

use std::time::Duration;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serializer};

/// Reads a `Raw`, then runs the flag's `parse` on its text.
fn parsed<'de, D, Raw, V>(d: D, parse: fn(&str) -> Result<V, String>) -> Result<V, D::Error>
where
    D: Deserializer<'de>,
    Raw: Deserialize<'de> + ToString,
{
    let raw = Raw::deserialize(d)?;
    parse(&raw.to_string()).map_err(D::Error::custom)
}

/// `fn $name(d) -> $out`, reading a `$raw` through `$parse`.
macro_rules! read {
    ($name:ident: $raw:ty => $parse:path => Option<$out:ty>) => {
        pub(super) fn $name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<$out>, D::Error> {
            parsed::<D, $raw, $out>(d, $parse).map(Some)
        }
    };
    ($name:ident: $raw:ty => $parse:path => $out:ty) => {
        pub(super) fn $name<'de, D: Deserializer<'de>>(d: D) -> Result<$out, D::Error> {
            parsed::<D, $raw, $out>(d, $parse)
        }
    };
}

read!(duration: String => super::duration => Duration);
read!(positive_duration: String => super::positive_duration => Duration);
read!(opt_duration: String => super::duration => Option<Duration>);
read!(opt_positive_duration: String => super::positive_duration => Option<Duration>);
read!(probability: f64 => super::probability => f64);
read!(opt_percent: f64 => super::percent => Option<f64>);
read!(opt_size: String => super::size => Option<u64>);
read!(opt_disk_iops: u32 => super::disk_iops => Option<u32>);
read!(opt_at_least_one: usize => super::at_least_one => Option<usize>);

/// A duration as a flag takes it and a file spells it: whole milliseconds
/// as `1500ms`, else nanoseconds (`1500001ns`), so it reads back the same.
pub fn duration_text(d: Duration) -> String {
    if d.subsec_nanos().is_multiple_of(1_000_000) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}ns", d.as_nanos())
    }
}

pub(super) fn write_duration<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&duration_text(*d))
}

pub(super) fn write_opt_duration<S: Serializer>(
    d: &Option<Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => write_duration(d, s),
        None => s.serialize_none(),
    }
}

pub(super) fn write_opt_size<S: Serializer>(n: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match n {
        Some(n) => s.serialize_str(&format!("{n}B")),
        None => s.serialize_none(),
    }
}
