//! The environment of the programs the operator starts (etcd members,
//! scratch members for restore checks, etcd's tools): a few variables of
//! its own environment, never all of it.
//!
//! The operator's environment holds the object store's credentials
//! (`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, a service account key
//! ...), which only the operator itself uses (in process, through the
//! `object_store` crate); and etcd reads `ETCD_*` variables as flags, where
//! only the operator's flags may count. Kept: what any program expects
//! (`PATH`, `HOME`, and `TMPDIR`, Go's temporary folder), the time zone
//! and locale (`TZ`, `LANG`, `LC_*`), and the Go runtime's knobs, which a
//! user sets on purpose to bound members on a shared machine
//! (`GOMAXPROCS`, `GOMEMLIMIT`, `GOGC`) or to switch a runtime behaviour
//! (`GODEBUG`). None of them carries a secret.

use std::ffi::OsString;

/// The variables kept by name (and every `LC_*`).
pub const KEPT: [&str; 9] = [
    "PATH",
    "HOME",
    "TMPDIR",
    "TZ",
    "LANG",
    "GOMAXPROCS",
    "GOMEMLIMIT",
    "GOGC",
    "GODEBUG",
];

/// Whether a program the operator starts is given variable `key`: one of
/// [`KEPT`], or a locale category (`LC_*`).
pub fn kept(key: &str) -> bool {
    KEPT.contains(&key) || key.starts_with("LC_")
}

/// The variables of the operator's environment a program it starts is
/// given, for `command.env_clear().envs(vars())`.
pub fn vars() -> Vec<(OsString, OsString)> {
    std::env::vars_os()
        .filter(|(k, _)| k.to_str().is_some_and(kept))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_etcd_flags_are_not_kept() {
        for key in [
            "PATH",
            "HOME",
            "TMPDIR",
            "TZ",
            "LANG",
            "LC_ALL",
            "LC_TIME",
            "GOMAXPROCS",
            "GODEBUG",
        ] {
            assert!(kept(key), "{key}");
        }
        for key in [
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_ACCESS_KEY_ID",
            "GOOGLE_SERVICE_ACCOUNT_KEY",
            "AZURE_STORAGE_ACCESS_KEY",
            "ETCD_DATA_DIR",
            "ETCDCTL_API",
            "RUST_LOG",
            "path",
            "LD_PRELOAD",
        ] {
            assert!(!kept(key), "{key}");
        }
    }
}
