//! The running local operator's own word on its clusters: it keeps the
//! latest status of each in memory and hands it out on a unix socket in
//! the state folder (`STATE/operator.sock`), so `etcd-operator status`
//! tells the truth even when the status files cannot be written (a full
//! disk). One connection, one answer: the server writes a JSON
//! [`Answer`] and closes.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixListener;

use crate::crd::EtcdCluster;
use crate::platform::local::LocalPlatform;
use crate::platform::local::events::ClusterEvent;

/// How long `status` waits for the operator's answer.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest answer read (a guard against a stray socket).
const MAX_ANSWER: u64 = 64 << 20;

/// A manifest problem that could not be tied to a cluster, for `status`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FileProblem {
    /// The file.
    pub file: PathBuf,
    /// What is wrong.
    pub message: String,
}

/// What the running operator answers.
#[derive(Debug, Serialize, Deserialize)]
pub struct Answer {
    /// Its process id.
    pub pid: u32,
    /// The latest status of every cluster it manages.
    pub clusters: Vec<EtcdCluster>,
    /// Manifest problems that name no cluster.
    pub problems: Vec<FileProblem>,
    /// What was announced about each cluster, oldest first
    /// ([`crate::platform::local::events`]).
    #[serde(default)]
    pub events: BTreeMap<String, Vec<ClusterEvent>>,
}

/// The socket of the operator running on `state_dir`.
pub fn socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join("operator.sock")
}

/// Listens on the state folder's socket (replacing a stale one: the
/// caller holds the state folder's lock) and answers every connection
/// until the task is dropped. Returns `None`, with a warning, when the
/// socket cannot be made (a path longer than a unix socket allows, say):
/// `status` then reads the files.
/// Each cluster whose deletion is pending gets the condition of
/// `deletions` ([`super::local::pending`]).
pub fn serve(
    state_dir: &Path,
    platform: Arc<LocalPlatform>,
    problems: Arc<Mutex<Vec<FileProblem>>>,
    deletions: super::local::pending::Shown,
) -> Option<tokio::task::JoinHandle<()>> {
    let path = socket_path(state_dir);
    let _ = std::fs::remove_file(&path);
    let listener = match UnixListener::bind(&path) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(
                "cannot listen on {}: {e}; `etcd-operator status` reads the status files only",
                path.display()
            );
            return None;
        }
    };
    Some(tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                continue;
            };
            let mut clusters = platform.statuses();
            {
                let shown = deletions.lock().unwrap_or_else(|e| e.into_inner());
                for c in &mut clusters {
                    super::local::pending::decorate(c, &shown);
                }
            }
            let events = clusters
                .iter()
                .filter_map(|c| c.metadata.name.clone())
                .map(|name| {
                    let events = platform.events(&name);
                    (name, events)
                })
                .filter(|(_, events)| !events.is_empty())
                .collect();
            let answer = Answer {
                pid: std::process::id(),
                clusters,
                problems: problems.lock().unwrap_or_else(|e| e.into_inner()).clone(),
                events,
            };
            let body = serde_json::to_vec(&answer).unwrap_or_default();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(ASK_TIMEOUT, stream.write_all(&body)).await;
                let _ = stream.shutdown().await;
            });
        }
    }))
}

/// Asks the operator running on `state_dir` for its statuses.
pub fn ask(state_dir: &Path) -> Result<Answer, String> {
    let path = socket_path(state_dir);
    let stream = UnixStream::connect(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    stream
        .set_read_timeout(Some(ASK_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let mut body = Vec::new();
    stream
        .take(MAX_ANSWER)
        .read_to_end(&mut body)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_slice(&body).map_err(|e| format!("{}: unreadable answer: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_operator_no_answer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = ask(dir.path()).expect_err("nobody listens");
        assert!(e.contains("operator.sock"), "{e}");
        // A socket file nobody serves (a killed operator's) is no answer
        // either.
        let _listener =
            std::os::unix::net::UnixListener::bind(socket_path(dir.path())).expect("bind");
        drop(_listener);
        assert!(ask(dir.path()).is_err());
    }
}
