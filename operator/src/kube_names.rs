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
