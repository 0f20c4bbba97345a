//! Cluster names, checked as Kubernetes checks them, before a name becomes
//! part of any path, object name or command line, on both platforms.
//!
//! A cluster's name is used as a folder name (`STATE/clusters/NAME`), as
//! the Service `NAME` and the pods `NAME-N` on Kubernetes, and as the etcd
//! member names `NAME-N`. So it must be a DNS label that Kubernetes takes
//! for a Service (RFC 1035: lowercase letters, digits and '-', starting
//! with a letter, ending with a letter or digit), short enough that
//! `NAME-N`, `NAME-N-data` and `NAME-etcd-operator` stay within the
//! 63 characters of a label. A name that fails gets no folder, no worker
//! and no object: it is reported against the file (or resource) it came
//! from.

use std::fmt;

/// Longest cluster name: member names add `-N`, volume claims `-N-data`,
/// the operator's ConfigMap `-etcd-operator`, and each must stay within
/// the 63 characters of a Kubernetes label.
pub const MAX_CLUSTER_NAME_LEN: usize = 40;

/// What [`check_cluster_name`] takes (with at most
/// [`MAX_CLUSTER_NAME_LEN`] characters), as a regular expression.
pub const CLUSTER_NAME_PATTERN: &str = "^[a-z]([-a-z0-9]*[a-z0-9])?$";

/// How much of a bad name an error quotes.
const QUOTE_CHARS: usize = 48;

/// Why a cluster name was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct NameError {
    /// The name, cut to a readable length.
    quoted: String,
    /// What exactly is wrong.
    reason: String,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is not a valid cluster name: {}; use 1 to {MAX_CLUSTER_NAME_LEN} lowercase \
             letters, digits and '-', starting with a letter and ending with a letter or digit \
             (a DNS label, as Kubernetes requires of the Service named after the cluster, short \
             enough that member and pod names NAME-N and volume claims NAME-N-data stay within \
             63 characters)",
            self.quoted, self.reason
        )
    }
}

/// `text` quoted for a message, cut to a readable length (the number of
/// characters left out is said).
pub fn quote(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return format!("{text:?}");
    }
    let head: String = text.chars().take(max_chars).collect();
    format!("{head:?}... ({total} characters)")
}

/// Whether `spec.restore.backup` names a snapshot file by its path (it
/// holds a `/` or ends with `.db`) rather than a backup by its name: one
/// rule for validation, both platforms and the backup stores.
pub fn is_snapshot_path(backup: &str) -> bool {
    backup.contains('/') || backup.ends_with(".db")
}

/// Checks a cluster name (see the module doc for the rule).
pub fn check_cluster_name(name: &str) -> Result<(), NameError> {
    let refuse = |reason: String| {
        Err(NameError {
            quoted: quote(name, QUOTE_CHARS),
            reason,
        })
    };
    let len = name.chars().count();
    if name.is_empty() {
        return refuse("it is empty".into());
    }
    if len > MAX_CLUSTER_NAME_LEN {
        return refuse(format!(
            "it is {len} characters long, more than {MAX_CLUSTER_NAME_LEN}"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return refuse(format!("it contains {c:?}"));
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return refuse("it does not start with a lowercase letter".into());
    }
    if name.ends_with('-') {
        return refuse("it ends with '-'".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_names() {
        for good in ["demo", "a", "my-cluster-2", "a1", &"a".repeat(40)] {
            assert_eq!(check_cluster_name(good), Ok(()), "{good}");
        }
    }

    /// Every name of the data-loss report, and the other ways a name can
    /// escape or break a path or a Kubernetes object name.
    #[test]
    fn bad_names_say_why() {
        for (bad, why) in [
            ("..", "contains '.'"),
            (".", "contains '.'"),
            ("", "it is empty"),
            ("victim/members/victim-0", "contains '/'"),
            ("../../escape", "contains '.'"),
            ("/abs", "contains '/'"),
            ("a\0b", "contains '\\0'"),
            ("Demo", "contains 'D'"),
            ("a_b", "contains '_'"),
            ("a.b", "contains '.'"),
            ("-a", "does not start with a lowercase letter"),
            ("1abc", "does not start with a lowercase letter"),
            ("a-", "ends with '-'"),
            ("démo", "contains 'é'"),
            (&"a".repeat(41), "41 characters long"),
        ] {
            let e = check_cluster_name(bad).expect_err(bad).to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
            assert!(e.contains("NAME-N"), "{e}");
        }
    }

    #[test]
    fn long_names_are_quoted_short() {
        for len in [1000, 100_000] {
            let e = check_cluster_name(&"x".repeat(len))
                .expect_err("too long")
                .to_string();
            assert!(e.contains(&format!("{len} characters long")), "{e}");
            assert!(e.len() < 600, "{} bytes: {e}", e.len());
        }
    }
}
