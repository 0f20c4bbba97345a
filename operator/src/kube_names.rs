//! Values from a spec that become Kubernetes object names or quantities
//! (the backup claim's name, its size and storage class), checked as the
//! API server checks them before any becomes part of a request path or an
//! object: a claim name such as `../x` or `a/b` never reaches a URL; and
//! the Event note cut to what the API server takes.

/// Longest Event note the API server takes (events.k8s.io/v1: 1 kB), in
/// bytes.
pub const NOTE_MAX_BYTES: usize = 1024;

/// `message` cut to at most [`NOTE_MAX_BYTES`] bytes on a character
/// boundary (a spec may hold any UTF-8, and a longer note is refused, so
/// the Event would be lost).
pub fn event_note(message: &str) -> String {
    let mut end = message.len().min(NOTE_MAX_BYTES);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_string()
}

/// Longest object name (a DNS subdomain, RFC 1123).
pub const MAX_OBJECT_NAME_LEN: usize = 253;

/// What [`check_object_name`] takes (with at most [`MAX_OBJECT_NAME_LEN`]
/// characters), as a regular expression: no empty part between dots.
pub const OBJECT_NAME_PATTERN: &str = r"^[a-z0-9](([-a-z0-9]|\.[-a-z0-9])*([a-z0-9]|\.[a-z0-9]))?$";

/// Checks an object name as Kubernetes checks a DNS subdomain name:
/// lowercase letters, digits, '-' and '.', starting and ending with a
/// letter or digit, at most 253 characters. Says what is wrong.
pub fn check_object_name(name: &str) -> Result<(), String> {
    let quoted = crate::names::quote(name, 48);
    let bad = |why: String| {
        Err(format!(
            "{quoted} is not a valid object name: {why}; use lowercase letters, digits, '-' and \
             '.', starting and ending with a letter or digit, at most {MAX_OBJECT_NAME_LEN} \
             characters"
        ))
    };
    let len = name.chars().count();
    if name.is_empty() {
        return bad("it is empty".into());
    }
    if len > MAX_OBJECT_NAME_LEN {
        return bad(format!("it is {len} characters long"));
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    if let Some(c) = name.chars().find(|c| !allowed(*c)) {
        return bad(format!("it contains {c:?}"));
    }
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !name.starts_with(alnum) || !name.ends_with(alnum) {
        return bad("it does not start and end with a letter or digit".into());
    }
    if name.split('.').any(str::is_empty) {
        return bad("it has an empty part between dots".into());
    }
    Ok(())
}

/// Suffixes of a storage quantity, as Kubernetes writes them.
const SUFFIXES: [&str; 12] = [
    "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E",
];

/// The form [`check_size`] takes, as a regular expression; a zero passes
/// it and is refused by the operator.
pub fn size_pattern() -> String {
    format!("^[0-9]{{1,18}}({})?$", SUFFIXES.join("|"))
}

/// Checks a storage size such as `10Gi` or `500M`: a positive whole number
/// with an optional binary (Ki..Ei) or decimal (k..E) suffix.
pub fn check_size(size: &str) -> Result<(), String> {
    let quoted = crate::names::quote(size, 32);
    let digits = SUFFIXES
        .iter()
        .find_map(|s| size.strip_suffix(s))
        .unwrap_or(size);
    let whole =
        !digits.is_empty() && digits.len() <= 18 && digits.bytes().all(|b| b.is_ascii_digit());
    if !whole || digits.bytes().all(|b| b == b'0') {
        return Err(format!(
            "{quoted} is not a size: write a positive whole number with a unit, such as \"10Gi\" \
             or \"500Mi\""
        ));
    }
    Ok(())
}

/// The bytes of a size [`check_size`] takes (`10Gi`, `500M`); `None` for
/// anything else, or more than 64 bits hold.
pub fn size_bytes(size: &str) -> Option<u64> {
    check_size(size).ok()?;
    let (digits, unit): (&str, u64) = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("Pi", 1 << 50),
        ("Ei", 1 << 60),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
        ("P", 1_000_000_000_000_000),
        ("E", 1_000_000_000_000_000_000),
    ]
    .iter()
    .find_map(|(s, n)| size.strip_suffix(s).map(|d| (d, *n)))
    .unwrap_or((size, 1));
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

/// A Kubernetes quantity (`500m`, `2`, `1.5Gi`, `128Mi`, `1e3`) in
/// thousandths of its unit (millicores, millibytes), rounded up as the
/// API server rounds; `None` when it is no quantity, is negative, or is
/// larger than the API server takes (2^63-1 of its unit).
pub fn quantity_milli(q: &str) -> Option<u128> {
    let q = q.strip_prefix('+').unwrap_or(q);
    let end = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(end);
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() || frac.contains('.') || whole.len() + frac.len() > 30 {
        return None;
    }
    let digits: u128 = format!("{whole}{frac}").parse().ok()?;
    // value = digits * 10^-frac * multiplier; in thousandths: * 1000.
    let (num, den): (u128, u128) = match suffix {
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            let power = "KMGTPE".find(&suffix[..1])? as u32 + 1;
            (1u128 << (10 * power), 1)
        }
        "m" => (1, 1000),
        "" => (1, 1),
        "k" => (10u128.pow(3), 1),
        "M" => (10u128.pow(6), 1),
        "G" => (10u128.pow(9), 1),
        "T" => (10u128.pow(12), 1),
        "P" => (10u128.pow(15), 1),
        "E" => (10u128.pow(18), 1),
        e if e.starts_with(['e', 'E']) => {
            let exp: i32 = e[1..].parse().ok()?;
            if !(-30..=30).contains(&exp) {
                return None;
            }
            let p = 10u128.pow(exp.unsigned_abs());
            if exp >= 0 { (p, 1) } else { (1, p) }
        }
        _ => return None,
    };
    let scale = 10u128.checked_pow(u32::try_from(frac.len()).ok()?)?;
    let top = digits.checked_mul(num)?.checked_mul(1000)?;
    let bottom = den.checked_mul(scale)?;
    let milli = top.div_ceil(bottom);
    (milli / 1000 <= i64::MAX as u128).then_some(milli)
}

/// Longest label value, and name part of a label or annotation key.
pub const MAX_LABEL_LEN: usize = 63;

/// A label value: empty, or at most 63 letters, digits, `-`, `_` and
/// `.`, starting and ending with a letter or digit.
pub fn check_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_label_name(value) {
        return Ok(());
    }
    Err(format!(
        "{} is not a label value: at most {MAX_LABEL_LEN} letters, digits, '-', '_' and '.', \
         starting and ending with a letter or digit",
        crate::names::quote(value, 70)
    ))
}

fn is_label_name(s: &str) -> bool {
    let edge = |c: char| c.is_ascii_alphanumeric();
    s.len() <= MAX_LABEL_LEN
        && s.starts_with(edge)
        && s.ends_with(edge)
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// A label or annotation key: `NAME` or `PREFIX/NAME`, the prefix a DNS
/// subdomain, the name at most 63 letters, digits, `-`, `_` and `.`,
/// starting and ending with a letter or digit.
pub fn check_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| check_object_name(p).is_ok());
    if prefix_ok && is_label_name(name) {
        return Ok(());
    }
    Err(format!(
        "{} is not a valid key: NAME or PREFIX/NAME, the name at most {MAX_LABEL_LEN} letters, \
         digits, '-', '_' and '.' starting and ending with a letter or digit, the prefix a DNS \
         name such as example.com",
        crate::names::quote(key, 70)
    ))
}

/// Longest image repository.
pub const MAX_REPOSITORY_LEN: usize = 255;

/// What [`check_repository`] takes, as a regular expression: an optional
/// registry host (with a port) and a path of lowercase components, no tag
/// and no digest.
pub const REPOSITORY_PATTERN: &str = concat!(
    r"^([A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*",
    r"(:[0-9]+)?/)?[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$"
);

/// An image repository without its tag (`quay.io/coreos/etcd`,
/// `registry.local:5000/mirror/etcd`): what [`REPOSITORY_PATTERN`] says,
/// at most [`MAX_REPOSITORY_LEN`] characters.
pub fn check_repository(repository: &str) -> Result<(), String> {
    let quoted = crate::names::quote(repository, 80);
    let last = repository.rsplit('/').next().unwrap_or_default();
    if repository.contains('@') || last.contains(':') {
        return Err(format!(
            "{quoted} names a tag or digest: give the repository only (spec.version picks the \
             tag, vVERSION)"
        ));
    }
    let host = |h: &str| {
        let (name, port) = h.split_once(':').unwrap_or((h, "1"));
        let part = |p: &str| {
            p.starts_with(|c: char| c.is_ascii_alphanumeric())
                && p.ends_with(|c: char| c.is_ascii_alphanumeric())
                && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        };
        name.split('.').all(part) && !port.is_empty() && port.chars().all(|c| c.is_ascii_digit())
    };
    let component = |p: &str| {
        let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        let mut parts = Vec::new();
        let mut rest = p;
        // Split at separators: '.', '_', '__' or a run of '-'.
        while let Some(i) = rest.find(|c: char| !alnum(c)) {
            parts.push(&rest[..i]);
            let after = &rest[i..];
            let sep_len = if after.starts_with("__") {
                2
            } else if after.starts_with('-') {
                after.len() - after.trim_start_matches('-').len()
            } else if after.starts_with(['.', '_']) {
                1
            } else {
                return false;
            };
            rest = &after[sep_len..];
        }
        parts.push(rest);
        parts.iter().all(|s| !s.is_empty())
    };
    let parts: Vec<&str> = repository.split('/').collect();
    let path_ok = |ps: &[&str]| !ps.is_empty() && ps.iter().all(|p| component(p));
    let ok = path_ok(&parts) || parts.len() > 1 && host(parts[0]) && path_ok(&parts[1..]);
    if ok && repository.len() <= MAX_REPOSITORY_LEN {
        return Ok(());
    }
    Err(format!(
        "{quoted} is not an image repository: write it as [HOST[:PORT]/]PATH, the path in \
         lowercase letters, digits and separators ('.', '_', '-'), such as \
         registry.example.com/mirror/etcd, at most {MAX_REPOSITORY_LEN} characters"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn object_names() {
        for good in ["backups", "demo-backups", "a", "a.b-c", "x1"] {
            assert_eq!(check_object_name(good), Ok(()), "{good}");
        }
        for (bad, why) in [
            ("", "empty"),
            ("../x", "contains '/'"),
            ("a/b", "contains '/'"),
            ("..", "does not start"),
            ("a..b", "empty part"),
            ("Backups", "contains 'B'"),
            ("-a", "does not start"),
            ("a b", "contains ' '"),
        ] {
            let e = check_object_name(bad).expect_err(bad);
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        assert!(check_object_name(&"a".repeat(254)).is_err());
    }

    #[test]
    fn sizes() {
        for good in ["10Gi", "500Mi", "1", "2G", "100k"] {
            assert_eq!(check_size(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "Gi",
            "0Gi",
            "-1Gi",
            "1.5Gi",
            "10 Gi",
            "10gb",
            "1e3",
            "99999999999999999999Gi",
        ] {
            assert!(check_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_in_bytes() {
        assert_eq!(size_bytes("5Gi"), Some(5 << 30));
        assert_eq!(size_bytes("500M"), Some(500_000_000));
        assert_eq!(size_bytes("7"), Some(7));
        assert_eq!(size_bytes("1.5Gi"), None);
        assert_eq!(size_bytes("999999999999999999Ei"), None);
    }

    #[test]
    fn quantities() {
        for (q, milli) in [
            ("500m", 500),
            ("2", 2000),
            ("0.5", 500),
            (".5", 500),
            ("1.5Gi", 1536 << 20),
            ("128Mi", (128 << 20) * 1000),
            ("1k", 1_000_000),
            ("1e3", 1_000_000),
            ("1E-3", 1),
            ("0.1m", 1),
            ("+1", 1000),
        ] {
            let milli = if q == "1.5Gi" { milli * 1000 } else { milli };
            assert_eq!(quantity_milli(q), Some(milli), "{q}");
        }
        for bad in [
            "", "-1", "1.2.3", "1Kb", "Gi", "1 Gi", ".", "1e", "9e40", "1ki",
        ] {
            assert_eq!(quantity_milli(bad), None, "{bad}");
        }
    }

    #[test]
    fn keys_and_label_values() {
        for good in ["team", "example.com/team", "a_b.c-d", "x/y"] {
            assert_eq!(check_key(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "/a",
            "a/",
            "Example.com/x",
            "a/b/c",
            "-a",
            &"a".repeat(64),
        ] {
            assert!(check_key(bad).is_err(), "{bad}");
        }
        for good in ["", "v1", "a.b_c-d"] {
            assert_eq!(check_label_value(good), Ok(()), "{good}");
        }
        for bad in ["-a", "a b", &"a".repeat(64)] {
            assert!(check_label_value(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn repositories() {
        for good in [
            "quay.io/coreos/etcd",
            "etcd",
            "registry.local:5000/mirror/etcd",
            "localhost:5000/etcd",
            "gcr.io/etcd-development/etcd",
            "a/b__c/d--e",
            "Registry.Example.com/etcd",
        ] {
            assert_eq!(check_repository(good), Ok(()), "{good}");
        }
        for (bad, why) in [
            ("quay.io/coreos/etcd:v3.5.1", "tag"),
            ("quay.io/coreos/etcd@sha256:abc", "digest"),
            ("Quay/etcd/X", "not an image repository"),
            ("", "not an image repository"),
            ("a//b", "not an image repository"),
            ("a/-b", "not an image repository"),
            ("host:port/etcd", "not an image repository"),
        ] {
            let e = check_repository(bad).expect_err(bad);
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    proptest! {
        #[test]
        fn an_accepted_name_is_safe_in_a_path(s in "\\PC{0,80}") {
            if check_object_name(&s).is_ok() {
                prop_assert!(!s.contains('/') && s != "." && s != "..");
                prop_assert!(s.is_ascii());
            }
        }

        #[test]
        fn sizes_never_panic_and_accepted_ones_are_digits_and_a_unit(s in "\\PC{0,24}") {
            if check_size(&s).is_ok() {
                prop_assert!(s.starts_with(|c: char| c.is_ascii_digit()));
                prop_assert!(s.chars().all(|c| c.is_ascii_alphanumeric()));
            }
        }
    }
}
