//! The object store of a scenario with `store: s3` (local platform): the
//! runner starts moto's S3 server (`.venv/bin/moto_server`, installed by
//! ci/setup; `SOAK_MOTO_SERVER` names another) on a free port of
//! 127.0.0.1 for the run, makes the bucket `soak`, gives the operator
//! credentials for it in its environment and points the cluster's
//! `spec.backup.location.objectStore` at `s3://soak` (its backups under
//! `CLUSTER/`). The server
//! stops with the run (its process is killed when dropped).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use etcd_operator::crd::{BackupLocation, ObjectStoreSpec};

use super::Error;
use super::procs::Proc;
use crate::scenario::ClusterSpec;

/// The bucket the runner makes.
const BUCKET: &str = "soak";
/// How long the server gets to answer after it starts.
const START: Duration = Duration::from_secs(30);

/// A running S3 server of the run.
#[derive(Debug)]
pub struct Store {
    _proc: Proc,
    addr: SocketAddr,
}

/// moto's server: `SOAK_MOTO_SERVER`, else `.venv/bin/moto_server`.
fn moto_server() -> PathBuf {
    std::env::var_os("SOAK_MOTO_SERVER")
        .map_or_else(|| ".venv/bin/moto_server".into(), PathBuf::from)
}

impl Store {
    /// Starts the server (its log in `logs/store.log`), waits (bounded)
    /// until it answers and makes the bucket.
    pub fn start(logs: &Path) -> Result<Store, Error> {
        let bin = moto_server();
        if !bin.is_file() {
            return Err(Error::Setup(format!(
                "store: s3 needs moto's S3 server at {} (`bash ci/setup` installs it; \
                 SOAK_MOTO_SERVER names another)",
                bin.display()
            )));
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| Error::io("cannot find a free port for the S3 server", e))?
            .port();
        let mut cmd = Command::new(&bin);
        cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
        let proc = Proc::spawn("moto_server", cmd, &logs.join("store.log"))?;
        let store = Store {
            _proc: proc,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        let since = Instant::now();
        while store.request("GET", "/").is_none() {
            if since.elapsed() > START {
                return Err(Error::Setup(format!(
                    "the S3 server did not answer on {} within {START:?}; its log is {}",
                    store.addr,
                    logs.join("store.log").display()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        match store.request("PUT", &format!("/{BUCKET}")) {
            Some(200) => Ok(store),
            other => Err(Error::Setup(format!(
                "the S3 server on {} did not make bucket {BUCKET}: {other:?}",
                store.addr
            ))),
        }
    }

    /// Where the server listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The environment the operator reaches the server with (moto takes
    /// any key).
    pub fn credentials(&self) -> [(&'static str, &'static str); 3] {
        [
            ("AWS_ACCESS_KEY_ID", "soak"),
            ("AWS_SECRET_ACCESS_KEY", "soak-secret"),
            ("AWS_REGION", "us-east-1"),
        ]
    }

    /// `c` with its backups in this store (`s3://soak`, under `CLUSTER/`).
    pub fn place(&self, c: &ClusterSpec) -> ClusterSpec {
        let mut c = c.clone();
        if let Some(b) = c.spec.backup.as_mut() {
            b.location = Some(BackupLocation {
                object_store: Some(ObjectStoreSpec {
                    url: format!("s3://{BUCKET}"),
                    endpoint: Some(format!("http://{}", self.addr)),
                    ..ObjectStoreSpec::default()
                }),
                ..BackupLocation::default()
            });
        }
        c
    }

    /// One HTTP/1.0 request without a body: the status code, if any came.
    fn request(&self, method: &str, path: &str) -> Option<u16> {
        let mut s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        write!(
            s,
            "{method} {path} HTTP/1.0\r\nHost: {}\r\nContent-Length: 0\r\n\r\n",
            self.addr
        )
        .ok()?;
        let mut head = [0u8; 12];
        s.read_exact(&mut head).ok()?;
        std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
    }
}
