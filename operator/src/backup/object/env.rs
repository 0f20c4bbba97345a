//! The settings a bucket's client is built from: the operator's
//! environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`, as each cloud's own tools
//! read it) with a [`StoreEnv`] laid over it. Variables that name a file
//! (a service account key, a web identity token, a federated token) are
//! read the way files a spec names are ([`crate::userfile`]): a regular
//! file, capped, off the async workers and bounded in time, so that a FIFO
//! or a stuck file system named there fails the store with a message
//! instead of blocking the operator (the client's builder would `open` it
//! on the caller's thread).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::backup::{Error, Result};

/// Environment variables whose values are secrets: never in a message.
pub const SECRETS: [&str; 7] = [
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_ACCESS_KEY",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_SERVICE_ACCOUNT_KEY",
];

/// The most a credential file may hold.
const CREDENTIAL_MAX: u64 = 64 << 10;
/// How long reading one may take.
const CREDENTIAL_READ: Duration = Duration::from_secs(5);

/// Variables laid over the process's environment when a bucket is opened:
/// none in the programs (a Kubernetes Job gets its credentials Secret as
/// its environment), a Job's own environment where a test runs the Job's
/// work in its process. Their values never show in `Debug`.
#[derive(Clone, Default)]
pub struct StoreEnv(Arc<Vec<(String, String)>>);

impl std::fmt::Debug for StoreEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|(k, _)| k.as_str()).collect();
        write!(f, "StoreEnv({names:?})")
    }
}

impl StoreEnv {
    /// `vars` over the process's environment.
    pub fn new(vars: Vec<(String, String)>) -> Self {
        StoreEnv(Arc::new(vars))
    }

    /// The value of `name`: this overlay's, else the process's.
    pub fn get(&self, name: &str) -> Option<String> {
        let mine = self.0.iter().rev().find(|(k, _)| k == name);
        mine.map(|(_, v)| v.clone())
            .or_else(|| std::env::var(name).ok())
    }

    /// Every variable whose name starts with `prefix`, the process's first
    /// and this overlay's after them (so a later one wins), as
    /// (lowercased name, value): what each cloud's builder reads.
    pub fn with_prefix(&self, prefix: &str) -> Vec<(String, String)> {
        let process = std::env::vars().filter(|(k, _)| k.starts_with(prefix));
        let mine = self
            .0
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .cloned();
        process
            .chain(mine)
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect()
    }

    /// The secrets these variables hold ([`SECRETS`]), to scrub.
    pub fn secrets(&self) -> Vec<String> {
        SECRETS.iter().filter_map(|var| self.get(var)).collect()
    }
}

/// Settings (lowercased variable names) that name a file the client reads.
const FILE_SETTINGS: [&str; 6] = [
    "google_service_account",
    "google_service_account_path",
    "google_application_credentials",
    "aws_web_identity_token_file",
    "azure_federated_token_file",
    "azure_storage_federated_token_file",
];

/// Whether `key` (lowercased) is a Google service account given as a path,
/// whose content is handed to the client instead.
fn is_service_account_path(key: &str) -> bool {
    matches!(
        key,
        "google_service_account" | "google_service_account_path"
    )
}

/// The settings `pairs` with every file they name checked (a regular file
/// of at most [`CREDENTIAL_MAX`] bytes, read within
/// [`CREDENTIAL_READ`]); a Google service account path becomes the key it
/// holds (`google_service_account_key`), so the client never opens it.
pub async fn checked(pairs: Vec<(String, String)>) -> Result<Vec<(String, String)>> {
    let mut out = Vec::with_capacity(pairs.len());
    for (key, value) in pairs {
        if !FILE_SETTINGS.contains(&key.as_str()) || value.is_empty() {
            out.push((key, value));
            continue;
        }
        let bytes = crate::userfile::read(Path::new(&value), CREDENTIAL_MAX, CREDENTIAL_READ)
            .await
            .map_err(|e| {
                Error::Store(format!(
                    "{} names a file the store's credentials cannot be read from: {e}",
                    key.to_ascii_uppercase()
                ))
            })?;
        if is_service_account_path(&key) {
            let text = String::from_utf8(bytes).map_err(|_| {
                Error::Store(format!(
                    "{} names {value}, which is not a JSON service account key",
                    key.to_ascii_uppercase()
                ))
            })?;
            out.push(("google_service_account_key".into(), text));
        } else {
            out.push((key, value));
        }
    }
    Ok(out)
}

/// `message` with each of `secrets` (at least 4 characters long) replaced
/// by `***`.
pub fn scrub_with(message: &str, secrets: &[String]) -> String {
    let mut out = message.to_string();
    for v in secrets.iter().filter(|v| v.len() >= 4) {
        out = out.replace(v.as_str(), "***");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_credential_file_that_is_a_fifo_fails_at_once_naming_the_variable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("key.json");
        crate::testing::files::mkfifo(&fifo);
        let pairs = vec![(
            "google_service_account".to_string(),
            fifo.display().to_string(),
        )];
        let err = checked(pairs).await.expect_err("a FIFO is refused");
        let text = err.to_string();
        assert!(
            text.contains("GOOGLE_SERVICE_ACCOUNT") && text.contains("FIFO"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_service_account_path_becomes_its_key_and_other_settings_pass() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = dir.path().join("key.json");
        std::fs::write(&key, r#"{"private_key":"k"}"#).expect("write");
        let pairs = vec![
            (
                "google_service_account".to_string(),
                key.display().to_string(),
            ),
            ("google_bucket".to_string(), "b".to_string()),
        ];
        let out = checked(pairs).await.expect("read");
        assert_eq!(
            out,
            vec![
                (
                    "google_service_account_key".to_string(),
                    r#"{"private_key":"k"}"#.to_string()
                ),
                ("google_bucket".to_string(), "b".to_string()),
            ]
        );
    }
}
